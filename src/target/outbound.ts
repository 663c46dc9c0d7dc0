// How a target reaches its provider's API (the proxy and CAs the agent was configured with;
// src/agent/sending/outbound.ts makes it), and whom it talks to, for --check's route lines.
import type { NodeHttpHandler } from '@smithy/node-http-handler';
import type { Dispatcher } from 'undici';

export interface Outbound {
  /** The proxy a request to `url` goes through, or undefined for a direct connection. */
  proxyFor(url: string): string | undefined;
  /** For people: how the agent reaches `url` (proxy masked, CA named). */
  describe(url: string): string;
  /** For the service client's fetch. */
  readonly dispatcher: Dispatcher;
  /** For the AWS SDK clients' `requestHandler`. */
  awsRequestHandler(): NodeHttpHandler;
}

/** A host the agent talks to besides the database and the service. */
export interface Peer {
  name: string;
  url: string;
}

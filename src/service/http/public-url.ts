// The address agents and browsers reach this service at, as the installer and the setup page
// write it: --public-url when set; otherwise the address the service listens on, never anything
// a request says of itself (a Host header would put an address of the client's choosing into
// the installer another host runs). Listening on every interface (0.0.0.0, ::), the interface
// this connection came in on stands for it: the server's own address, from its socket.
import type { FastifyRequest } from 'fastify';
import ipaddr from 'ipaddr.js';
import type { ServiceConfig } from '../app/config.ts';

export interface ServiceUrl {
  url: string;
  /** False when it is the listen address, --public-url being unset: the installer and the
   * setup page say so. */
  configured: boolean;
}

/** What the installer and the setup page say when there is no --public-url. */
export const UNCONFIGURED_URL_NOTE =
  'this is the address the tuning service listens on, as --public-url (TUNER_PUBLIC_URL) is not set: if agents reach the service at another address (a reverse proxy, a DNS name), set --public-url to it';

const WILDCARDS = new Set(['', '0.0.0.0', '::', '::0', '0:0:0:0:0:0:0:0']);

export function serviceUrl(config: Pick<ServiceConfig, 'publicUrl' | 'host' | 'tls'>, request: FastifyRequest): ServiceUrl {
  if (config.publicUrl !== undefined) return { url: config.publicUrl, configured: true };
  const host = WILDCARDS.has(config.host) ? (request.socket.localAddress ?? '127.0.0.1') : config.host;
  return { url: `${config.tls ? 'https' : 'http'}://${urlHost(host)}:${request.socket.localPort}`, configured: false };
}

/** An address as a URL's host: IPv6 in brackets, an IPv4-mapped IPv6 address as IPv4. */
function urlHost(host: string): string {
  if (!ipaddr.isValid(host)) return host;
  const ip = ipaddr.process(host);
  return ip.kind() === 'ipv6' ? `[${ip.toString()}]` : ip.toString();
}

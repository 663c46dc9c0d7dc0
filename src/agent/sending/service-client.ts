// The agent's side of protocol v1: typed calls, gzip bodies, responses validated, and every
// failure sorted into what the loop must do about it.
import { gzipSync } from 'node:zlib';
import type { z } from 'zod';
import { fetch, type Dispatcher, type Response } from 'undici';
import {
  AgentCheckResponseSchema,
  AgentStartResponseSchema,
  ErrorResponseSchema,
  CodedError,
  MAX_BODY_BYTES,
  ReportResponseSchema,
  routes,
  type AgentCheckRequest,
  type AgentCheckResponse,
  type AgentStartRequest,
  type AgentStartResponse,
  type AgentStopRequest,
  type CommandAckRequest,
  type ReportRequest,
  type ReportResponse,
} from '../../protocol/v1.ts';
import { redact } from '../base/redact.ts';
import { proxyRefusal, whyFetchFailed } from './fetch-failure.ts';
import { AGENT_VERSION } from '../base/version.ts';

const REQUEST_TIMEOUT_MS = 30_000;
/** The largest answer the agent reads: the protocol's own bound on a body. A longer one (a broken
 * proxy, a hostile server) is refused after that many bytes, so that it cannot fill the memory. */
export const MAX_ANSWER_BYTES = MAX_BODY_BYTES;

/** The service will not accept this agent as configured (API key, database id, another agent):
 * retrying cannot help; the agent exits with a clear message. */
export class ServiceRejectedError extends CodedError<string> {
  override name = 'ServiceRejectedError';
}

/** The service refused this one request (a bug or a version mismatch): retrying the same body
 * cannot help, so the caller drops it and goes on. */
export class RequestRefusedError extends Error {
  override name = 'RequestRefusedError';
}

/** The lease lapsed (for example after a long outage), or the service refused a report's seq as
 * out of order (409 `report_out_of_order`): start again, which begins a new sequence. */
export class LeaseExpiredError extends Error {
  override name = 'LeaseExpiredError';
}

/** Anything that may pass: network errors, time-outs, 5xx, 429. Retry with backoff. */
export class ServiceUnavailableError extends Error {
  override name = 'ServiceUnavailableError';
}

export interface ServiceClient {
  start(body: AgentStartRequest): Promise<AgentStartResponse>;
  report(body: ReportRequest): Promise<ReportResponse>;
  ack(commandId: string, body: CommandAckRequest): Promise<void>;
  stop(body: AgentStopRequest): Promise<void>;
  /** The preflight's call: the key and database id accepted, the database's target; changes nothing. */
  check(body: AgentCheckRequest): Promise<AgentCheckResponse>;
}

export interface ServiceClientOptions {
  serverUrl: string;
  apiKey: string;
  databaseId: string;
  /** The route to the service: proxy and CAs (src/agent/sending/outbound.ts); Node's default without. */
  dispatcher?: Dispatcher;
}

export function createServiceClient(options: ServiceClientOptions): ServiceClient {
  const base = options.serverUrl.replace(/\/+$/, '');

  async function call<T>(path: string, body: unknown, schema: z.ZodType<T> | null): Promise<T | undefined> {
    let response: Response;
    try {
      response = await fetch(`${base}${path}`, {
        ...(options.dispatcher && { dispatcher: options.dispatcher }),
        method: 'POST',
        headers: {
          authorization: `Bearer ${options.apiKey}`,
          'content-type': 'application/json',
          'content-encoding': 'gzip',
          'user-agent': `tuner-agent/${AGENT_VERSION}`,
        },
        body: gzipSync(JSON.stringify(body)),
        signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
      });
    } catch (err) {
      throw new ServiceUnavailableError(`the tuning service at ${base} cannot be reached: ${redact(whyFetchFailed(err))}`);
    }
    // A proxy that forwards plain HTTP (no tunnel) answers for itself.
    if (response.status === 407) {
      await response.body?.cancel().catch(() => undefined);
      throw new ServiceUnavailableError(`the tuning service at ${base} cannot be reached: ${proxyRefusal(407)}`);
    }
    const text = await readAnswer(response, path);
    if (response.ok) {
      if (!schema) return undefined;
      let json: unknown;
      try {
        json = JSON.parse(text);
      } catch {
        throw new ServiceUnavailableError(`the tuning service answered ${path} with a body that is not JSON`);
      }
      const parsed = schema.safeParse(json);
      if (!parsed.success) {
        const issue = parsed.error.issues[0];
        throw new ServiceUnavailableError(
          `the tuning service answered ${path} with an unexpected body (${issue?.path.join('.')}: ${issue?.message}); is it a tuner service of protocol v1?`,
        );
      }
      return parsed.data;
    }
    const error = ErrorResponseSchema.safeParse(safeJson(text));
    const code = error.success ? error.data.error.code : `http_${response.status}`;
    const message = redact(error.success ? error.data.error.message : `HTTP ${response.status}`);
    if (response.status === 401 || response.status === 403) {
      throw new ServiceRejectedError(
        code,
        `the tuning service rejected the API key for database ${options.databaseId} (${message}): check tuner.api_key, or create a new key on the agent setup page`,
      );
    }
    if (response.status === 404) {
      throw new ServiceRejectedError(
        code,
        `the tuning service does not know database ${options.databaseId} (${message}): check tuner.database_id against the agent setup page`,
      );
    }
    if (response.status === 409 && code === 'agent_conflict') throw new ServiceRejectedError(code, message);
    if (response.status === 409) throw new LeaseExpiredError(message);
    if (response.status >= 500 || response.status === 429 || response.status === 408) {
      throw new ServiceUnavailableError(`the tuning service answered ${path} with ${response.status}: ${message}`);
    }
    throw new RequestRefusedError(`the tuning service refused ${path} (${response.status} ${code}): ${message}`);
  }

  return {
    start: async (body) => (await call(routes.agentStart(options.databaseId), body, AgentStartResponseSchema))!,
    report: async (body) => (await call(routes.report(options.databaseId), body, ReportResponseSchema))!,
    ack: async (commandId, body) => void (await call(routes.ack(options.databaseId, commandId), body, null)),
    stop: async (body) => void (await call(routes.agentStop(options.databaseId), body, null)),
    check: async (body) => (await call(routes.agentCheck(options.databaseId), body, AgentCheckResponseSchema))!,
  };
}

/** The answer's text, read up to MAX_ANSWER_BYTES. */
async function readAnswer(response: Response, path: string): Promise<string> {
  const tooLarge = (size: string) =>
    new ServiceUnavailableError(
      `the tuning service answered ${path} with a body larger than ${MAX_ANSWER_BYTES} bytes (${size}); the agent refused it`,
    );
  const declared = Number(response.headers.get('content-length') ?? NaN);
  if (declared > MAX_ANSWER_BYTES) {
    await response.body?.cancel().catch(() => undefined);
    throw tooLarge(`${declared} bytes announced`);
  }
  if (!response.body) return '';
  const reader = (response.body as ReadableStream<Uint8Array>).getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      size += value.byteLength;
      if (size > MAX_ANSWER_BYTES) {
        await reader.cancel().catch(() => undefined);
        throw tooLarge('the rest was not read');
      }
      chunks.push(value);
    }
  } catch (err) {
    if (err instanceof ServiceUnavailableError) throw err;
    throw new ServiceUnavailableError(`the tuning service's answer to ${path} broke off: ${redact((err as Error).message)}`);
  }
  return Buffer.concat(chunks).toString('utf8');
}

function safeJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

/** Exponential backoff with equal jitter: attempt n waits between half and all of min(2^n s, maxMs),
 * so that agents cut off together do not come back together. */
export function backoffMs(attempt: number, maxMs = 60_000, random = Math.random): number {
  const ceiling = Math.min(maxMs, 1000 * 2 ** Math.min(attempt, 16));
  return Math.round(ceiling / 2 + random() * (ceiling / 2));
}

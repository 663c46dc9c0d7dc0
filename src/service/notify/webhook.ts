// An optional webhook for the events people want to hear about between visits (issue 31: the kept
// configuration's gain gone, the workload changed). One POST per event, a JSON body, signed
// (webhook-signature.ts), retried with exponential backoff and jitter on network errors, timeouts,
// 5xx and 429 (bounded in attempts and in total time), not retried on any other answer. An event
// id is delivered once by a notifier: emitting it again returns the first delivery's outcome.
// Neither the secret nor the URL's query or credentials ever reach a log line or an outcome.
// This notifier holds its deliveries in memory; the service sends through the outbox
// (outbox.ts), which uses this notifier's attempt and retry rule and survives restarts and
// replicas. docs/notifications.md describes it for the people who run a receiver.
import { setTimeout as sleep } from 'node:timers/promises';
import { fetch, type Dispatcher, type Response } from 'undici';
import { z } from 'zod';
import { DestinationRefused } from './destinations.ts';
import { EVENT_ID_HEADER, SIGNATURE_HEADER, signWebhook } from './webhook-signature.ts';

/** The events sent: the watch's (part 1), the workload comparison's (part 2), and a test one. */
export const WEBHOOK_EVENT_KINDS = ['kept_gain_gone', 'workload_changed', 'test'] as const;
export type WebhookEventKind = (typeof WEBHOOK_EVENT_KINDS)[number];

/** Where a webhook goes and how the receiver knows the service: the same rules for the
 * service-wide webhook (TUNER_WEBHOOK_URL) and an organization's (actions.ts). */
export const WebhookUrlSchema = z
  .url({ protocol: /^https?$/, error: 'expected an http:// or https:// URL' })
  .refine((u) => !URL.canParse(u) || (new URL(u).username === '' && new URL(u).password === ''), {
    error: 'the URL must not carry credentials: the signature (secret) is how the receiver knows the service',
  });
/** Shared with the receiver, which checks the signature with it. */
export const WebhookSecretSchema = z
  .string()
  .min(32, 'expected a secret of at least 32 characters')
  .max(512, 'expected a secret of at most 512 characters');

/** How deliveries are attempted and retried: the same for every destination. */
export const WebhookDeliverySchema = z.strictObject({
  /** Attempts in all, the first included. */
  maxAttempts: z.number().int().min(1).max(20).default(8),
  /** No attempt starts later than this after the first (the event is then given up). */
  maxTotalSeconds: z.number().min(1).max(86_400).default(900),
  /** One attempt's limit: connecting, sending, and the receiver's answer. */
  attemptTimeoutMs: z.number().int().min(100).max(120_000).default(10_000),
  /** The first retry waits about this long; each next one twice as long, up to maxBackoffMs. */
  initialBackoffMs: z.number().int().min(1).max(60_000).default(1000),
  maxBackoffMs: z.number().int().min(1).max(3_600_000).default(120_000),
});
export type WebhookDelivery = z.infer<typeof WebhookDeliverySchema>;
export type WebhookDeliveryInput = z.input<typeof WebhookDeliverySchema>;

export const WebhookConfigSchema = WebhookDeliverySchema.extend({ url: WebhookUrlSchema, secret: WebhookSecretSchema });
export type WebhookConfig = z.infer<typeof WebhookConfigSchema>;
export type WebhookConfigInput = z.input<typeof WebhookConfigSchema>;

export interface WebhookEvent {
  /** Unique per event (a UUID): the receiver's key to drop a repeat. */
  id: string;
  kind: WebhookEventKind;
  database: { id: string; name: string };
  /** When the service noticed what the event says. */
  at: Date;
  /** What the event is about, in its kind's terms (docs/notifications.md). */
  details: Record<string, unknown>;
}

/** The JSON body, as the receiver parses it. */
export function webhookBody(event: WebhookEvent): string {
  return JSON.stringify({ id: event.id, kind: event.kind, database: event.database, time: event.at.toISOString(), details: event.details });
}

export type DeliveryOutcome =
  | { status: 'delivered'; eventId: string; attempts: number; httpStatus: number }
  /** retryable: the bound was reached while the receiver kept failing; else it refused (4xx). */
  | { status: 'failed'; eventId: string; attempts: number; retryable: boolean; reason: string }
  /** The notifier was closed before the event was delivered. */
  | { status: 'cancelled'; eventId: string; attempts: number };

export interface WebhookLogEntry {
  level: 'info' | 'warn';
  message: string;
  eventId: string;
  kind: WebhookEventKind;
  /** The receiver's scheme, host and path: never its query or credentials. */
  receiver: string;
  /** The organization's webhook it went to; absent for the service-wide one. */
  webhookId?: string;
  attempt?: number;
  httpStatus?: number;
  error?: string;
  retryInMs?: number;
}

export interface WebhookOptions {
  log?: (entry: WebhookLogEntry) => void;
  /** 0 ≤ x < 1; Math.random by default (tests pin it). */
  random?: () => number;
  /** Event ids remembered, oldest forgotten first. */
  rememberedEvents?: number;
  /** How connections are made: an organization's webhook goes through the one that checks its
   * destinations (destinations.ts); undici's global dispatcher by default. */
  dispatcher?: Dispatcher;
}

/** One attempt's end: delivered, worth retrying, or refused (not retried): by the receiver's
 * answer (httpStatus), or before any request, its destination not allowed (destinations.ts). */
export type AttemptResult =
  | { kind: 'ok'; httpStatus: number }
  | { kind: 'retry'; why: string; httpStatus?: number; retryAfterMs?: number }
  | { kind: 'refused'; why: string; httpStatus?: number };

/** The log line of a refused event: the reason (the receiver's answer, or the destination's
 * refusal) is in its `error`. */
export const REFUSED_MESSAGE = 'webhook: the event was refused; not retried';

/** Retry-After in seconds or as an HTTP date, in ms from now; null when absent or unreadable. */
function retryAfterMs(value: string | null, now: number): number | null {
  if (value === null) return null;
  if (/^\d+$/.test(value.trim())) return Number(value.trim()) * 1000;
  const date = Date.parse(value);
  return Number.isNaN(date) ? null : Math.max(0, date - now);
}

/** What went wrong with the request, by its code or name only (an error's message may repeat the URL). */
function describeError(err: unknown): string {
  if (typeof err !== 'object' || err === null) return 'unknown error';
  const cause = (err as { cause?: unknown }).cause;
  const code = (cause as { code?: unknown } | undefined)?.code ?? (err as { code?: unknown }).code;
  if (typeof code === 'string' && /^[A-Z0-9_]{2,40}$/.test(code)) return code;
  const name = (err as { name?: unknown }).name;
  return name === 'TimeoutError' ? 'timed out' : typeof name === 'string' ? name : 'network error';
}

/** A receiver's URL as logs, pages and the audit log show it: scheme, host and path, never its
 * query (which may hold a token) nor credentials. */
export function receiverOf(url: string): string {
  const u = new URL(url);
  return `${u.protocol}//${u.host}${u.pathname}`;
}

export class WebhookNotifier {
  readonly #config: WebhookConfig;
  readonly #receiver: string;
  readonly #log: (entry: WebhookLogEntry) => void;
  readonly #random: () => number;
  readonly #remembered: number;
  readonly #dispatcher: Dispatcher | undefined;
  /** Each event id's delivery, in flight or done: a repeat gets the same one. */
  readonly #deliveries = new Map<string, Promise<DeliveryOutcome>>();
  readonly #closing = new AbortController();

  constructor(config: WebhookConfigInput, options: WebhookOptions = {}) {
    this.#config = WebhookConfigSchema.parse(config);
    this.#receiver = receiverOf(this.#config.url);
    this.#log = options.log ?? (() => undefined);
    this.#random = options.random ?? Math.random;
    this.#remembered = options.rememberedEvents ?? 10_000;
    this.#dispatcher = options.dispatcher;
  }

  /** Delivers the event, once per event id: a repeat returns the first delivery's outcome. */
  notify(event: WebhookEvent): Promise<DeliveryOutcome> {
    const known = this.#deliveries.get(event.id);
    if (known) return known;
    const delivery = this.#deliver(event);
    this.#deliveries.set(event.id, delivery);
    if (this.#deliveries.size > this.#remembered) this.#deliveries.delete(this.#deliveries.keys().next().value!);
    return delivery;
  }

  /** Stops retrying: deliveries waiting for their next attempt end `cancelled`, and an attempt
   * in flight is aborted. */
  close(): void {
    this.#closing.abort();
  }

  get closed(): boolean {
    return this.#closing.signal.aborted;
  }

  get config(): WebhookConfig {
    return this.#config;
  }

  /** The receiver's scheme, host and path, for log lines. */
  get receiver(): string {
    return this.#receiver;
  }

  /**
   * What to do after attempt `attempt` failed with `result`, `elapsedMs` after the event's first
   * attempt: the wait before the next one (a receiver's Retry-After honoured when longer than our
   * own wait, within the bounds), or null when a bound is reached and the event is given up.
   */
  nextRetry(attempt: number, result: Extract<AttemptResult, { kind: 'retry' }>, elapsedMs: number): number | null {
    const wait = Math.max(this.backoffMs(attempt + 1), Math.min(result.retryAfterMs ?? 0, this.#config.maxBackoffMs));
    if (attempt >= this.#config.maxAttempts || elapsedMs + wait > this.#config.maxTotalSeconds * 1000) return null;
    return wait;
  }

  /** The wait before retry `attempt` (2, 3, …): exponential, with equal jitter (half fixed, half
   * random), so that receivers that come back are not hit by every service at the same instant. */
  backoffMs(attempt: number): number {
    const ceiling = Math.min(this.#config.maxBackoffMs, this.#config.initialBackoffMs * 2 ** (attempt - 2));
    return Math.round(ceiling / 2 + (this.#random() * ceiling) / 2);
  }

  /** One signed POST of `body` (the event's, webhookBody) for event `eventId`. */
  async attempt(eventId: string, body: string): Promise<AttemptResult> {
    const timestamp = Math.floor(Date.now() / 1000);
    let response: Response;
    try {
      response = await fetch(this.#config.url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'user-agent': 'tuner-service webhook',
          [EVENT_ID_HEADER]: eventId,
          [SIGNATURE_HEADER]: signWebhook(this.#config.secret, timestamp, body),
        },
        body,
        // A redirect would carry a signed body somewhere nobody configured: not followed.
        redirect: 'manual',
        signal: AbortSignal.any([AbortSignal.timeout(this.#config.attemptTimeoutMs), this.#closing.signal]),
        ...(this.#dispatcher && { dispatcher: this.#dispatcher }),
      });
      // The answer's body is not read (nor logged): its status says all. Released for the socket.
      await response.body?.cancel().catch(() => undefined);
    } catch (err) {
      const cause = (err as { cause?: unknown }).cause;
      // Its message names the address and why, never the URL: safe for the outcome and the log.
      if (cause instanceof DestinationRefused) return { kind: 'refused', why: `the destination is not allowed: ${cause.message}` };
      return { kind: 'retry', why: describeError(err) };
    }
    const status = response.status;
    if (status >= 200 && status < 300) return { kind: 'ok', httpStatus: status };
    if (status === 429 || status >= 500) {
      const after = retryAfterMs(response.headers.get('retry-after'), Date.now());
      return { kind: 'retry', why: `HTTP ${status}`, httpStatus: status, ...(after !== null && { retryAfterMs: after }) };
    }
    return {
      kind: 'refused',
      why: `the receiver answered HTTP ${status}${status >= 300 && status < 400 ? ' (a redirect, not followed)' : ''}`,
      httpStatus: status,
    };
  }

  async #deliver(event: WebhookEvent): Promise<DeliveryOutcome> {
    const body = webhookBody(event);
    const started = Date.now();
    const base = { eventId: event.id, kind: event.kind, receiver: this.#receiver };
    for (let attempt = 1; ; attempt++) {
      if (this.#closing.signal.aborted) return { status: 'cancelled', eventId: event.id, attempts: attempt - 1 };
      const result = await this.attempt(event.id, body);
      if (result.kind === 'ok') {
        this.#log({ level: 'info', message: 'webhook: event delivered', ...base, attempt, httpStatus: result.httpStatus });
        return { status: 'delivered', eventId: event.id, attempts: attempt, httpStatus: result.httpStatus };
      }
      const httpStatus = result.httpStatus === undefined ? {} : { httpStatus: result.httpStatus };
      if (result.kind === 'refused') {
        this.#log({ level: 'warn', message: REFUSED_MESSAGE, ...base, attempt, error: result.why, ...httpStatus });
        return { status: 'failed', eventId: event.id, attempts: attempt, retryable: false, reason: result.why };
      }
      if (this.#closing.signal.aborted) return { status: 'cancelled', eventId: event.id, attempts: attempt };
      const elapsed = Date.now() - started;
      const wait = this.nextRetry(attempt, result, elapsed);
      if (wait === null) {
        const reason = `gave up after ${attempt} attempts in ${Math.round(elapsed / 1000)} s; the last: ${result.why}`;
        this.#log({ level: 'warn', message: `webhook: ${reason}`, ...base, attempt, error: result.why, ...httpStatus });
        return { status: 'failed', eventId: event.id, attempts: attempt, retryable: true, reason };
      }
      this.#log({
        level: 'warn',
        message: 'webhook: attempt failed; retrying',
        ...base,
        attempt,
        error: result.why,
        retryInMs: wait,
        ...httpStatus,
      });
      try {
        await sleep(wait, undefined, { signal: this.#closing.signal });
      } catch {
        return { status: 'cancelled', eventId: event.id, attempts: attempt };
      }
    }
  }
}

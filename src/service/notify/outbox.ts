// The service's webhook sender: events go into the outbox (webhook_outbox, written in the same
// transaction as whatever raised them), one row per destination (each webhook of the event's
// organization, and the service-wide one when configured), and every replica runs this sender,
// which claims due rows, makes one attempt each (webhook.ts: signed with that destination's
// secret, the same body and id every time), and writes the result back: delivered, given up, or
// the time of the next attempt (the notifier's backoff and bounds, counted from the row's first
// attempt as the storage has it). So a row is sent by one replica at a time, is never started
// again once delivered, and one not yet delivered when the service stops is sent when it (or
// another replica) runs again.
import { randomUUID } from 'node:crypto';
import type { Dispatcher } from 'undici';
import { repeatEvery, type Repeating } from '../repeat.ts';
import { WebhookDestinations } from './destinations.ts';
import type { ClaimedWebhook, WebhookDestination, WebhookOutboxStore, WebhookSettlement } from './store.ts';
import {
  REFUSED_MESSAGE,
  WebhookDeliverySchema,
  WebhookNotifier,
  type WebhookDelivery,
  type WebhookDeliveryInput,
  type WebhookLogEntry,
} from './webhook.ts';

/** One attempt of a round: the event delivered, given up (`failed`), to be retried (`pending`), or
 * `cancelled` (the sender was closed during it: the event stays pending, its attempt uncounted). */
export interface OutboxAttempt {
  eventId: string;
  state: 'delivered' | 'failed' | 'pending' | 'cancelled';
  /** Attempts counted for the event so far. */
  attempts: number;
  /** Why it is not delivered: the receiver's answer, the network error's code, or why its
   * destination is not allowed; null when delivered. */
  error: string | null;
}

export interface OutboxOptions {
  /** The service-wide webhook (TUNER_WEBHOOK_URL), which receives every organization's events. */
  serviceWide?: { url: string; secret: string } | undefined;
  /** Where organizations' webhooks may connect (public addresses only by default); the
   * service-wide webhook, the operator's own, is not checked. */
  destinations?: WebhookDestinations;
  /** How attempts are made and retried, for every destination (the defaults unless told). */
  delivery?: WebhookDeliveryInput;
  log?: (entry: WebhookLogEntry) => void;
  /** Events claimed per round, sent concurrently. */
  batch?: number;
  /** This replica's id in the claims (random by default). */
  claimer?: string;
}

/** Beyond one attempt's timeout, how long a claim lasts: a replica that dies mid-attempt
 * holds its events this long before another may send them. */
const CLAIM_MARGIN_SECONDS = 30;

export class WebhookOutbox {
  readonly #store: WebhookOutboxStore;
  readonly #delivery: WebhookDelivery;
  readonly #serviceWide: WebhookNotifier | null;
  /** The organizations' webhooks' notifiers, by webhook id (its URL and secret never change). */
  readonly #notifiers = new Map<string, WebhookNotifier>();
  /** Shared by the organizations' notifiers: every connection it makes is to a checked address. */
  readonly #organizationsDispatcher: Dispatcher;
  readonly #log: (entry: WebhookLogEntry) => void;
  readonly #batch: number;
  readonly #claimer: string;
  #closed = false;
  #ticker: Repeating | null = null;
  #round: Promise<OutboxAttempt[]> | null = null;
  #again = false;

  constructor(store: WebhookOutboxStore, options: OutboxOptions = {}) {
    this.#store = store;
    this.#delivery = WebhookDeliverySchema.parse(options.delivery ?? {});
    this.#serviceWide = options.serviceWide ? new WebhookNotifier({ ...this.#delivery, ...options.serviceWide }) : null;
    this.#organizationsDispatcher = (options.destinations ?? new WebhookDestinations([])).dispatcher();
    this.#log = options.log ?? (() => undefined);
    this.#batch = options.batch ?? 10;
    this.#claimer = options.claimer ?? randomUUID();
  }

  /** Whether the service-wide webhook is configured: events are written for it then. */
  get serviceWide(): boolean {
    return this.#serviceWide !== null;
  }

  /** The notifier of a claimed row's destination (null: the service-wide one, which this replica
   * has, as it claims such rows only then). */
  #notifierFor(destination: WebhookDestination | null): WebhookNotifier {
    if (!destination) return this.#serviceWide!;
    let notifier = this.#notifiers.get(destination.webhookId);
    if (!notifier) {
      notifier = new WebhookNotifier(
        { ...this.#delivery, url: destination.url, secret: destination.secret },
        { dispatcher: this.#organizationsDispatcher },
      );
      this.#notifiers.set(destination.webhookId, notifier);
      // Claimed as the sender closed: its attempt ends at once and the row is given back.
      if (this.#closed) notifier.close();
    }
    return notifier;
  }

  /** Claims the events due and makes one attempt each. Rounds do not overlap: a call during one
   * waits for it and runs another. */
  async sendDue(): Promise<OutboxAttempt[]> {
    while (this.#round) {
      this.#again = true;
      await this.#round.catch(() => undefined);
    }
    this.#round = this.#sendRound();
    try {
      return await this.#round;
    } finally {
      this.#round = null;
    }
  }

  async #sendRound(): Promise<OutboxAttempt[]> {
    const outcomes: OutboxAttempt[] = [];
    do {
      this.#again = false;
      if (this.#closed) break;
      const claimSeconds = this.#delivery.attemptTimeoutMs / 1000 + CLAIM_MARGIN_SECONDS;
      const claimed = await this.#store.claimWebhooks(this.#claimer, this.#batch, claimSeconds, this.serviceWide);
      outcomes.push(...(await Promise.all(claimed.map((c) => this.#send(c)))));
      // A full batch: more may be due.
      if (claimed.length === this.#batch) this.#again = true;
    } while (this.#again);
    return outcomes;
  }

  async #send(event: ClaimedWebhook): Promise<OutboxAttempt> {
    const attempt = event.attempts + 1;
    const started = Date.now();
    const notifier = this.#notifierFor(event.destination);
    const result = await notifier.attempt(event.eventId, event.body);
    const base = {
      eventId: event.eventId,
      kind: event.kind,
      receiver: notifier.receiver,
      ...(event.destination && { webhookId: event.destination.webhookId }),
      attempt,
    };
    if (this.#closed) {
      // Stopping: whatever the attempt became, the event stays pending (a receiver that took it
      // drops the repeat by its id), and the claim is given back for the next replica or start.
      await this.#store.releaseWebhook(this.#claimer, event.deliveryId).catch(() => undefined);
      return { eventId: event.eventId, state: 'cancelled', attempts: event.attempts, error: null };
    }
    let settlement: WebhookSettlement;
    if (result.kind === 'ok') {
      settlement = { state: 'delivered', attempts: attempt, lastError: null };
      this.#log({ level: 'info', message: 'webhook: event delivered', ...base, httpStatus: result.httpStatus });
    } else {
      const httpStatus = result.httpStatus === undefined ? {} : { httpStatus: result.httpStatus };
      const elapsed = event.claimedAt.getTime() - event.firstAttemptAt.getTime() + (Date.now() - started);
      const wait = result.kind === 'retry' ? notifier.nextRetry(attempt, result, elapsed) : null;
      if (result.kind === 'refused') {
        settlement = { state: 'failed', attempts: attempt, lastError: result.why };
        this.#log({ level: 'warn', message: REFUSED_MESSAGE, ...base, error: result.why, ...httpStatus });
      } else if (wait === null) {
        const reason = `gave up after ${attempt} attempts in ${Math.round(elapsed / 1000)} s; the last: ${result.why}`;
        settlement = { state: 'failed', attempts: attempt, lastError: result.why };
        this.#log({ level: 'warn', message: `webhook: ${reason}`, ...base, error: result.why, ...httpStatus });
      } else {
        settlement = { state: 'pending', attempts: attempt, lastError: result.why, retryInMs: wait };
        this.#log({
          level: 'warn',
          message: 'webhook: attempt failed; retrying',
          ...base,
          error: result.why,
          retryInMs: wait,
          ...httpStatus,
        });
      }
    }
    const settled = await this.#store.settleWebhook(this.#claimer, event.deliveryId, settlement);
    if (!settled) {
      // The claim lapsed during a very slow attempt and another replica took the event (its
      // result is the one kept), or its webhook was removed meanwhile.
      this.#log({
        level: 'warn',
        message: 'webhook: the claim lapsed during the attempt (another replica has the event) or the webhook was removed',
        ...base,
      });
    }
    return { eventId: event.eventId, state: settlement.state, attempts: attempt, error: settlement.lastError };
  }

  /** Sends what is due now, without waiting for the next round (after an event is written). */
  kick(): void {
    void this.sendDue().catch(() => undefined);
  }

  /** Sends what is due every `everyMs` (retries become due by their backoff); errors are logged. */
  start(everyMs: number, onError: (err: unknown) => void): void {
    this.#ticker ??= repeatEvery(
      async () => {
        try {
          await this.sendDue();
        } catch (err) {
          onError(err);
        }
      },
      everyMs,
      { atOnce: true },
    );
  }

  /** Stops: an attempt in flight is aborted and its event given back; nothing more is claimed. */
  async close(): Promise<void> {
    this.#closed = true;
    this.#serviceWide?.close();
    for (const notifier of this.#notifiers.values()) notifier.close();
    await this.#ticker?.stop();
    await this.#round?.catch(() => undefined);
    await this.#organizationsDispatcher.destroy();
  }
}

// What the webhooks ask of their storage: an organization's webhooks (actions.ts), and the outbox
// (outbox.ts): each event written once per destination (the organization's webhooks, and the
// service-wide one), each row claimed by one replica at a time for an attempt, and the attempt's
// result written back by that replica.
import type { WebhookEventKind } from './webhook.ts';

/** An event to send, as the outbox keeps it. */
export interface OutboxEvent {
  /** The event's id (Tuner-Event-Id): a second enqueue of it is a no-op. */
  eventId: string;
  /** Null for an event about no database (a test event). */
  databaseId: string | null;
  kind: WebhookEventKind;
  /** Exactly what is sent and signed (webhookBody). */
  body: string;
  /** Also to the service-wide webhook (TUNER_WEBHOOK_URL): true when one is configured. */
  serviceWide: boolean;
}

/** An organization's webhook, as an attempt needs it. */
export interface WebhookDestination {
  webhookId: string;
  url: string;
  secret: string;
}

/** An event claimed for an attempt to one destination, with what the retry rule needs. */
export interface ClaimedWebhook {
  /** The outbox row: this event to this destination. */
  deliveryId: string;
  /** The organization's webhook it goes to; null for the service-wide one. */
  destination: WebhookDestination | null;
  eventId: string;
  kind: WebhookEventKind;
  body: string;
  /** Attempts made before this one. */
  attempts: number;
  firstAttemptAt: Date;
  /** The storage's clock at the claim (the bounds are counted on it, not on a replica's). */
  claimedAt: Date;
}

/** What became of an attempt: delivered, given up, or to be retried in `retryInMs`. */
export type WebhookSettlement =
  | { state: 'delivered'; attempts: number; lastError: null }
  | { state: 'failed'; attempts: number; lastError: string }
  | { state: 'pending'; attempts: number; lastError: string; retryInMs: number };

export interface WebhookOutboxStore {
  /** Writes each event once per destination not written yet (by event id): to each webhook of
   * its database's organization that takes its kind, and to the service-wide one when the event
   * says so; how many rows were new. */
  enqueueWebhooks(events: readonly OutboxEvent[]): Promise<number>;
  /** Claims at most `limit` pending rows that are due and not claimed by anyone, for
   * `claimSeconds`, for `claimer` (each replica's own id): two claimers never get the same one.
   * Rows for the service-wide webhook only when `serviceWide` (this replica has one configured). */
  claimWebhooks(claimer: string, limit: number, claimSeconds: number, serviceWide: boolean): Promise<ClaimedWebhook[]>;
  /** Writes the attempt's result and ends the claim, if `claimer` still holds it (false if not). */
  settleWebhook(claimer: string, deliveryId: string, settlement: WebhookSettlement): Promise<boolean>;
  /** Ends `claimer`'s claim without an attempt counted (the replica is stopping). */
  releaseWebhook(claimer: string, deliveryId: string): Promise<void>;
}

/** An organization's webhook as people see it: never its secret. */
export interface Webhook {
  id: string;
  organizationId: string;
  /** As given; its query may hold a token: pages, logs and the audit log show receiverOf(url). */
  url: string;
  /** The kinds it receives; null: all. */
  events: WebhookEventKind[] | null;
  createdBy: string | null;
  createdAt: Date;
}

export interface WebhookStore {
  createWebhook(webhook: Omit<Webhook, 'createdAt'> & { secret: string }): Promise<Webhook>;
  /** The organization's webhooks, oldest first. */
  listWebhooks(organizationId: string): Promise<Webhook[]>;
  /** The webhook removed, with its rows in the outbox; null when the organization has no such one. */
  deleteWebhook(organizationId: string, webhookId: string): Promise<Webhook | null>;
}

// What the webhook's outbox asks of its storage (outbox.ts): events written once per id, claimed
// by one replica at a time for an attempt, and the attempt's result written back by that replica.
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
}

/** An event claimed for an attempt, with what the retry rule needs. */
export interface ClaimedWebhook {
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
  /** Writes the events not written yet (by id); how many were new. */
  enqueueWebhooks(events: readonly OutboxEvent[]): Promise<number>;
  /** Claims at most `limit` pending events that are due and not claimed by anyone, for
   * `claimSeconds`, for `claimer` (each replica's own id): two claimers never get the same one. */
  claimWebhooks(claimer: string, limit: number, claimSeconds: number): Promise<ClaimedWebhook[]>;
  /** Writes the attempt's result and ends the claim, if `claimer` still holds it (false if not). */
  settleWebhook(claimer: string, eventId: string, settlement: WebhookSettlement): Promise<boolean>;
  /** Ends `claimer`'s claim without an attempt counted (the replica is stopping). */
  releaseWebhook(claimer: string, eventId: string): Promise<void>;
}

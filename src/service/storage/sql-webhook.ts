// The webhook's outbox (notify/store.ts) in webhook_outbox. Claims take due rows with FOR UPDATE
// SKIP LOCKED and stamp them with the claimer and a deadline, so that replicas polling at the
// same instant split the rows instead of sending one twice; a claim that lapses (a replica that
// died mid-attempt) lets another replica take the row.
import type { ClaimedWebhook, OutboxEvent, WebhookOutboxStore } from '../notify/store.ts';
import type { WebhookEventKind } from '../notify/webhook.ts';
import type { Queryable } from './driver.ts';

/** Writes the events not written yet; `q` may be a transaction's (the watch writes its events
 * and their webhook in one). */
export async function insertOutboxEvents(q: Queryable, events: readonly OutboxEvent[]): Promise<number> {
  let added = 0;
  for (const e of events) {
    const rows = await q.query(
      `INSERT INTO webhook_outbox (event_id, database_id, kind, body) VALUES ($1::uuid, $2::uuid, $3, $4)
       ON CONFLICT (event_id) DO NOTHING RETURNING 1`,
      [e.eventId, e.databaseId, e.kind, e.body],
    );
    added += rows.length;
  }
  return added;
}

export function createWebhookOutboxStore(db: Queryable): WebhookOutboxStore {
  return {
    enqueueWebhooks: (events) => insertOutboxEvents(db, events),

    async claimWebhooks(claimer, limit, claimSeconds) {
      const rows = await db.query<{
        event_id: string;
        kind: WebhookEventKind;
        body: string;
        attempts: number;
        first_attempt_at: Date;
        claimed_at: Date;
      }>(
        `UPDATE webhook_outbox o
            SET claimed_by = $1::uuid, claimed_until = now() + make_interval(secs => $3::float8),
                first_attempt_at = coalesce(o.first_attempt_at, now())
          WHERE o.event_id IN (
                SELECT event_id FROM webhook_outbox
                 WHERE state = 'pending' AND next_attempt_at <= now() AND (claimed_until IS NULL OR claimed_until < now())
                 ORDER BY next_attempt_at, created_at LIMIT $2::int
                   FOR UPDATE SKIP LOCKED)
            AND o.state = 'pending' AND (o.claimed_until IS NULL OR o.claimed_until < now())
        RETURNING o.event_id, o.kind, o.body, o.attempts, o.first_attempt_at, now() AS claimed_at`,
        [claimer, limit, claimSeconds],
      );
      return rows.map((r): ClaimedWebhook => ({
        eventId: r.event_id,
        kind: r.kind,
        body: r.body,
        attempts: r.attempts,
        firstAttemptAt: r.first_attempt_at,
        claimedAt: r.claimed_at,
      }));
    },

    async settleWebhook(claimer, eventId, s) {
      const rows = await db.query(
        `UPDATE webhook_outbox
            SET state = $3, attempts = $4::int, last_error = $5,
                next_attempt_at = now() + make_interval(secs => $6::float8),
                finished_at = CASE WHEN $3 = 'pending' THEN NULL ELSE now() END,
                claimed_by = NULL, claimed_until = NULL
          WHERE event_id = $2::uuid AND claimed_by = $1::uuid AND state = 'pending'
        RETURNING 1`,
        [claimer, eventId, s.state, s.attempts, s.lastError, s.state === 'pending' ? s.retryInMs / 1000 : 0],
      );
      return rows.length > 0;
    },

    async releaseWebhook(claimer, eventId) {
      await db.query(
        `UPDATE webhook_outbox SET claimed_by = NULL, claimed_until = NULL
          WHERE event_id = $2::uuid AND claimed_by = $1::uuid AND state = 'pending'`,
        [claimer, eventId],
      );
    },
  };
}

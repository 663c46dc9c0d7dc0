// The webhooks' storage (notify/store.ts): an organization's webhooks in webhooks, and the outbox
// in webhook_outbox, one row per event and destination. Claims take due rows with FOR UPDATE SKIP
// LOCKED and stamp them with the claimer and a deadline, so that replicas polling at the same
// instant split the rows instead of sending one twice; a claim that lapses (a replica that died
// mid-attempt) lets another replica take the row.
import type { ClaimedWebhook, OutboxEvent, Webhook, WebhookOutboxStore, WebhookStore } from '../notify/store.ts';
import type { WebhookEventKind } from '../notify/webhook.ts';
import type { Queryable } from './driver.ts';
import { one } from './sql-rows.ts';

/** The destination's part of the outbox's unique key: the service-wide webhook's stand-in. */
const DESTINATION = "coalesce(webhook_id, '00000000-0000-0000-0000-000000000000'::uuid)";

/** Writes the events not written yet, once per destination; `q` may be a transaction's (the watch
 * writes its events and their webhooks in one). */
export async function insertOutboxEvents(q: Queryable, events: readonly OutboxEvent[]): Promise<number> {
  let added = 0;
  for (const e of events) {
    // The organization's webhooks that take this kind, and the service-wide one when asked for.
    const rows = await q.query(
      `INSERT INTO webhook_outbox (event_id, database_id, kind, body, webhook_id)
       SELECT $1::uuid, $2::uuid, $3::text, $4::text, w.id
         FROM webhooks w JOIN databases d ON d.organization_id = w.organization_id
        WHERE d.id = $2::uuid AND (w.events IS NULL OR $3::text = ANY (w.events))
       UNION ALL
       SELECT $1::uuid, $2::uuid, $3::text, $4::text, NULL WHERE $5::boolean
       ON CONFLICT (event_id, (${DESTINATION})) DO NOTHING RETURNING 1`,
      [e.eventId, e.databaseId, e.kind, e.body, e.serviceWide],
    );
    added += rows.length;
  }
  return added;
}

interface WebhookRow {
  id: string;
  organization_id: string;
  url: string;
  events: WebhookEventKind[] | null;
  created_by: string | null;
  created_at: Date;
}

const COLUMNS = 'id, organization_id, url, events, created_by, created_at';

const toWebhook = (r: WebhookRow): Webhook => ({
  id: r.id,
  organizationId: r.organization_id,
  url: r.url,
  events: r.events,
  createdBy: r.created_by,
  createdAt: r.created_at,
});

export function createWebhookStore(db: Queryable): WebhookStore {
  return {
    async createWebhook(w) {
      // The kinds go as JSON, as sql-advice.ts's arrays: one encoding both drivers pass the same way.
      const row = await one<WebhookRow>(
        db,
        `INSERT INTO webhooks (id, organization_id, url, secret, events, created_by)
         VALUES ($1::uuid, $2::uuid, $3, $4, CASE WHEN $5::jsonb IS NULL THEN NULL ELSE ARRAY(SELECT jsonb_array_elements_text($5::jsonb)) END, $6::uuid)
         RETURNING ${COLUMNS}`,
        [w.id, w.organizationId, w.url, w.secret, w.events === null ? null : JSON.stringify(w.events), w.createdBy],
      );
      return toWebhook(row!);
    },

    async listWebhooks(organizationId) {
      const rows = await db.query<WebhookRow>(`SELECT ${COLUMNS} FROM webhooks WHERE organization_id = $1::uuid ORDER BY created_at, id`, [
        organizationId,
      ]);
      return rows.map(toWebhook);
    },

    async deleteWebhook(organizationId, webhookId) {
      const row = await one<WebhookRow>(
        db,
        `DELETE FROM webhooks WHERE organization_id = $1::uuid AND id = $2::uuid RETURNING ${COLUMNS}`,
        [organizationId, webhookId],
      );
      return row ? toWebhook(row) : null;
    },
  };
}

export function createWebhookOutboxStore(db: Queryable): WebhookOutboxStore {
  return {
    enqueueWebhooks: (events) => insertOutboxEvents(db, events),

    async claimWebhooks(claimer, limit, claimSeconds, serviceWide) {
      const rows = await db.query<{
        id: string;
        webhook_id: string | null;
        url: string | null;
        secret: string | null;
        event_id: string;
        kind: WebhookEventKind;
        body: string;
        attempts: number;
        first_attempt_at: Date;
        claimed_at: Date;
      }>(
        `WITH claimed AS (
           UPDATE webhook_outbox o
              SET claimed_by = $1::uuid, claimed_until = now() + make_interval(secs => $3::float8),
                  first_attempt_at = coalesce(o.first_attempt_at, now())
            WHERE o.id IN (
                  SELECT id FROM webhook_outbox
                   WHERE state = 'pending' AND next_attempt_at <= now() AND (claimed_until IS NULL OR claimed_until < now())
                     AND (webhook_id IS NOT NULL OR $4::boolean)
                   ORDER BY next_attempt_at, created_at LIMIT $2::int
                     FOR UPDATE SKIP LOCKED)
              AND o.state = 'pending' AND (o.claimed_until IS NULL OR o.claimed_until < now())
          RETURNING o.id, o.webhook_id, o.event_id, o.kind, o.body, o.attempts, o.first_attempt_at, now() AS claimed_at)
         SELECT c.id::text AS id, c.webhook_id, w.url, w.secret, c.event_id, c.kind, c.body, c.attempts, c.first_attempt_at, c.claimed_at
           FROM claimed c LEFT JOIN webhooks w ON w.id = c.webhook_id`,
        [claimer, limit, claimSeconds, serviceWide],
      );
      return rows.map((r): ClaimedWebhook => ({
        deliveryId: r.id,
        destination: r.webhook_id && r.url && r.secret ? { webhookId: r.webhook_id, url: r.url, secret: r.secret } : null,
        eventId: r.event_id,
        kind: r.kind,
        body: r.body,
        attempts: r.attempts,
        firstAttemptAt: r.first_attempt_at,
        claimedAt: r.claimed_at,
      }));
    },

    async settleWebhook(claimer, deliveryId, s) {
      const rows = await db.query(
        `UPDATE webhook_outbox
            SET state = $3, attempts = $4::int, last_error = $5,
                next_attempt_at = now() + make_interval(secs => $6::float8),
                finished_at = CASE WHEN $3 = 'pending' THEN NULL ELSE now() END,
                claimed_by = NULL, claimed_until = NULL
          WHERE id = $2::bigint AND claimed_by = $1::uuid AND state = 'pending'
        RETURNING 1`,
        [claimer, deliveryId, s.state, s.attempts, s.lastError, s.state === 'pending' ? s.retryInMs / 1000 : 0],
      );
      return rows.length > 0;
    },

    async releaseWebhook(claimer, deliveryId) {
      await db.query(
        `UPDATE webhook_outbox SET claimed_by = NULL, claimed_until = NULL
          WHERE id = $2::bigint AND claimed_by = $1::uuid AND state = 'pending'`,
        [claimer, deliveryId],
      );
    },
  };
}

// What the service's Prometheus gauges read from the storage at each scrape. Counted in SQL, so
// that every replica on one PostgreSQL storage reports the same fleet-wide figures.
import type { Queryable } from './driver.ts';
import { ADVICE_LIMITS } from '../advice/queries.ts';
import { ADVICE_STANDS } from './sql-advice.ts';

export interface MetricsSnapshot {
  /** Databases whose agent holds a live lease (not released, not expired). */
  agentsConnected: number;
  /** Tuning sessions in each state (states with none are absent). */
  sessionsByState: Record<string, number>;
  /** Databases with advice pending, as the fleet shows it (sql-advice.ts ADVICE_STANDS). */
  advicePending: number;
  /** Webhook events in the outbox, by state (pending, delivered, failed); absent: none. */
  webhooksByState: Record<string, number>;
}

export async function readMetricsSnapshot(db: Queryable): Promise<MetricsSnapshot> {
  const [agents] = await db.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM agent_leases WHERE released_at IS NULL AND expires_at > now()',
  );
  const states = await db.query<{ state: string; n: number }>('SELECT state, count(*)::int AS n FROM tuning_sessions GROUP BY state');
  const [advice] = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM database_advice a
      WHERE ${ADVICE_STANDS('a', '$1')}
        AND NOT EXISTS (SELECT 1 FROM tuning_sessions s WHERE s.database_id = a.database_id AND (s.ended_at IS NULL OR s.ended_at > a.computed_at))`,
    [ADVICE_LIMITS.windowSeconds],
  );
  const webhooks = await db.query<{ state: string; n: number }>('SELECT state, count(*)::int AS n FROM webhook_outbox GROUP BY state');
  return {
    agentsConnected: agents?.n ?? 0,
    sessionsByState: Object.fromEntries(states.map((row) => [row.state, row.n])),
    advicePending: advice?.n ?? 0,
    webhooksByState: Object.fromEntries(webhooks.map((row) => [row.state, row.n])),
  };
}

// What the service's Prometheus gauges read from the storage at each scrape. Counted in SQL, so
// that every replica on one PostgreSQL storage reports the same fleet-wide figures.
import type { Queryable } from './driver.ts';

export interface MetricsSnapshot {
  /** Databases whose agent holds a live lease (not released, not expired). */
  agentsConnected: number;
  /** Tuning sessions in each state (states with none are absent). */
  sessionsByState: Record<string, number>;
}

export async function readMetricsSnapshot(db: Queryable): Promise<MetricsSnapshot> {
  const [agents] = await db.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM agent_leases WHERE released_at IS NULL AND expires_at > now()',
  );
  const states = await db.query<{ state: string; n: number }>('SELECT state, count(*)::int AS n FROM tuning_sessions GROUP BY state');
  return { agentsConnected: agents?.n ?? 0, sessionsByState: Object.fromEntries(states.map((row) => [row.state, row.n])) };
}

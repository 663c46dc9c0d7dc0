// The Storage in SQL that runs unchanged on PGlite and on PostgreSQL: one module per feature
// (sql-people, sql-databases, sql-agents, sql-tuning), each implementing that feature's port,
// and the housekeeping of the whole here.
import type { SqlDriver, Queryable } from './driver.ts';
import { createAgentStore } from './sql-agents.ts';
import { createDatabaseStore } from './sql-databases.ts';
import { createPeopleStore } from './sql-people.ts';
import { one } from './sql-rows.ts';
import { readMetricsSnapshot } from './sql-metrics.ts';
import { createTuningStore } from './sql-tuning.ts';
import type { RetentionPolicy, Storage } from './storage.ts';
import { createFleetStore } from './sql-fleet.ts';
import { createWatchStore } from './sql-watch.ts';
import { createWebhookOutboxStore, createWebhookStore } from './sql-webhook.ts';
import { createAdviceStore } from './sql-advice.ts';
import { createAuditStore } from './sql-audit.ts';
import { createApiTokenStore } from './sql-api-tokens.ts';
import { createLoginFailureStore } from './sql-login-failures.ts';

export function createSqlStorage(driver: SqlDriver): Storage {
  const db: Queryable = driver;
  return {
    kind: driver.kind,
    ...createPeopleStore(driver),
    ...createDatabaseStore(driver),
    ...createAgentStore(driver),
    ...createTuningStore(driver),
    ...createFleetStore(driver),
    ...createWatchStore(driver),
    ...createWebhookOutboxStore(driver),
    ...createWebhookStore(driver),
    ...createAdviceStore(driver),
    ...createAuditStore(driver),
    ...createApiTokenStore(driver),
    ...createLoginFailureStore(driver),

    async prune(policy: RetentionPolicy) {
      const count = async (deleteSql: string, params: readonly unknown[]): Promise<number> => {
        const row = await one<{ n: number }>(db, `WITH gone AS (${deleteSql} RETURNING 1) SELECT count(*)::int AS n FROM gone`, params);
        return row?.n ?? 0;
      };
      let reports = await count('DELETE FROM reports WHERE received_at < now() - make_interval(days => $1::int)', [policy.maxAgeDays]);
      let events = await count('DELETE FROM agent_events WHERE received_at < now() - make_interval(days => $1::int)', [policy.maxAgeDays]);
      const databases = await db.query<{ id: string }>('SELECT id FROM databases');
      for (const { id } of databases) {
        // Walks the newest N entries of the (database_id, id) index to find the cut.
        reports += await count(
          `DELETE FROM reports WHERE database_id = $1::uuid AND id <= (
             SELECT id FROM reports WHERE database_id = $1::uuid ORDER BY id DESC OFFSET $2::int LIMIT 1)`,
          [id, policy.maxReportsPerDatabase],
        );
        events += await count(
          `DELETE FROM agent_events WHERE database_id = $1::uuid AND id <= (
             SELECT id FROM agent_events WHERE database_id = $1::uuid ORDER BY id DESC OFFSET $2::int LIMIT 1)`,
          [id, policy.maxEventsPerDatabase],
        );
      }
      const loginSessions = await count('DELETE FROM login_sessions WHERE expires_at < now()', []);
      // The login throttle's counts whose window has ended (people/throttle.ts).
      await count('DELETE FROM login_failures WHERE expires_at < now()', []);
      // Webhook events delivered or given up, with the reports of their time; pending ones stay.
      await count("DELETE FROM webhook_outbox WHERE state <> 'pending' AND finished_at < now() - make_interval(days => $1::int)", [
        policy.maxAgeDays,
      ]);
      // The audit log's one delete: its trigger lets it through for entries older than the
      // retention this transaction declares (migration 11).
      const auditEvents = await driver.transaction(async (tx) => {
        await tx.query("SELECT set_config('tuner.audit_retention_days', $1, true)", [String(policy.auditMaxAgeDays)]);
        const row = await one<{ n: number }>(
          tx,
          'WITH gone AS (DELETE FROM audit_events WHERE at < now() - make_interval(days => $1::int) RETURNING 1) SELECT count(*)::int AS n FROM gone',
          [policy.auditMaxAgeDays],
        );
        return row?.n ?? 0;
      });
      // PGlite has no autovacuum: without statistics its planner misjudges the fleet's joins
      // (p95 250-285 ms against 120-145 ms with them at 1,000 databases, docs/fleet.md).
      const analyzed = driver.kind === 'pglite';
      if (analyzed) await db.query('ANALYZE');
      return { reports, events, loginSessions, auditEvents, analyzed };
    },

    async ping() {
      await db.query('SELECT 1 AS ok');
    },

    metricsSnapshot: () => readMetricsSnapshot(db),

    close: () => driver.close(),
  };
}

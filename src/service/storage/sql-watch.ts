// The watch's storage (watch/store.ts): watch_states, one row per watched database, and the
// events a state change raises, written in the same transaction as the state, only if no other
// replica saved a newer one meanwhile (so an event is raised once).
import type { Interval } from '../../measure/verify.ts';
import { ACTIVE_SESSION_STATES } from '../tuning/store.ts';
import { WATCH_STATES, type WatchState } from '../watch/verdict.ts';
import type { WatchDue, WatchRecord, WatchStore } from '../watch/store.ts';
import type { WorkloadComparison } from '../watch/workload.ts';
import type { SqlDriver } from './driver.ts';
import { one } from './sql-rows.ts';
import { keptConfiguration } from './sql-fleet.ts';
import { readReportsSince } from './sql-tuning.ts';
import { insertOutboxEvents } from './sql-webhook.ts';

const ACTIVE = ACTIVE_SESSION_STATES.map((s) => `'${s}'`).join(', ');

interface WatchRow {
  database_id: string;
  session_id: string;
  state: WatchState;
  state_since: Date;
  runtime: Interval | null;
  judged_at: Date;
  workload_checked_at: Date | null;
  workload_changed_since: Date | null;
  workload: WorkloadComparison | null;
}

const COLUMNS = 'database_id, session_id, state, state_since, runtime, judged_at, workload_checked_at, workload_changed_since, workload';

const toRecord = (r: WatchRow): WatchRecord => ({
  databaseId: r.database_id,
  sessionId: r.session_id,
  state: r.state,
  stateSince: r.state_since,
  runtime: r.runtime,
  judgedAt: r.judged_at,
  workloadCheckedAt: r.workload_checked_at,
  workloadChangedSince: r.workload_changed_since,
  workload: r.workload,
});

export function createWatchStore(driver: SqlDriver): WatchStore {
  return {
    async watchDue(everySeconds, limit) {
      const rows = await driver.query<{
        id: string;
        organization_id: string;
        name: string;
        session_id: string;
        kept_at: Date;
        watch_from: Date;
      }>(
        `SELECT d.id, d.organization_id, d.name, k.id AS session_id, k.acked_at AS kept_at,
                greatest(k.acked_at, (SELECT max(e.ended_at) FROM tuning_sessions e WHERE e.database_id = d.id)) AS watch_from
           FROM databases d
           ${keptConfiguration('JOIN')}
           LEFT JOIN watch_states ws ON ws.database_id = d.id
          WHERE k.acked_at IS NOT NULL
            AND NOT EXISTS (SELECT 1 FROM tuning_sessions a WHERE a.database_id = d.id AND a.state IN (${ACTIVE}))
            AND (ws.database_id IS NULL OR ws.session_id <> k.id OR ws.judged_at <= now() - make_interval(secs => $1::float8))
          ORDER BY ws.judged_at NULLS FIRST LIMIT $2::int`,
        [everySeconds, limit],
      );
      return rows.map((r): WatchDue => ({
        databaseId: r.id,
        organizationId: r.organization_id,
        databaseName: r.name,
        sessionId: r.session_id,
        keptAt: r.kept_at,
        watchFrom: r.watch_from,
      }));
    },

    async watchRecord(databaseId) {
      const row = await one<WatchRow>(driver, `SELECT ${COLUMNS} FROM watch_states WHERE database_id = $1::uuid`, [databaseId]);
      return row && toRecord(row);
    },

    watchReports: (databaseId, since, limit) => readReportsSince(driver, databaseId, since, limit),

    async saveWatch(record, previous, events, webhooks = []) {
      return driver.transaction(async (tx) => {
        const values = [
          record.databaseId,
          record.sessionId,
          record.state,
          record.stateSince,
          record.runtime === null ? null : JSON.stringify(record.runtime),
          record.judgedAt,
          record.workloadCheckedAt,
          record.workloadChangedSince,
          record.workload === null ? null : JSON.stringify(record.workload),
        ];
        const params = '$1::uuid, $2::uuid, $3, $4::timestamptz, $5::jsonb, $6::timestamptz, $7::timestamptz, $8::timestamptz, $9::jsonb';
        const saved =
          previous === null
            ? await tx.query(
                `INSERT INTO watch_states (${COLUMNS}) VALUES (${params}) ON CONFLICT (database_id) DO NOTHING RETURNING 1`,
                values,
              )
            : await tx.query(
                `UPDATE watch_states SET (${COLUMNS}) = (${params})
                  WHERE database_id = $1::uuid AND judged_at = $10::timestamptz RETURNING 1`,
                [...values, previous.judgedAt],
              );
        if (saved.length === 0) return false;
        for (const event of events) {
          await tx.query(
            `INSERT INTO agent_events (database_id, at, level, code, message) VALUES ($1::uuid, $2::timestamptz, 'warn', $3, $4)`,
            [record.databaseId, event.at, event.code, event.message],
          );
        }
        await insertOutboxEvents(tx, webhooks);
        return true;
      });
    },

    async watchCounts() {
      // Only rows of a configuration still kept count.
      const rows = await driver.query<{ state: WatchState; n: number; changed: number }>(
        `SELECT ws.state, count(*)::int AS n, count(ws.workload_changed_since)::int AS changed
           FROM databases d
           ${keptConfiguration('JOIN')}
           JOIN watch_states ws ON ws.database_id = d.id AND ws.session_id = k.id
          GROUP BY ws.state`,
      );
      const byState = Object.fromEntries(WATCH_STATES.map((s) => [s, 0])) as Record<WatchState, number>;
      for (const r of rows) byState[r.state] = r.n;
      return { byState, workloadChanged: rows.reduce((n, r) => n + r.changed, 0) };
    },
  };
}

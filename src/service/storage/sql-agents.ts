// The agents' storage: leases, reports, acknowledgements, and the commands handed over. The
// agent's report is one statement (its place in the lease's sequence, lease renewal, report,
// events, next command), as it is by far the most frequent request.
import { statementsPerSecond } from '../../measure/throughput.ts';
import type { Command, TargetKind } from '../../protocol/v1.ts';
import type { AckResult, AgentStore, LeasePolicy, ReportResult, StartResult, StopResult } from '../agents/store.ts';
import { TRIAL_EXPIRED_REASON } from '../databases/store.ts';
import { RUNNING_SESSION_STATES } from '../tuning/store.ts';
import type { Queryable, SqlDriver } from './driver.ts';
import { LEASE_COLUMNS, cancelledOutcome, one, toLease, type LeaseColumns } from './sql-rows.ts';

const EXPIRED_OUTCOME = cancelledOutcome(TRIAL_EXPIRED_REASON);
/** Cancels the database's commands ($1) still pending past their deadline, with outcome $15. A
 * statement does not see its own CTEs' writes: DELIVERABLE leaves them out of the same statement. */
const EXPIRED_TRIALS = `expired AS (
           UPDATE commands SET status = 'done', outcome = $15::jsonb
            WHERE database_id = $1::uuid AND status = 'pending' AND deliver_by <= now()
           RETURNING id
         )`;
/** A command that may go out now (`c`): not done, and not past its deadline. A trial sent in time
 * whose answer was lost is not sent again after it either: the session waits for its
 * acknowledgement until its ack timeout, as for any command sent. */
const DELIVERABLE = `c.status <> 'done' AND (c.deliver_by IS NULL OR c.deliver_by > now())`;
/** The states of our own list: constants, not input, so safe to write into the SQL. */
const RUNNING_STATES = RUNNING_SESSION_STATES.map((s) => `'${s}'`).join(', ');

/** Marks the database's oldest command that may go out now as sent and returns it (a command a
 * tuning session's step just queued, handed over inside the step's transaction). */
export async function sendNextCommand(q: Queryable, databaseId: string): Promise<Command | null> {
  const row = await one<{ body: Command }>(
    q,
    `WITH ${EXPIRED_TRIALS.replaceAll('$15', '$2')}, next_command AS (
       SELECT c.id FROM commands c WHERE c.database_id = $1::uuid AND ${DELIVERABLE} ORDER BY c.seq LIMIT 1
     )
     UPDATE commands c SET status = 'sent', sent_at = now(), sent_count = c.sent_count + 1
       FROM next_command n WHERE c.id = n.id AND ${DELIVERABLE}
     RETURNING c.body`,
    [databaseId, EXPIRED_OUTCOME],
  );
  return row?.body ?? null;
}

/** A database's report interval (`d`, a row of databases): its own, else the default ($N). The
 * start and the report read it with this one expression. */
const reportInterval = (defaultParam: string) => `coalesce(d.report_interval_seconds, ${defaultParam}::int)`;

/** When a lease granted or renewed now lapses: max(intervalsPerLease × interval, minLeaseSeconds)
 * from now (LeasePolicy; `clock`, a parameter, is null but in tests, which move the lease's now).
 * The one place the lease's length is computed; the policy's numbers come as parameters. */
function leaseExpiry(interval: string, intervalsPerLease: string, minLeaseSeconds: string, clock: string): string {
  return `coalesce(${clock}::timestamptz, now()) + make_interval(secs => greatest(${intervalsPerLease}::int * ${interval}, ${minLeaseSeconds}::int)::float8)`;
}

/** A renewal never moves the lease's end closer (`current`: its end now). The agent learns a
 * shorter interval only from this report's answer, and was on the longer one until now: the lease
 * granted for that one holds until the shorter one has renewed it (a database's interval set from
 * 60 s to 5 s cut a lease to 30 s under an agent still on 60 s). */
function renewedExpiry(current: string, renewal: string): string {
  return `greatest(${current}, ${renewal})`;
}

/** The moment a lease granted or renewed now counts from: null for the storage's now(). */
function leaseClockNow(policy: LeasePolicy): string | null {
  return policy.clock ? policy.clock().toISOString() : null;
}

export function createAgentStore(driver: SqlDriver): AgentStore {
  const db: Queryable = driver;
  return {
    async agentCredentials(databaseId) {
      const rows = await db.query<{ target: TargetKind; key_hash: string | null }>(
        `SELECT d.target, k.key_hash FROM databases d
           LEFT JOIN api_keys k ON k.database_id = d.id AND k.revoked_at IS NULL
          WHERE d.id = $1::uuid`,
        [databaseId],
        { name: 'agent_credentials' },
      );
      const first = rows[0];
      if (!first) return null;
      return { target: first.target, keyHashes: rows.flatMap((r) => (r.key_hash === null ? [] : [r.key_hash])) };
    },

    async isLiveKeyHash(keyHash) {
      // key_hash is UNIQUE: an index lookup.
      const row = await one(db, 'SELECT 1 AS ok FROM api_keys WHERE key_hash = $1 AND revoked_at IS NULL', [keyHash], {
        name: 'live_key_hash',
      });
      return row !== null;
    },

    startAgent: (databaseId, request, newLeaseId, policy) =>
      driver.transaction(async (tx): Promise<StartResult> => {
        // Locking the database row makes concurrent starts for one database take turns.
        const database = await one<{ interval_seconds: number }>(
          tx,
          `SELECT ${reportInterval('$2')} AS interval_seconds FROM databases d WHERE d.id = $1::uuid FOR UPDATE`,
          [databaseId, policy.defaultIntervalSeconds],
        );
        if (!database) throw new Error(`database ${databaseId} vanished`);
        const current = await one<LeaseColumns>(tx, `SELECT ${LEASE_COLUMNS} FROM agent_leases l WHERE l.database_id = $1::uuid`, [
          databaseId,
        ]);
        const holder = current ? toLease(current) : null;
        const resumed = holder !== null && holder.live && request.resumeLeaseId === holder.leaseId;
        if (holder?.live && !resumed) return { kind: 'conflict', holder };
        const leaseId = resumed ? holder.leaseId : newLeaseId;
        const intervalSeconds = database.interval_seconds;
        const row = await one<{ expires_at: Date }>(
          tx,
          `INSERT INTO agent_leases (database_id, lease_id, hostname, pid, agent_version, target, target_identity, mode,
                                     allow_restart, include_queries, system, started_at, expires_at, released_at,
                                     last_report_at, last_seq)
           VALUES ($1::uuid, $2, $3, $4::bigint, $5, $6, $7, $8, $9::boolean, $10::boolean, $11::jsonb, now(),
                   ${leaseExpiry('$12::int', '$13', '$14', '$15')}, NULL, NULL, NULL)
           ON CONFLICT (database_id) DO UPDATE SET
             lease_id = excluded.lease_id, hostname = excluded.hostname, pid = excluded.pid,
             agent_version = excluded.agent_version, target = excluded.target,
             target_identity = excluded.target_identity, mode = excluded.mode,
             allow_restart = excluded.allow_restart, include_queries = excluded.include_queries,
             system = excluded.system, started_at = excluded.started_at, expires_at = excluded.expires_at,
             released_at = NULL, last_report_at = NULL, last_seq = NULL
           RETURNING expires_at`,
          [
            databaseId,
            leaseId,
            request.host.hostname,
            request.host.pid,
            request.agentVersion,
            request.target,
            request.targetIdentity,
            request.mode,
            request.allowRestart,
            request.includeQueries,
            JSON.stringify(request.system),
            intervalSeconds,
            policy.intervalsPerLease,
            policy.minLeaseSeconds,
            leaseClockNow(policy),
          ],
        );
        return { kind: 'granted', leaseId, expiresAt: row!.expires_at, reportIntervalSeconds: intervalSeconds, resumed };
      }),

    async recordReport(databaseId, report, body, policy): Promise<ReportResult> {
      const derived = report.metrics?.derived;
      const row = await one<{
        verdict: 'new' | 'repeat' | 'out_of_order';
        last_seq: number | null;
        expires_at: Date | null;
        interval_seconds: number;
        command: Command | null;
        tuning_session_running: boolean;
      }>(
        db,
        `WITH relaxed AS (
           -- Reports do not wait for their WAL to reach the disk: a crash of the database may
           -- lose the last fraction of a second of reports and lease renewals, which the agents
           -- send again (a lapsed lease is started again, a command re-sent under its id).
           SELECT set_config('synchronous_commit', 'off', true) AS done
         ), prior AS (
           -- Locked, so that the same report sent twice at once is stored once: the second
           -- waits, then reads the first one's seq.
           SELECT l.last_seq, ${reportInterval('$13')} AS interval_seconds
             FROM agent_leases l JOIN databases d ON d.id = l.database_id
            WHERE l.database_id = $1::uuid AND l.lease_id = $2 AND l.released_at IS NULL AND l.expires_at > now()
              FOR UPDATE OF l
         ), verdict AS (
           SELECT CASE WHEN p.last_seq IS NULL OR $3::bigint > p.last_seq THEN 'new'
                       WHEN $3::bigint = p.last_seq THEN 'repeat'
                       ELSE 'out_of_order' END AS verdict,
                  p.last_seq, p.interval_seconds
             FROM prior p
         ), lease AS (
           UPDATE agent_leases l
              SET expires_at = ${renewedExpiry('l.expires_at', leaseExpiry('v.interval_seconds', '$12', '$14', '$16'))},
                  last_report_at = now(), last_seq = $3::bigint
             FROM verdict v
            WHERE l.database_id = $1::uuid AND v.verdict <> 'out_of_order'
           RETURNING l.expires_at
         ), report AS (
           INSERT INTO reports (database_id, lease_id, seq, sent_at, avg_query_runtime_ms, tps, cache_hit_ratio, connections, has_metrics, body,
                              statements_per_second)
           SELECT $1::uuid, $2, $3::bigint, $4::timestamptz, $5::float8, $6::float8, $7::float8, $8::float8, $9::boolean, $10::bytea,
                  $17::float8
             FROM lease, verdict v WHERE v.verdict = 'new'
           RETURNING id
         ), events AS (
           INSERT INTO agent_events (database_id, at, level, code, message, command_id)
           SELECT $1::uuid, (e ->> 'at')::timestamptz, e ->> 'level', e ->> 'code', e ->> 'message', e ->> 'commandId'
             FROM lease, verdict v, json_array_elements($11::json) AS e WHERE v.verdict = 'new'
           RETURNING id
         ), ${EXPIRED_TRIALS}, next_command AS (
           SELECT c.id FROM commands c, lease
            WHERE c.database_id = $1::uuid AND ${DELIVERABLE}
            ORDER BY c.seq LIMIT 1
         ), sent AS (
           -- Checked again on the row: a revocation that cancelled it meanwhile wins.
           UPDATE commands c SET status = 'sent', sent_at = now(), sent_count = c.sent_count + 1
             FROM next_command n WHERE c.id = n.id AND ${DELIVERABLE}
           RETURNING c.body
         )
         SELECT v.verdict, v.last_seq::float8 AS last_seq, v.interval_seconds, lease.expires_at, (SELECT body FROM sent) AS command,
                EXISTS (SELECT 1 FROM tuning_sessions s WHERE s.database_id = $1::uuid AND s.state IN (${RUNNING_STATES})) AS tuning_session_running
           FROM relaxed, verdict v LEFT JOIN lease ON true`,
        [
          databaseId,
          report.leaseId,
          report.seq,
          report.sentAt,
          derived?.avgQueryRuntimeMs ?? null,
          derived?.tps ?? null,
          derived?.cacheHitRatio ?? null,
          report.metrics?.activity.connections.total ?? null,
          report.metrics !== null,
          body,
          report.events.length === 0 ? '[]' : JSON.stringify(report.events),
          policy.intervalsPerLease,
          policy.defaultIntervalSeconds,
          policy.minLeaseSeconds,
          EXPIRED_OUTCOME,
          leaseClockNow(policy),
          report.metrics ? statementsPerSecond(report.metrics) : null,
        ],
        { name: 'record_report' },
      );
      if (!row) return { kind: 'lease_expired' };
      if (row.verdict === 'out_of_order' || !row.expires_at) return { kind: 'out_of_order', lastSeq: row.last_seq ?? 0 };
      return {
        kind: 'accepted',
        repeat: row.verdict === 'repeat',
        expiresAt: row.expires_at,
        reportIntervalSeconds: row.interval_seconds,
        command: row.command,
        tuningSessionRunning: row.tuning_session_running,
      };
    },

    recordAck: (databaseId, commandId, ack) =>
      driver.transaction(async (tx): Promise<AckResult> => {
        // The outcome is worth keeping even if the lease lapsed meanwhile, as long as no other
        // agent took the database: the change it describes was made by this lease's agent.
        const lease = await one<{ lease_id: string }>(tx, 'SELECT lease_id FROM agent_leases WHERE database_id = $1::uuid', [databaseId]);
        if (!lease || lease.lease_id !== ack.leaseId) return { kind: 'lease_expired' };
        const { leaseId: _leaseId, ...outcome } = ack;
        const [updated] = await tx.query<{ kind: Command['kind'] }>(
          `UPDATE commands SET status = 'done', acked_at = now(), outcome = $3::jsonb
            WHERE id = $1::uuid AND database_id = $2::uuid AND status <> 'done' RETURNING body->>'kind' AS kind`,
          [commandId, databaseId, JSON.stringify(outcome)],
        );
        if (updated) return { kind: 'recorded', commandKind: updated.kind };
        const exists = await one(tx, 'SELECT 1 AS ok FROM commands WHERE id = $1::uuid AND database_id = $2::uuid', [
          commandId,
          databaseId,
        ]);
        return { kind: exists ? 'already_done' : 'unknown_command' };
      }),

    stopAgent: (databaseId, leaseId) =>
      driver.transaction(async (tx): Promise<StopResult> => {
        const lease = await one<{ lease_id: string; live: boolean }>(
          tx,
          'SELECT lease_id, (released_at IS NULL AND expires_at > now()) AS live FROM agent_leases WHERE database_id = $1::uuid FOR UPDATE',
          [databaseId],
        );
        if (!lease || lease.lease_id !== leaseId) return { kind: 'lease_expired' };
        if (!lease.live) return { kind: 'already_released' };
        await tx.query('UPDATE agent_leases SET released_at = now() WHERE database_id = $1::uuid', [databaseId]);
        return { kind: 'released' };
      }),
  };
}

// The tuning sessions' part of the Storage interface, in the same SQL on PGlite and PostgreSQL.
// A session is advanced inside one transaction that holds its row lock (SELECT … FOR UPDATE), so
// that with several replicas one at a time moves a database's session; everything the step reads
// and writes goes through the TuningSessionTx it is given.
import type { Command } from '../../protocol/v1.ts';
import type { Queryable, SqlDriver } from './driver.ts';
import { readReportBody } from '../agents/report-body.ts';
import { sendNextCommand } from './sql-agents.ts';
import { cancelledOutcome, findCommand, isUniqueViolation, one } from './sql-rows.ts';
import {
  ACTIVE_SESSION_STATES,
  type GuardrailBreach,
  RUNNING_SESSION_STATES,
  TuningSessionBusyError,
  type SessionReport,
  type SessionWindow,
  type TuningIterationPatch,
  type TuningIterationRecord,
  type TuningSessionPatch,
  type TuningSessionRecord,
  type TuningSessionTx,
  type TuningStore,
} from '../tuning/store.ts';

// Constants of ours, not input: safe to write into the SQL.
const inList = (states: readonly string[]) => states.map((s) => `'${s}'`).join(', ');
const ACTIVE = inList(ACTIVE_SESSION_STATES);
const RUNNING = inList(RUNNING_SESSION_STATES);

interface WindowJson {
  start: string;
  end: string;
  attempts: number;
}

interface SessionRow {
  id: string;
  database_id: string;
  state: TuningSessionRecord['state'];
  mode: TuningSessionRecord['mode'];
  iterations: number;
  window_seconds: number;
  window_min_seconds: number | null;
  window_now_seconds: number | null;
  warmup_seconds: number;
  ab_rounds_min: number;
  ab_rounds_max: number;
  min_effect_percent: number;
  confidence_percent: number;
  statement_regressions: TuningSessionRecord['statementRegressions'];
  seed: number;
  require_approval: boolean;
  verify_early: boolean;
  plan_aware: boolean | null;
  space: TuningSessionRecord['space'];
  created_by: string | null;
  created_by_name: string | null;
  created_at: Date;
  updated_at: Date;
  ended_at: Date | null;
  message: string | null;
  baseline_window: WindowJson | null;
  baseline: TuningSessionRecord['baseline'];
  best: TuningSessionRecord['best'];
  verification: TuningSessionRecord['verification'];
  steps: TuningSessionRecord['steps'];
  final_command_id: string | null;
  final_sent_at: Date | null;
}

const SESSION_COLUMNS = `s.id, s.database_id, s.state, s.mode, s.iterations, s.window_seconds, s.window_min_seconds, s.window_now_seconds, s.warmup_seconds,
  s.ab_rounds_min, s.ab_rounds_max, s.min_effect_percent, s.confidence_percent, s.statement_regressions,
  s.seed::float8 AS seed, s.require_approval, s.verify_early, s.plan_aware, s.space, s.created_by, u.username AS created_by_name, s.created_at,
  s.updated_at, s.ended_at, s.message, s.baseline_window, s.baseline, s.best, s.verification, s.steps, s.final_command_id, s.final_sent_at`;
const SESSION_FROM = 'tuning_sessions s LEFT JOIN users u ON u.id = s.created_by';

interface IterationRow {
  session_id: string;
  ordinal: number;
  kind: TuningIterationRecord['kind'];
  phase: TuningIterationRecord['phase'];
  round: number | null;
  config: TuningIterationRecord['config'];
  reason: string;
  predicted: TuningIterationRecord['predicted'];
  command_id: string;
  state: TuningIterationRecord['state'];
  created_at: Date;
  sent_at: Date | null;
  acked_at: Date | null;
  effective: Record<string, string> | null;
  measure_window: WindowJson | null;
  objective: number | null;
  stats: TuningIterationRecord['stats'];
  reports: number | null;
  failure: string | null;
  finished_at: Date | null;
  plans: TuningIterationRecord['plans'];
}

const ITERATION_COLUMNS = `session_id, ordinal, kind, phase, round, config, reason, predicted, command_id, state, created_at, sent_at,
  acked_at, effective, measure_window, objective, stats, reports, failure, finished_at, plans`;

const toWindow = (w: WindowJson | null): SessionWindow | null =>
  w ? { start: new Date(w.start), end: new Date(w.end), attempts: w.attempts } : null;
const windowJson = (w: SessionWindow | null): string | null =>
  w ? JSON.stringify({ start: w.start.toISOString(), end: w.end.toISOString(), attempts: w.attempts } satisfies WindowJson) : null;
const json = (value: unknown): string | null => (value === null || value === undefined ? null : JSON.stringify(value));
const time = (value: Date | null): string | null => (value ? value.toISOString() : null);

function toSession(row: SessionRow): TuningSessionRecord {
  return {
    id: row.id,
    databaseId: row.database_id,
    state: row.state,
    mode: row.mode,
    iterations: row.iterations,
    windowSeconds: row.window_seconds,
    windowMinSeconds: row.window_min_seconds ?? row.window_seconds,
    windowNowSeconds: row.window_now_seconds,
    warmupSeconds: row.warmup_seconds,
    abRoundsMin: row.ab_rounds_min,
    abRoundsMax: row.ab_rounds_max,
    minEffectPercent: row.min_effect_percent,
    confidencePercent: row.confidence_percent,
    statementRegressions: row.statement_regressions,
    seed: row.seed,
    requireApproval: row.require_approval,
    verifyEarly: row.verify_early,
    planAware: row.plan_aware ?? false,
    space: row.space,
    createdById: row.created_by,
    createdBy: row.created_by_name,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
    endedAt: row.ended_at,
    message: row.message,
    baselineWindow: toWindow(row.baseline_window),
    baseline: row.baseline,
    best: row.best,
    verification: row.verification,
    steps: row.steps ?? [],
    finalCommandId: row.final_command_id,
    finalSentAt: row.final_sent_at,
  };
}

function toIteration(row: IterationRow): TuningIterationRecord {
  return {
    sessionId: row.session_id,
    ordinal: row.ordinal,
    kind: row.kind,
    phase: row.phase,
    round: row.round,
    config: row.config,
    reason: row.reason,
    predicted: row.predicted,
    commandId: row.command_id,
    state: row.state,
    createdAt: row.created_at,
    sentAt: row.sent_at,
    ackedAt: row.acked_at,
    effective: row.effective,
    window: toWindow(row.measure_window),
    objective: row.objective,
    stats: row.stats,
    reports: row.reports,
    failure: row.failure,
    finishedAt: row.finished_at,
    plans: row.plans ?? null,
  };
}

/** `SET a = $n, b = $n+1 …` from the entries present; `extra` are literal assignments. */
function assignments(
  entries: Array<[column: string, value: unknown, cast: string]>,
  firstParam: number,
  extra: string[],
): { sql: string; params: unknown[] } {
  const parts = [...extra];
  const params: unknown[] = [];
  for (const [column, value, cast] of entries) {
    params.push(value);
    parts.push(`${column} = $${firstParam + params.length - 1}::${cast}`);
  }
  return { sql: parts.join(', '), params };
}

function sessionAssignments(patch: TuningSessionPatch): Array<[string, unknown, string]> {
  const out: Array<[string, unknown, string]> = [];
  if (patch.state !== undefined) out.push(['state', patch.state, 'text']);
  if (patch.message !== undefined) out.push(['message', patch.message, 'text']);
  if (patch.baselineWindow !== undefined) out.push(['baseline_window', windowJson(patch.baselineWindow), 'jsonb']);
  if (patch.baseline !== undefined) out.push(['baseline', json(patch.baseline), 'jsonb']);
  if (patch.best !== undefined) out.push(['best', json(patch.best), 'jsonb']);
  if (patch.verification !== undefined) out.push(['verification', json(patch.verification), 'jsonb']);
  if (patch.steps !== undefined) out.push(['steps', json(patch.steps), 'jsonb']);
  if (patch.windowNowSeconds !== undefined) out.push(['window_now_seconds', patch.windowNowSeconds, 'int']);
  if (patch.finalCommandId !== undefined) out.push(['final_command_id', patch.finalCommandId, 'uuid']);
  if (patch.finalSentAt !== undefined) out.push(['final_sent_at', time(patch.finalSentAt), 'timestamptz']);
  return out;
}

function iterationAssignments(patch: TuningIterationPatch): Array<[string, unknown, string]> {
  const out: Array<[string, unknown, string]> = [];
  if (patch.state !== undefined) out.push(['state', patch.state, 'text']);
  if (patch.sentAt !== undefined) out.push(['sent_at', time(patch.sentAt), 'timestamptz']);
  if (patch.ackedAt !== undefined) out.push(['acked_at', time(patch.ackedAt), 'timestamptz']);
  if (patch.effective !== undefined) out.push(['effective', json(patch.effective), 'jsonb']);
  if (patch.window !== undefined) out.push(['measure_window', windowJson(patch.window), 'jsonb']);
  if (patch.objective !== undefined) out.push(['objective', patch.objective, 'float8']);
  if (patch.stats !== undefined) out.push(['stats', json(patch.stats), 'jsonb']);
  if (patch.reports !== undefined) out.push(['reports', patch.reports, 'int']);
  if (patch.failure !== undefined) out.push(['failure', patch.failure, 'text']);
  if (patch.plans !== undefined) out.push(['plans', json(patch.plans), 'jsonb']);
  if (patch.commandId !== undefined) out.push(['command_id', patch.commandId, 'uuid']);
  if (patch.config !== undefined) out.push(['config', json(patch.config), 'jsonb']);
  return out;
}

function isLockTimeout(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: unknown }).code === '55P03';
}

async function insertCommand(
  q: Queryable,
  databaseId: string,
  command: Command,
  createdById: string | null,
  deliverWithinSeconds: number | null = null,
): Promise<void> {
  await q.query(
    `INSERT INTO commands (id, database_id, body, status, created_by, deliver_by)
     VALUES ($1::uuid, $2::uuid, $3::jsonb, 'pending', $4::uuid, now() + make_interval(secs => $5::float8))`,
    [command.id, databaseId, JSON.stringify(command), createdById, deliverWithinSeconds],
  );
}

/** The database's reports received at or after `since`, oldest first (at most `limit`): a
 * session's windows and the watch (sql-watch.ts) read them. */
export async function readReportsSince(q: Queryable, databaseId: string, since: Date, limit: number): Promise<SessionReport[]> {
  const rows = await q.query<{ id: number; lease_id: string; seq: number; sent_at: Date; received_at: Date; body: Uint8Array }>(
    `SELECT id::float8 AS id, lease_id, seq::float8 AS seq, sent_at, received_at, body FROM reports
  WHERE database_id = $1::uuid AND received_at >= $2::timestamptz ORDER BY received_at, id LIMIT $3::int`,
    [databaseId, since.toISOString(), limit],
  );
  return rows.map((r): SessionReport => ({
    id: r.id,
    leaseId: r.lease_id,
    seq: r.seq,
    sentAt: r.sent_at,
    receivedAt: r.received_at,
    ...readReportBody(r.body),
  }));
}

function sessionTx(q: Queryable, session: TuningSessionRecord): TuningSessionTx {
  const { id: sessionId, databaseId } = session;
  const reload = async () =>
    toSession((await one<SessionRow>(q, `SELECT ${SESSION_COLUMNS} FROM ${SESSION_FROM} WHERE s.id = $1::uuid`, [sessionId]))!);
  return {
    async now() {
      return (await one<{ now: Date }>(q, 'SELECT now() AS now', []))!.now;
    },
    async iterations() {
      const rows = await q.query<IterationRow>(
        `SELECT ${ITERATION_COLUMNS} FROM tuning_iterations WHERE session_id = $1::uuid ORDER BY ordinal`,
        [sessionId],
      );
      return rows.map(toIteration);
    },
    async updateSession(patch) {
      const set = assignments(sessionAssignments(patch), 2, ['updated_at = now()', ...(patch.ended ? ['ended_at = now()'] : [])]);
      await q.query(`UPDATE tuning_sessions SET ${set.sql} WHERE id = $1::uuid`, [sessionId, ...set.params]);
      return reload();
    },
    async addIteration(iteration, command, createdById) {
      if (command) await insertCommand(q, databaseId, command, createdById, iteration.deliverWithinSeconds ?? null);
      const m = iteration.measuring;
      const row = await one<IterationRow>(
        q,
        `INSERT INTO tuning_iterations (session_id, ordinal, kind, phase, round, config, reason, predicted, command_id, state, sent_at, acked_at, effective, measure_window)
         VALUES ($1::uuid, $2::int, $3, $4, $5::int, $6::jsonb, $7, $8::jsonb, $9::uuid, $10, $11::timestamptz, $12::timestamptz, $13::jsonb, $14::jsonb)
         RETURNING ${ITERATION_COLUMNS}`,
        [
          sessionId,
          iteration.ordinal,
          iteration.kind,
          iteration.phase,
          iteration.round,
          JSON.stringify(iteration.config),
          iteration.reason,
          json(iteration.predicted),
          iteration.commandId,
          m ? 'measuring' : iteration.planning ? 'planning' : 'applying',
          time(m?.sentAt ?? null),
          time(m?.ackedAt ?? null),
          json(m?.effective ?? null),
          windowJson(m?.window ?? null),
        ],
      );
      return toIteration(row!);
    },
    async updateIteration(ordinal, patch) {
      const set = assignments(iterationAssignments(patch), 3, patch.finished ? ['finished_at = now()'] : []);
      if (set.sql === '') return;
      await q.query(`UPDATE tuning_iterations SET ${set.sql} WHERE session_id = $1::uuid AND ordinal = $2::int`, [
        sessionId,
        ordinal,
        ...set.params,
      ]);
    },
    issueCommand: (command, createdById, deliverWithinSeconds) => insertCommand(q, databaseId, command, createdById, deliverWithinSeconds),
    sendNextCommand: () => sendNextCommand(q, databaseId),
    command: (commandId) => findCommand(q, databaseId, commandId),
    async cancelCommand(commandId, reason) {
      const rows = await q.query(
        `UPDATE commands SET status = 'done', outcome = $3::jsonb WHERE id = $1::uuid AND database_id = $2::uuid AND status <> 'done' RETURNING id`,
        [commandId, databaseId, cancelledOutcome(reason)],
      );
      return rows.length > 0;
    },
    reportsSince: (since, limit) => readReportsSince(q, databaseId, since, limit),
    async guardrailBreaches(commandIds) {
      if (commandIds.length === 0) return [];
      const rows = await q.query<{ command_id: string; message: string; at: Date }>(
        `SELECT command_id, message, at FROM agent_events
          WHERE database_id = $1::uuid AND command_id IN (SELECT jsonb_array_elements_text($2::jsonb)) AND code = 'guardrail_breach'
          ORDER BY id`,
        [databaseId, JSON.stringify(commandIds)],
      );
      return rows.map((r): GuardrailBreach => ({ commandId: r.command_id, message: r.message, at: r.at }));
    },
    async agentPresence() {
      const row = await one<{ live: boolean; at: Date | null }>(
        q,
        `SELECT (released_at IS NULL AND expires_at > now()) AS live, last_report_at AS at FROM agent_leases WHERE database_id = $1::uuid`,
        [databaseId],
      );
      return { live: row?.live ?? false, lastReportAt: row?.at ?? null };
    },
  };
}

export function createTuningStore(driver: SqlDriver): TuningStore {
  const db: Queryable = driver;
  const active = async (databaseId: string) => {
    const row = await one<SessionRow>(
      db,
      `SELECT ${SESSION_COLUMNS} FROM ${SESSION_FROM} WHERE s.database_id = $1::uuid AND s.state IN (${ACTIVE})`,
      [databaseId],
      { name: 'active_tuning_session' },
    );
    return row ? toSession(row) : null;
  };

  return {
    async createTuningSession(organizationId, s) {
      const owned = await one(db, 'SELECT 1 AS ok FROM databases WHERE id = $1::uuid AND organization_id = $2::uuid', [
        s.databaseId,
        organizationId,
      ]);
      if (!owned) return { kind: 'no_database' };
      try {
        await db.query(
          `INSERT INTO tuning_sessions (id, database_id, state, mode, iterations, window_seconds, warmup_seconds, seed, require_approval, space, created_by, message,
             ab_rounds_min, ab_rounds_max, min_effect_percent, confidence_percent, statement_regressions, window_min_seconds, verify_early, plan_aware)
           VALUES ($1::uuid, $2::uuid, 'baseline', $3, $4::int, $5::int, $6::int, $7::bigint, $8::boolean, $9::jsonb, $10::uuid, $11, $12::int, $13::int, $14::float8, $15::float8, $16, $17::int, $18::boolean, $19::boolean)`,
          [
            s.id,
            s.databaseId,
            s.mode,
            s.iterations,
            s.windowSeconds,
            s.warmupSeconds,
            s.seed,
            s.requireApproval,
            JSON.stringify(s.space),
            s.createdById,
            'waiting for the first report to start measuring the baseline',
            s.abRoundsMin,
            s.abRoundsMax,
            s.minEffectPercent,
            s.confidencePercent,
            s.statementRegressions,
            s.windowMinSeconds,
            s.verifyEarly,
            s.planAware,
          ],
        );
      } catch (err) {
        if (!isUniqueViolation(err)) throw err;
        const current = await active(s.databaseId);
        if (current) return { kind: 'conflict', active: current };
        throw err;
      }
      const row = await one<SessionRow>(db, `SELECT ${SESSION_COLUMNS} FROM ${SESSION_FROM} WHERE s.id = $1::uuid`, [s.id]);
      return { kind: 'created', session: toSession(row!) };
    },

    async listTuningSessions(organizationId, databaseId, limit) {
      const rows = await db.query<SessionRow>(
        `SELECT ${SESSION_COLUMNS} FROM ${SESSION_FROM} JOIN databases d ON d.id = s.database_id
          WHERE s.database_id = $1::uuid AND d.organization_id = $2::uuid ORDER BY s.created_at DESC, s.id LIMIT $3::int`,
        [databaseId, organizationId, limit],
      );
      return rows.map(toSession);
    },

    async getTuningSession(organizationId, databaseId, sessionId) {
      const row = await one<SessionRow>(
        db,
        `SELECT ${SESSION_COLUMNS} FROM ${SESSION_FROM} JOIN databases d ON d.id = s.database_id
          WHERE s.id = $1::uuid AND s.database_id = $2::uuid AND d.organization_id = $3::uuid`,
        [sessionId, databaseId, organizationId],
      );
      if (!row) return null;
      const iterations = await db.query<IterationRow>(
        `SELECT ${ITERATION_COLUMNS} FROM tuning_iterations WHERE session_id = $1::uuid ORDER BY ordinal`,
        [sessionId],
      );
      return { session: toSession(row), iterations: iterations.map(toIteration) };
    },

    activeTuningSession: active,

    async databasesWithRunningSession() {
      const rows = await db.query<{ database_id: string }>(`SELECT database_id FROM tuning_sessions WHERE state IN (${RUNNING})`);
      return rows.map((r) => r.database_id);
    },

    async withTuningSession(databaseId, sessionId, options, fn) {
      try {
        return await driver.transaction(async (tx) => {
          // A replica that died holding the lock releases it with its connection; a slow one
          // makes the others give up after a while rather than pile up behind it.
          await tx.query("SET LOCAL lock_timeout = '5s'");
          const which = sessionId === null ? `s.state IN (${ACTIVE})` : 's.id = $2::uuid';
          const row = await one<SessionRow>(
            tx,
            `SELECT ${SESSION_COLUMNS} FROM ${SESSION_FROM} WHERE s.database_id = $1::uuid AND ${which} FOR UPDATE OF s${options.skipLocked ? ' SKIP LOCKED' : ''}`,
            sessionId === null ? [databaseId] : [databaseId, sessionId],
          );
          if (!row) return null;
          const session = toSession(row);
          return fn(sessionTx(tx, session), session);
        });
      } catch (err) {
        if (isLockTimeout(err))
          throw new TuningSessionBusyError('the tuning session is busy (another request or replica is advancing it): try again', {
            cause: err,
          });
        throw err;
      }
    },
  };
}

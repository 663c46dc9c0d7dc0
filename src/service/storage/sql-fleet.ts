// The fleet home page's read (fleet/store.ts): every database of an organization with its agent, its
// latest tuning session and its kept configuration, in ONE statement, so that the page costs one
// round-trip to the storage with 1,000 databases as with one (bench/fleet.ts).
import type { TargetKind } from '../../protocol/v1.ts';
import type { AgentHealth, FleetEntry, FleetInterval, FleetStore, FleetWatch } from '../fleet/store.ts';
import { RUNNING_SESSION_STATES, type TuningSessionState } from '../tuning/store.ts';
import { FLEET_FLAGS, type FleetFlag } from '../fleet/flags.ts';
import { ATTENTION_FLAGS } from '../fleet/attention.ts';
import type { FleetQuery } from '../fleet/query.ts';
import type { Queryable } from './driver.ts';
import { ADVICE_LIMITS } from '../advice/queries.ts';
import { ADVICE_STANDS } from './sql-advice.ts';
import type { AdviceFinding } from '../advice/advice.ts';

/** One database as the statement's JSON has it: times as ISO 8601 strings. */
interface FleetRow {
  id: string;
  name: string;
  target: TargetKind;
  created_at: string;
  health: AgentHealth;
  hostname: string | null;
  agent_version: string | null;
  last_report_at: string | null;
  lease_expires_at: string | null;
  released_at: string | null;
  apply_blocked_reason: string | null;
  session_id: string | null;
  session_state: TuningSessionState | null;
  session_message: string | null;
  session_created_at: string | null;
  session_updated_at: string | null;
  session_ended_at: string | null;
  kept_session_id: string | null;
  kept_at: string | null;
  kept_config: Record<string, number | string> | null;
  kept_runtime: FleetInterval | null;
  kept_throughput: FleetInterval | null;
  kept_min_effect_percent: number | null;
  kept_confidence_percent: number | null;
  advice_findings: AdviceFinding[] | null;
  advice_parameters: string[] | null;
  advice_since: string | null;
  workload_changed_since: string | null;
  workload_distance: number | null;
  watch: FleetWatch | null;
}

/**
 * The kept configuration of database `d` as the lateral row `k` (id: its session; seq, acked_at,
 * config, runtime, throughput, min_effect_percent, confidence_percent): the newest keep=true apply of a
 * session's verified best that the agent acknowledged as applied (a session done, or stopped
 * after the agent received it), as long as no later command undid it: a revert to the baseline (a
 * person's, or a reverted session's) or another kept apply, not refused or failed (one still on
 * its way counts: the page says what is about to be true). The agent's own returns to known-good
 * keep it: it is the known-good. The fleet shows it; the watch (sql-watch.ts) judges it.
 */
export function keptConfiguration(join: 'LEFT JOIN' | 'JOIN'): string {
  return `
  ${join} LATERAL (
    SELECT s.id, c.seq, c.acked_at, c.body -> 'values' AS config, s.min_effect_percent, s.confidence_percent,
           -- The gain over what the session started from: after kept steps (tuning/steps.ts) the
           -- product of theirs, in best.runtime; the throughput only when that is the verification's own.
           COALESCE(s.best -> 'runtime', s.verification -> 'runtime') AS runtime,
           CASE WHEN s.best -> 'runtime' IS NULL OR s.best -> 'runtime' = s.verification -> 'runtime'
                THEN s.verification -> 'throughput' END AS throughput
      FROM tuning_sessions s JOIN commands c ON c.id = s.final_command_id AND c.database_id = s.database_id
     WHERE s.database_id = d.id AND s.state IN ('done', 'stopped') AND c.outcome ->> 'status' = 'applied'
     ORDER BY c.seq DESC LIMIT 1
  ) k ON NOT EXISTS (
    SELECT 1 FROM commands u
     WHERE u.database_id = d.id AND u.seq > k.seq
       AND ((u.body ->> 'kind' = 'revert' AND u.body ->> 'to' = 'baseline')
            OR (u.body ->> 'kind' = 'apply' AND u.body ->> 'keep' = 'true'))
       AND (u.status <> 'done' OR u.outcome ->> 'status' = 'applied')
  )`;
}

/**
 * The rows come back as one JSON array in one value: a thousand rows of thirty columns are
 * otherwise thirty thousand values for the driver to convert one by one, which on PGlite cost
 * more than the statement itself.
 * The kept configuration: keptConfiguration above; its watch: watch_states (watch/); the advice:
 * database_advice (advice/refresh.ts).
 */
const fleetRows = (where = '') => `
SELECT d.id, d.name, d.target, d.created_at,
       CASE WHEN l.lease_id IS NULL THEN 'none'
            WHEN l.released_at IS NOT NULL THEN 'stopped'
            WHEN l.expires_at > now() THEN 'connected'
            ELSE 'lost' END AS health,
       l.hostname, l.agent_version, l.last_report_at, l.expires_at AS lease_expires_at, l.released_at,
       l.system ->> 'applyBlockedReason' AS apply_blocked_reason,
       ls.id AS session_id, ls.state AS session_state, ls.message AS session_message,
       ls.created_at AS session_created_at, ls.updated_at AS session_updated_at, ls.ended_at AS session_ended_at,
       k.id AS kept_session_id, k.acked_at AS kept_at, k.config AS kept_config,
       k.runtime AS kept_runtime, k.throughput AS kept_throughput,
       k.min_effect_percent AS kept_min_effect_percent, k.confidence_percent AS kept_confidence_percent,
       -- The advice as last computed (advice/refresh.ts), when it still stands (the join's terms).
       a.findings AS advice_findings, a.parameters AS advice_parameters, a.since AS advice_since,
       -- The watch on the kept configuration (watch/), for that configuration only.
       ws.workload_changed_since, (ws.workload ->> 'distance')::float8 AS workload_distance,
       ws.state AS watch
  FROM databases d
  LEFT JOIN agent_leases l ON l.database_id = d.id
  LEFT JOIN LATERAL (
    SELECT s.id, s.state, s.message, s.created_at, s.updated_at, s.ended_at
      FROM tuning_sessions s WHERE s.database_id = d.id
     ORDER BY s.created_at DESC, s.id DESC LIMIT 1
  ) ls ON true
  ${keptConfiguration('LEFT JOIN')}
  LEFT JOIN watch_states ws ON ws.database_id = d.id AND ws.session_id = k.id
  -- Advice stands while no session runs, if computed after the latest one ended, on reports of
  -- its window (ADVICE_LIMITS.windowSeconds): what the dashboard's advice would say now.
  LEFT JOIN database_advice a ON a.database_id = d.id AND ${ADVICE_STANDS('a', '$2')}
        AND (ls.id IS NULL OR (ls.ended_at IS NOT NULL AND a.computed_at >= ls.ended_at))
 WHERE d.organization_id = $1::uuid ${where}`;

const FLEET_SQL = `SELECT coalesce(json_agg(f ORDER BY f.name, f.id), '[]'::json) AS fleet FROM (${fleetRows()}) f`;

/** The SQL of each state (fleet/flags.ts) over a row of FLEET_ROWS, as attention.ts fleetFlags
 * decides it ($8: the running session states); the tests hold the two to agree. */
const FLAG_SQL: Record<Exclude<FleetFlag, 'idle'>, string> = {
  awaiting_approval: "session_state = 'awaiting_approval'",
  agent_lost: "health = 'lost'",
  gain_gone: "watch = 'gone'",
  blocked: "coalesce(apply_blocked_reason, '') <> ''",
  session_failed: "session_state = 'failed'",
  workload_changed: 'workload_changed_since IS NOT NULL',
  advice: 'coalesce(cardinality(advice_findings), 0) > 0',
  agent_stopped: "health = 'stopped'",
  no_agent: "health = 'none'",
  tuning: 'session_state = ANY($8::text[])',
  kept: 'kept_session_id IS NOT NULL',
};
/** A flag's bit in a database's mask: 1 << its position in FLEET_FLAGS. */
const bit = (flag: FleetFlag) => 1 << FLEET_FLAGS.indexOf(flag);
const QUIET = FLEET_FLAGS.filter((f) => f !== 'idle');
/** Every state of the row as bits; `idle` when no other holds. */
const MASK_SQL = `(${QUIET.map((f) => `CASE WHEN ${FLAG_SQL[f]} THEN ${bit(f)} ELSE 0 END`).join(' + ')}) AS m`;
/** The position of the row's first state in FLEET_FLAGS: its rank (attention.ts needsAttentionRank). */
const RANK_SQL = `CASE ${QUIET.map((f, i) => `WHEN ${FLAG_SQL[f]} THEN ${i}`).join(' ')} ELSE ${FLEET_FLAGS.indexOf('idle')} END`;

/** The bits of the databases a state filter keeps (the `mask & bits <> 0` of FLEET_PAGE_SQL). */
function filterBits(state: FleetQuery['state']): number {
  if (state === 'all') return FLEET_FLAGS.reduce((bits, f) => bits | bit(f), 0);
  if (state === 'attention') return ATTENTION_FLAGS.reduce((bits, f) => bits | bit(f), 0);
  return bit(state);
}

/** Each sort (attention.ts COMPARATORS) as sort keys, $5 naming the sort: those of the other
 * sorts are null for every row, so they tie; then by name (byName). */
const PAGE_ORDER = `
  CASE WHEN $5 = 'attention' THEN rank END ASC,
  CASE WHEN $5 = 'attention' THEN waiting_since END ASC NULLS LAST,
  CASE WHEN $5 = 'last_report' THEN last_report_at END ASC NULLS FIRST,
  CASE WHEN $5 = 'gain' THEN gain END DESC NULLS LAST,
  lower(name) COLLATE "C", name COLLATE "C", id`;

/** The rows a query keeps: $3 the state filter's bits, $4 a piece of the name in lower case. */
const MATCHES = 'mask & $3::int <> 0 AND strpos(lower(name), $4) > 0';

/**
 * The counts of the whole fleet and one page of it in one statement (FleetStore.fleetPage). Each
 * database's state columns are read as for FLEET_SQL, then turned into a bit per state (mask),
 * its rank and its sort keys, kept for all; then one pass counts, and only the page's rows are
 * read whole and turned into JSON (at 10,000 databases, making and sending the JSON of all of them
 * was most of the statement's time). $6, $7: the page's size and offset.
 */
const FLEET_PAGE_SQL = `
WITH fleet AS MATERIALIZED (
  SELECT id, name, last_report_at, gain, rank,
         CASE WHEN m = 0 THEN ${bit('idle')} ELSE m END AS mask,
         CASE rank
           WHEN ${FLEET_FLAGS.indexOf('awaiting_approval')} THEN session_updated_at
           WHEN ${FLEET_FLAGS.indexOf('session_failed')} THEN session_updated_at
           WHEN ${FLEET_FLAGS.indexOf('agent_lost')} THEN coalesce(last_report_at, lease_expires_at)
           WHEN ${FLEET_FLAGS.indexOf('workload_changed')} THEN workload_changed_since
           WHEN ${FLEET_FLAGS.indexOf('advice')} THEN coalesce(advice_since, created_at)
         END AS waiting_since
    FROM (
      SELECT r.*, ${MASK_SQL}, ${RANK_SQL} AS rank,
             CASE WHEN jsonb_typeof(kept_runtime -> 'estimate') = 'number' AND jsonb_typeof(kept_runtime -> 'low') = 'number'
                       AND jsonb_typeof(kept_runtime -> 'high') = 'number'
                  THEN 1 - (kept_runtime ->> 'estimate')::float8 END AS gain
        FROM (
          SELECT id, name, created_at, health, apply_blocked_reason, last_report_at, lease_expires_at, session_state,
                 session_updated_at, kept_session_id, kept_runtime, advice_findings, advice_since, workload_changed_since, watch
            FROM (${fleetRows()}) f
        ) r
    ) x
),
page AS (
  SELECT id, rank, waiting_since, last_report_at, gain, name FROM fleet WHERE ${MATCHES}
   ORDER BY ${PAGE_ORDER} LIMIT $6::int OFFSET $7::int
),
-- Only the page's rows in full: the columns the page shows, for 100 databases rather than all.
shown AS (
  SELECT r.*, p.rank, p.waiting_since, p.gain FROM (${fleetRows('AND d.id IN (SELECT id FROM page)')}) r JOIN page p USING (id)
)
SELECT json_build_object(
  'total', count(*)::int,
  'attention', (count(*) FILTER (WHERE rank < ${ATTENTION_FLAGS.length}))::int,
  'counts', ARRAY[${FLEET_FLAGS.map((f) => `count(*) FILTER (WHERE mask & ${bit(f)} <> 0)`).join(', ')}]::int[],
  'matched', (count(*) FILTER (WHERE ${MATCHES}))::int,
  'rows', (SELECT coalesce(json_agg(s ORDER BY ${PAGE_ORDER}), '[]'::json) FROM shown s)
) AS answer
  FROM fleet`;

/** FLEET_PAGE_SQL's one value. */
interface PageAnswer {
  total: number;
  attention: number;
  /** In FLEET_FLAGS order. */
  counts: number[];
  matched: number;
  rows: FleetRow[];
}

/** A verification interval as stored (jsonb), or null when there is none or it is not one. */
function interval(value: FleetInterval | null): FleetInterval | null {
  if (value === null || typeof value !== 'object') return null;
  const { estimate, low, high } = value;
  return [estimate, low, high].every((x) => typeof x === 'number' && Number.isFinite(x)) ? { estimate, low, high } : null;
}

const date = (iso: string) => new Date(iso);
const dateOrNull = (iso: string | null) => (iso === null ? null : new Date(iso));

function toEntry(row: FleetRow): FleetEntry {
  return {
    id: row.id,
    name: row.name,
    target: row.target,
    createdAt: date(row.created_at),
    agent:
      row.health === 'none'
        ? null
        : {
            health: row.health,
            hostname: row.hostname ?? '',
            agentVersion: row.agent_version ?? '',
            lastReportAt: dateOrNull(row.last_report_at),
            leaseExpiresAt: date(row.lease_expires_at ?? '1970-01-01T00:00:00Z'),
            releasedAt: dateOrNull(row.released_at),
            applyBlockedReason: row.apply_blocked_reason,
          },
    kept:
      row.kept_session_id === null
        ? null
        : {
            sessionId: row.kept_session_id,
            keptAt: dateOrNull(row.kept_at),
            config: row.kept_config ?? {},
            runtime: interval(row.kept_runtime),
            throughput: interval(row.kept_throughput),
            minEffectPercent: row.kept_min_effect_percent ?? 0,
            confidencePercent: row.kept_confidence_percent ?? 0,
          },
    latestSession:
      row.session_id === null
        ? null
        : {
            id: row.session_id,
            state: row.session_state!,
            message: row.session_message,
            createdAt: date(row.session_created_at!),
            updatedAt: date(row.session_updated_at!),
            endedAt: dateOrNull(row.session_ended_at),
          },
    advice:
      row.advice_findings === null || row.advice_findings.length === 0
        ? null
        : {
            count: row.advice_findings.length,
            findings: row.advice_findings,
            parameters: row.advice_parameters ?? [],
            since: date(row.advice_since ?? row.created_at),
          },
    workloadChange:
      row.workload_changed_since === null ? null : { since: date(row.workload_changed_since), distance: row.workload_distance ?? 0 },
    watch: row.watch,
  };
}

export function createFleetStore(db: Queryable): FleetStore {
  return {
    async fleet(organizationId) {
      const [row] = await db.query<{ fleet: FleetRow[] | string }>(FLEET_SQL, [organizationId, ADVICE_LIMITS.windowSeconds], {
        name: 'fleet',
      });
      // node-postgres parses json itself; a driver that hands over the text gets it parsed here.
      const fleet = typeof row?.fleet === 'string' ? (JSON.parse(row.fleet) as FleetRow[]) : (row?.fleet ?? []);
      return fleet.map(toEntry);
    },

    async fleetPage(organizationId, query, pageSize) {
      const [row] = await db.query<{ answer: PageAnswer | string }>(
        FLEET_PAGE_SQL,
        [
          organizationId,
          ADVICE_LIMITS.windowSeconds,
          filterBits(query.state),
          query.q.toLowerCase(),
          query.sort,
          pageSize,
          (query.page - 1) * pageSize,
          RUNNING_SESSION_STATES,
        ],
        { name: 'fleet_page' },
      );
      const answer = typeof row!.answer === 'string' ? (JSON.parse(row!.answer) as PageAnswer) : row!.answer;
      const counts = Object.fromEntries(FLEET_FLAGS.map((f, i) => [f, answer.counts[i] ?? 0])) as Record<FleetFlag, number>;
      return {
        total: answer.total,
        attention: answer.attention,
        counts,
        matched: answer.matched,
        page: query.page,
        pageSize,
        shown: answer.rows.map(toEntry),
      };
    },
  };
}

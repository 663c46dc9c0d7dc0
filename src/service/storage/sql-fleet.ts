// The fleet home page's read (fleet/store.ts): every database of an account with its agent, its
// latest tuning session and its kept configuration, in ONE statement, so that the page costs one
// round-trip to the storage with 1,000 databases as with one (bench/fleet.ts).
import type { TargetKind } from '../../protocol/v1.ts';
import type { AgentHealth, FleetEntry, FleetInterval, FleetStore, FleetWatch } from '../fleet/store.ts';
import type { TuningSessionState } from '../tuning/store.ts';
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
const FLEET_SQL = `
SELECT coalesce(json_agg(f ORDER BY f.name, f.id), '[]'::json) AS fleet FROM (
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
 WHERE d.account_id = $1::uuid
) f`;

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
    async fleet(accountId) {
      const [row] = await db.query<{ fleet: FleetRow[] | string }>(FLEET_SQL, [accountId, ADVICE_LIMITS.windowSeconds], { name: 'fleet' });
      // node-postgres parses json itself; a driver that hands over the text gets it parsed here.
      const fleet = typeof row?.fleet === 'string' ? (JSON.parse(row.fleet) as FleetRow[]) : (row?.fleet ?? []);
      return fleet.map(toEntry);
    },
  };
}

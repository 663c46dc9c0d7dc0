// The planner probe: the statements carrying the time, each planned under the current settings
// and, when a candidate is given, under its session-settable values, marked changed or not. Read
// only: the statements are planned, never run (see explain.ts), and those that cannot be
// re-planned without risk are refused before anything is sent (refusal.ts).
import { redactStatementText } from '../../postgres/statement-redaction.ts';
import { PlanProbeSchema, type Plan, type PlanProbe, type StatementPlans } from '../../protocol/plans.ts';
import { REPORT_LIMITS } from '../../protocol/report.ts';
import type { Db } from '../database/db.ts';
import { DEFAULT_EXPLAIN_TIMEOUTS, explainGeneric, methodFor, PlanError, type ExplainOptions, type PlanMethod } from './explain.ts';
import { planChanges, planOf, planTree } from './fingerprint.ts';
import { isPlanless, planRefusal } from './refusal.ts';
import { splitSettings } from './settings.ts';
import { topStatements } from './top.ts';

export interface ProbeOptions {
  /** The candidate's values (NAME → VALUE, PostgreSQL's spellings); none: the current plans only. */
  settings?: Record<string, string>;
  /** Put the redacted text beside each queryid (the configuration's include_queries). */
  includeTexts: boolean;
  /** Default: generic_plan on 16+, prepare before. */
  method?: PlanMethod;
  statementTimeoutMs?: number;
  lockTimeoutMs?: number;
  /** Default: 80 % of the time, at most 50 statements. */
  limits?: { share: number; max: number };
}

/** A plan with its node tree, for people; the tree never leaves the host (toProtocol drops it). */
export type ShownPlan = Plan & { tree: string[] };

export interface ShownStatement extends Omit<StatementPlans, 'current' | 'candidate'> {
  current?: ShownPlan;
  candidate?: ShownPlan;
  /** What differs between the two, node by node ("+ SubPlan 1 (hashed): Seq Scan on t"). */
  changes?: string[];
  /** The SQLSTATE behind notPlanned, when PostgreSQL answered one (42501: a privilege). */
  sqlstate?: string;
}

export interface ProbeResult extends Omit<PlanProbe, 'statements'> {
  postgresVersion: string;
  statementTimeoutMs: number;
  lockTimeoutMs: number;
  statements: ShownStatement[];
}

async function planned(db: Db, text: string, settings: Record<string, string>, options: ExplainOptions): Promise<ShownPlan> {
  const { explain, jit } = await explainGeneric(db, text, settings, options);
  return { ...planOf(explain, jit), tree: planTree(explain) };
}

export async function probePlans(db: Db, options: ProbeOptions): Promise<ProbeResult> {
  const [server] = await db.query<{ num: number; version: string }>(
    `SELECT current_setting('server_version_num')::int AS num, current_setting('server_version') AS version`,
  );
  const explainOptions: ExplainOptions = {
    method: options.method ?? methodFor(server?.num ?? 0),
    statementTimeoutMs: options.statementTimeoutMs ?? DEFAULT_EXPLAIN_TIMEOUTS.statementTimeoutMs,
    lockTimeoutMs: options.lockTimeoutMs ?? DEFAULT_EXPLAIN_TIMEOUTS.lockTimeoutMs,
  };
  const candidate = options.settings && Object.keys(options.settings).length > 0 ? options.settings : undefined;
  const split = await splitSettings(db, candidate ?? {});
  const statements: ShownStatement[] = [];
  for (const top of await topStatements(db, options.limits)) {
    const shown: ShownStatement = { queryId: top.queryId, shareOfTime: top.shareOfTime };
    if (options.includeTexts && top.text !== null) shown.text = redactStatementText(top.text).slice(0, REPORT_LIMITS.maxQueryTextLength);
    statements.push(shown);
    const refusal =
      top.text === null
        ? "its text is hidden from the agent's user (GRANT pg_read_all_stats, a part of pg_monitor)"
        : planRefusal(top.text);
    if (refusal !== null) {
      shown.notPlanned = refusal;
      if (top.text !== null && isPlanless(top.text)) shown.planless = true;
      continue;
    }
    try {
      shown.current = await planned(db, top.text!, {}, explainOptions);
      if (candidate) {
        shown.candidate = await planned(db, top.text!, split.settable, explainOptions);
        shown.changed = shown.candidate.digest !== shown.current.digest;
        shown.changes = planChanges(shown.current.fingerprint, shown.candidate.fingerprint);
      }
    } catch (err) {
      if (!(err instanceof PlanError)) throw err;
      delete shown.current;
      shown.notPlanned = err.message;
      if (err.code) shown.sqlstate = err.code;
    }
  }
  return {
    postgresVersion: server?.version ?? 'unknown',
    method: explainOptions.method,
    statementTimeoutMs: explainOptions.statementTimeoutMs,
    lockTimeoutMs: explainOptions.lockTimeoutMs,
    settings: split.settable,
    notPlannableSettings: split.notPlannable,
    statements,
  };
}

/** What may leave the host: the probe without the trees, the changes' words and the server's details. */
export function toProtocol(result: ProbeResult): PlanProbe {
  const strip = (plan: ShownPlan | undefined): Plan | undefined =>
    plan && { fingerprint: plan.fingerprint, digest: plan.digest, totalCost: plan.totalCost };
  return PlanProbeSchema.parse({
    method: result.method,
    settings: result.settings,
    notPlannableSettings: result.notPlannableSettings,
    statements: result.statements.map(({ current, candidate, changes: _changes, sqlstate: _sqlstate, ...rest }) => ({
      ...rest,
      ...(current && { current: strip(current) }),
      ...(candidate && { candidate: strip(candidate) }),
    })),
  });
}

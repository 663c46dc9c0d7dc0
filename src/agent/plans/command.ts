// The service's plan command, carried out: the probe under each candidate's values, and the
// threshold searches. It asks the planner and changes nothing: no apply, no journal, every EXPLAIN
// in its own read-only transaction that is rolled back (explain.ts), bounded by its timeouts, and
// the whole command by a time budget, so that the loop is never held for long. Only parameters of
// the catalog are ever SET LOCAL, and a threshold search stays within the catalog's bounds for
// this machine.
import { boundsFor, getKnob, type Machine, type NumericKnob } from '../../knobs/index.ts';
import { redactStatementText } from '../../postgres/statement-redaction.ts';
import {
  PlanAnswerSchema,
  type Plan,
  type PlanAnswer,
  type PlanProbe,
  type PlanThreshold,
  type ThresholdParameter,
} from '../../protocol/plans.ts';
import { REPORT_LIMITS } from '../../protocol/report.ts';
import type { Command } from '../../protocol/v1.ts';
import { TARGETS } from '../targets/registry.ts';
import type { Db } from '../database/db.ts';
import { DEFAULT_EXPLAIN_TIMEOUTS, explainGeneric, methodFor, PlanError, type ExplainOptions } from './explain.ts';
import { planOf } from './fingerprint.ts';
import { probePlans, toProtocol } from './probe.ts';
import { planRefusal } from './refusal.ts';
import { topStatements, type TopStatement } from './top.ts';

export type PlanCommand = Extract<Command, { kind: 'plan' }>;

export const INCLUDE_PLANS_OFF =
  'include_plans is off: the agent does not ask the planner (set postgresql.include_plans: true, AGENT_POSTGRESQL_INCLUDE_PLANS=true, and restart the agent)';

/** The longest a threshold search bisects one statement: enough for 1 % of a range of 2^14. */
const MAX_BISECTIONS = 16;
/** How close the two ends of a bisection come before it stops: 5 % of the value for work_mem
 * (a log-scaled size), 0.05 for hash_mem_multiplier. */
const CLOSE_ENOUGH: Record<ThresholdParameter, (low: number, high: number) => boolean> = {
  work_mem: (low, high) => high - low <= Math.max(64, 0.05 * low),
  hash_mem_multiplier: (low, high) => high - low <= 0.05,
};

export interface PlanCommandContext {
  db: Db;
  /** The machine and target the catalog's bounds are for (the apply's checks use the same). */
  machine: Machine;
  targetKind: string;
  includeTexts: boolean;
  explain?: Partial<Pick<ExplainOptions, 'statementTimeoutMs' | 'lockTimeoutMs'>>;
  /** The whole command's time budget; statements left when it runs out are not planned. */
  budgetMs?: number;
}

export const DEFAULT_PLAN_BUDGET_MS = 30_000;

/** The answer to a plan command (throws PlanError or a connection error only at its start). */
export async function answerPlanCommand(ctx: PlanCommandContext, command: PlanCommand): Promise<PlanAnswer> {
  const deadline = Date.now() + (ctx.budgetMs ?? DEFAULT_PLAN_BUDGET_MS);
  const candidates: PlanProbe[] = [];
  for (const candidate of command.candidates) {
    const catalog: Record<string, string> = {};
    const outside: PlanProbe['notPlannableSettings'] = [];
    for (const [name, value] of Object.entries(candidate.values)) {
      if (getKnob(name)) catalog[name] = String(value);
      else outside.push({ name, reason: 'not a parameter of the catalog: the probe sets only those' });
    }
    const probe = toProtocol(await probePlans(ctx.db, { settings: catalog, includeTexts: ctx.includeTexts, ...ctx.explain }));
    // The plans under the current settings are the same for every candidate, and the service
    // compares candidates with each other (the known-good's values are one): left out, the
    // acknowledgement is half as long.
    const statements = probe.statements.map(({ current: _current, ...statement }) => statement);
    candidates.push({ ...probe, statements, notPlannableSettings: [...probe.notPlannableSettings, ...outside] });
  }
  const thresholds: PlanThreshold[] = [];
  for (const wanted of command.thresholds ?? []) thresholds.push(await searchThreshold(ctx, wanted, deadline));
  return PlanAnswerSchema.parse({ candidates, thresholds });
}

/** The value as SET LOCAL takes it: work_mem in kB, the multiplier as a number. */
const spelled = (name: ThresholdParameter, value: number) => (name === 'work_mem' ? `${Math.round(value)}kB` : String(value));

async function searchThreshold(
  ctx: PlanCommandContext,
  wanted: { name: ThresholdParameter; low: number; high: number },
  deadline: number,
): Promise<PlanThreshold> {
  const knob = getKnob(wanted.name) as NumericKnob;
  const bounds = boundsFor(knob, ctx.machine, TARGETS.capabilitiesOf(ctx.targetKind));
  const round = (v: number) => (knob.type === 'integer' ? Math.round(v) : Number(v.toFixed(3)));
  const low = round(Math.max(bounds.min, Math.min(wanted.low, wanted.high)));
  const high = round(Math.min(bounds.max, Math.max(wanted.low, wanted.high)));
  const found: PlanThreshold = { name: wanted.name, low, high, statements: [] };
  if (!(low < high)) return found;
  const [server] = await ctx.db.query<{ num: number }>(`SELECT current_setting('server_version_num')::int AS num`);
  const options: ExplainOptions = {
    method: methodFor(server?.num ?? 0),
    statementTimeoutMs: ctx.explain?.statementTimeoutMs ?? DEFAULT_EXPLAIN_TIMEOUTS.statementTimeoutMs,
    lockTimeoutMs: ctx.explain?.lockTimeoutMs ?? DEFAULT_EXPLAIN_TIMEOUTS.lockTimeoutMs,
  };
  const planAt = async (top: TopStatement, value: number): Promise<Plan> => {
    const { explain, jit } = await explainGeneric(ctx.db, top.text!, { [wanted.name]: spelled(wanted.name, value) }, options);
    return planOf(explain, jit);
  };
  for (const top of await topStatements(ctx.db)) {
    if (Date.now() > deadline) break;
    if (top.text === null || planRefusal(top.text) !== null) continue;
    try {
      let below = await planAt(top, low);
      let at = await planAt(top, high);
      if (below.digest === at.digest) continue;
      // The plan at `lo` is the one at low, at `hi` another: halve until the two ends are close.
      let lo = low;
      let hi = high;
      for (let i = 0; i < MAX_BISECTIONS && !CLOSE_ENOUGH[wanted.name](lo, hi) && Date.now() <= deadline; i++) {
        // A size is halved on its log scale: its thresholds sit anywhere from kilobytes to gigabytes.
        const mid = round(knob.scale === 'log' && lo > 0 ? Math.sqrt(lo * hi) : (lo + hi) / 2);
        if (mid <= lo || mid >= hi) break;
        const plan = await planAt(top, mid);
        if (plan.digest === below.digest) {
          lo = mid;
          below = plan;
        } else {
          hi = mid;
          at = plan;
        }
      }
      found.statements.push({
        queryId: top.queryId,
        ...(ctx.includeTexts && { text: redactStatementText(top.text).slice(0, REPORT_LIMITS.maxQueryTextLength) }),
        shareOfTime: top.shareOfTime,
        value: hi,
        below,
        at,
      });
    } catch (err) {
      // A statement that cannot be planned has no threshold to tell; the others still do.
      if (!(err instanceof PlanError)) throw err;
    }
  }
  return found;
}

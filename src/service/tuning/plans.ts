// What a plan-aware session reads in the planner's answer about a candidate (engine/planning.ts):
// the heavy statements' plans under the known-good values and under the candidate's, compared
// statement by statement. Three verdicts come before any window is spent: a candidate predicted
// to make a statement carrying ≥ 5 % of the time ≥ 3 times as costly is refused; one that moves
// only planner parameters and changes no plan is skipped (plan-neutral); the rest are measured,
// with the plan changes behind them kept for the step lines. And a threshold search's answer
// gives the smallest memory value that flips a heavy statement's plan, proposed with headroom.
import { isPlannerOnly } from '../../knobs/index.ts';
import type { NumericDimension } from '../../optimizer/index.ts';
import type { PlanFingerprint, PlanProbe, PlanThreshold, StatementPlans } from '../../protocol/plans.ts';
import type { IterationPlans, PlanChange } from './iteration-plans.ts';

export const PLAN_RULES = {
  /** A statement carrying this share of the time or more is heavy enough to refuse a regression on… */
  regressionShare: 0.05,
  /** …when the candidate's plan costs this many times the known-good's. */
  regressionCostFactor: 3,
  /** A statement not planned that carries this share or more leaves neutrality unknown. */
  unplannedShare: 0.05,
  /** A threshold is proposed this far above the value found: costs are estimates, sizes grow. */
  thresholdHeadroom: 1.25,
  /** Threshold searches follow statements carrying this share or more. */
  thresholdShare: 0.05,
} as const;

/** Nodes named in a change's words at most, on each side. */
const MAX_NODES_NAMED = 3;

/** Words for what differs between two plans of a statement ("a subplan is now hashed", …). */
export function describePlanChange(before: PlanFingerprint, after: PlanFingerprint): string[] {
  const words: string[] = [];
  if (after.subplans.hashed > before.subplans.hashed) words.push('a subplan is now hashed (its table built once, not run per row)');
  else if (after.subplans.hashed < before.subplans.hashed) words.push('a hashed subplan is now run per row');
  if (after.hashAggregates > before.hashAggregates) words.push('an aggregate is now hashed');
  else if (after.hashAggregates < before.hashAggregates) words.push('a hashed aggregate is now sorted or plain');
  if (after.jit !== before.jit) words.push(after.jit ? 'now JIT-compiled' : 'no longer JIT-compiled');
  if (after.workersPlanned !== before.workersPlanned)
    words.push(`parallel workers planned: ${before.workersPlanned} → ${after.workersPlanned}`);
  const removed = multisetMinus(before.nodes, after.nodes);
  const added = multisetMinus(after.nodes, before.nodes);
  const named = (nodes: string[]) => [...nodes.slice(0, MAX_NODES_NAMED), ...(nodes.length > MAX_NODES_NAMED ? ['…'] : [])].join(', ');
  if (removed.length > 0 && added.length > 0) words.push(`${named(removed)} → ${named(added)}`);
  else if (added.length > 0) words.push(`+ ${named(added)}`);
  else if (removed.length > 0) words.push(`− ${named(removed)}`);
  return words.length > 0 ? words : ['the plan has another shape'];
}

function multisetMinus(a: readonly string[], b: readonly string[]): string[] {
  const left = new Map<string, number>();
  for (const x of b) left.set(x, (left.get(x) ?? 0) + 1);
  const out: string[] = [];
  for (const x of a) {
    const n = left.get(x) ?? 0;
    if (n > 0) left.set(x, n - 1);
    else out.push(x);
  }
  return out;
}

/** How a change is named for people: its text when the agent sends texts, else its queryid. */
export const statementName = (s: { queryId: string; text?: string | undefined }) =>
  s.text ? `"${s.text.length > 120 ? `${s.text.slice(0, 119)}…` : s.text}" (queryid ${s.queryId})` : `queryid ${s.queryId}`;

export interface CandidateJudgement extends Omit<IterationPlans, 'commandIds' | 'thresholds'> {
  /** The regression that refuses it, when refused. */
  regression?: PlanChange;
}

/**
 * The candidate's plans (`candidate`: planned under its values) against the known-good's
 * (`reference`: planned under the known-good values of the same parameters), statement by
 * statement; `moved`: the parameters the candidate changes.
 */
export function judgeCandidate(moved: readonly string[], reference: PlanProbe, candidate: PlanProbe): CandidateJudgement {
  const before = new Map(reference.statements.map((s) => [s.queryId, s]));
  const changes: PlanChange[] = [];
  const unplanned: StatementPlans[] = [];
  for (const after of candidate.statements) {
    const was = before.get(after.queryId);
    if (after.planless) continue;
    if (!after.candidate || !was?.candidate) {
      unplanned.push(after);
      continue;
    }
    if (after.candidate.digest === was.candidate.digest) continue;
    changes.push({
      queryId: after.queryId,
      ...(after.text !== undefined && { text: after.text }),
      shareOfTime: after.shareOfTime,
      costFactor: Number((after.candidate.totalCost / Math.max(was.candidate.totalCost, 1e-6)).toPrecision(4)),
      words: describePlanChange(was.candidate.fingerprint, after.candidate.fingerprint),
    });
  }
  changes.sort((a, b) => b.shareOfTime - a.shareOfTime);
  const regression = changes
    .filter((c) => c.shareOfTime >= PLAN_RULES.regressionShare && c.costFactor >= PLAN_RULES.regressionCostFactor)
    .sort((a, b) => b.shareOfTime * b.costFactor - a.shareOfTime * a.costFactor)[0];
  if (regression) {
    return {
      verdict: 'refused',
      changes,
      regression,
      note: `refused before it ran: the planner predicts ${statementName(regression)}, ${pct(regression.shareOfTime)} of the time, ${regression.costFactor.toFixed(1)} times as costly (${regression.words.join('; ')})`,
    };
  }
  if (changes.length > 0) {
    return { verdict: 'changes', changes, note: `the plans of ${changes.length} heavy statement(s) change: ${changesInWords(changes)}` };
  }
  const others = moved.filter((name) => !isPlannerOnly(name));
  // A parameter the probe could not SET matters only when the candidate moves it.
  const notPlannable = [...reference.notPlannableSettings, ...candidate.notPlannableSettings]
    .map((s) => s.name)
    .filter((name) => moved.includes(name));
  const unknown = unplanned.filter((s) => s.shareOfTime >= PLAN_RULES.unplannedShare);
  const planned = candidate.statements.filter((s) => !s.planless).length - unplanned.length;
  if (others.length > 0)
    return {
      verdict: 'unchanged',
      changes,
      note: `no heavy statement's plan changes; it moves ${others.join(', ')}, which act beyond the plan: measured`,
    };
  if (notPlannable.length > 0)
    return {
      verdict: 'unchanged',
      changes,
      note: `the planner could not be asked under ${[...new Set(notPlannable)].join(', ')}: measured`,
    };
  if (unknown.length > 0 || planned === 0)
    return {
      verdict: 'unchanged',
      changes,
      note: `${unknown.length > 0 ? `${unknown.length} heavy statement(s) could not be planned (${unknown[0]!.notPlanned ?? 'no plan'})` : 'no statement could be planned'}: measured`,
    };
  return {
    verdict: 'neutral',
    changes,
    note: `plan-neutral: ${moved.length > 0 ? `it moves only planner parameters (${moved.join(', ')})` : 'it moves nothing from the known-good configuration'} and the plans of the ${planned} heavy statement(s) stay the same: skipped, no window spent`,
  };
}

export const changesInWords = (changes: readonly PlanChange[]) =>
  changes
    .slice(0, 3)
    .map((c) => `${statementName(c)}: ${c.words.join('; ')}`)
    .join(' · ') + (changes.length > 3 ? ` · and ${changes.length - 3} more` : '');

const pct = (x: number) => `${Number((x * 100).toPrecision(2))} %`;

/** The thresholds of heavy statements, heaviest first, as kept with the iteration. */
export function heavyThresholds(thresholds: readonly PlanThreshold[]): NonNullable<IterationPlans['thresholds']> {
  return thresholds
    .flatMap((t) =>
      t.statements
        .filter((s) => s.shareOfTime >= PLAN_RULES.thresholdShare)
        .map((s) => ({
          name: t.name,
          value: s.value,
          queryId: s.queryId,
          ...(s.text !== undefined && { text: s.text }),
          shareOfTime: s.shareOfTime,
          words: describePlanChange(s.below.fingerprint, s.at.fingerprint),
        })),
    )
    .sort((a, b) => b.shareOfTime - a.shareOfTime);
}

/**
 * The value to try for `dimension` given the thresholds found: the heaviest statement's threshold
 * with headroom, within the dimension's bounds, when the candidate's own value sits below it;
 * null when the candidate is at or above it already (or no heavy statement flips).
 */
export function thresholdValue(
  dimension: NumericDimension,
  current: number,
  thresholds: NonNullable<IterationPlans['thresholds']>,
): { value: number; threshold: NonNullable<IterationPlans['thresholds']>[number] } | null {
  const heaviest = thresholds.find((t) => t.name === dimension.name);
  if (!heaviest || current >= heaviest.value) return null;
  const raw = Math.min(dimension.max, Math.max(dimension.min, heaviest.value * PLAN_RULES.thresholdHeadroom));
  const value = dimension.type === 'integer' ? Math.ceil(raw) : Number(raw.toFixed(2));
  return value > current ? { value, threshold: heaviest } : null;
}

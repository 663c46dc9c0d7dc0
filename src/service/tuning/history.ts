// A session's windows read as measurements: the baseline windows (the first, and those between
// the trials and in the A/B rounds) give the drift and the noise of one window; each trial is
// judged against the baseline windows nearest in time; the optimizer's history is the trials so
// judged, each with its noise level. Windows that were contaminated, cancelled or are still open
// count for nothing.
import { drift, judge, pooledWindowNoiseOf, type BaselinePoint, type Drift, type Judged } from '../../measure/drift.ts';
import {
  best,
  configKey,
  recommend,
  type Observation,
  type SearchSpace,
  type Suggestion,
  type SuggestionKind,
} from '../../optimizer/index.ts';
import type { TuningIterationRecord, TuningSessionRecord } from './store.ts';
import { chainAt, currentEpoch, epochOf, keptSteps } from './steps.ts';
import { windowOf } from './window-length.ts';

const TRIAL_KINDS = new Set<TuningIterationRecord['kind']>(['diagnosis', 'heuristic', 'explore', 'remeasure']);

/** A trial of the search: a configuration the optimizer suggested. */
export const isTrial = (it: TuningIterationRecord) => it.phase === 'search' && TRIAL_KINDS.has(it.kind);

const middle = (w: { start: Date; end: Date }) => (w.start.getTime() + w.end.getTime()) / 2;
const seconds = (w: { start: Date; end: Date }) => (w.end.getTime() - w.start.getTime()) / 1000;

/** A clean window as a point of the drift model: its middle and its weighted runtime. */
export function pointOf(it: TuningIterationRecord): BaselinePoint | null {
  const runtime = it.stats?.weightedRuntimeMs;
  return it.state === 'ok' && it.window && runtime && runtime > 0
    ? { at: middle(it.window), runtimeMs: runtime, seconds: seconds(it.window) }
    : null;
}

/** Every clean baseline window: the first (the session's), then the baseline iterations; only
 * those of epoch `epoch` when given (steps.ts: the known-good configuration of that epoch). */
export function baselinePoints(
  session: TuningSessionRecord,
  iterations: readonly TuningIterationRecord[],
  epoch: number | null = null,
): BaselinePoint[] {
  const points: BaselinePoint[] = [];
  const first = session.baseline?.stats.weightedRuntimeMs;
  if ((epoch ?? 0) === 0 && session.baselineWindow && first && first > 0)
    points.push({ at: middle(session.baselineWindow), runtimeMs: first, seconds: seconds(session.baselineWindow) });
  for (const it of iterations) {
    if (epoch !== null && epochOf(session, it.ordinal) !== epoch) continue;
    const p = it.kind === 'baseline' ? pointOf(it) : null;
    if (p) points.push(p);
  }
  // The A/B windows that verified the step an epoch starts with measured its known-good already:
  // without them, its first trials are judged against a single baseline window (spurious second
  // steps on work-mem, docs/benchmarks.md).
  const step = epoch !== null && epoch > 0 ? keptSteps(session)[epoch - 1] : undefined;
  if (step) {
    const key = configKey(step.config);
    for (const it of iterations) {
      const p =
        it.phase === 'verify' && it.kind === 'candidate' && it.ordinal <= step.keptAfter && configKey(it.config) === key
          ? pointOf(it)
          : null;
      if (p) points.push(p);
    }
  }
  return points;
}

export interface SessionJudgement {
  /** Every clean baseline window, carried back to the first baseline's scale (runtime over the
   * epoch's chain, steps.ts), for the drift. */
  baselines: BaselinePoint[];
  drift: Drift | null;
  /** Standard deviation of one window's log runtime, pooled over the epochs; null until enough baseline windows. */
  noise: number | null;
  /** The successive differences of baseline windows the noise rests on (0 while it is null). */
  noiseDifferences: number;
  /** Trials' and candidate windows' objectives, by ordinal: against the baseline windows of their
   * epoch, times the epoch's chain (on the first baseline's scale). */
  judged: Map<number, Judged>;
  /** Baseline windows' runtime over the first baseline's (the drift, and the kept steps), by ordinal. */
  baselineRatios: Map<number, number>;
  /** Plan-neutral trials (skipped unmeasured: engine/planning.ts), by ordinal: the known-good's
   * objective of their epoch, which the planner says they equal. */
  neutral: Map<number, Judged>;
}

export function judgeSession(session: TuningSessionRecord, iterations: readonly TuningIterationRecord[]): SessionJudgement {
  const epochs = Array.from({ length: currentEpoch(session) + 1 }, (_, e) => baselinePoints(session, iterations, e));
  // The noise of a window as long as the session's windows are now (window-length.ts).
  const pooled = pooledWindowNoiseOf(epochs, windowOf(session));
  const noise = pooled?.sd ?? null;
  const judged = new Map<number, Judged>();
  const baselineRatios = new Map<number, number>();
  const first = session.baseline?.stats.weightedRuntimeMs ?? null;
  for (const it of iterations) {
    const p = pointOf(it);
    if (!p) continue;
    if (it.kind === 'baseline') {
      if (first) baselineRatios.set(it.ordinal, p.runtimeMs / first);
      continue;
    }
    const epoch = epochOf(session, it.ordinal);
    const j = judge(p, epochs[epoch] ?? [], noise);
    if (j) judged.set(it.ordinal, { ...j, objective: j.objective * chainAt(session, epoch) });
  }
  const neutral = new Map<number, Judged>();
  for (const it of iterations)
    if (it.state === 'plan_neutral') neutral.set(it.ordinal, { objective: chainAt(session, epochOf(session, it.ordinal)), sd: noise });
  const baselines = epochs.flatMap((points, e) => points.map((p) => ({ ...p, runtimeMs: p.runtimeMs / chainAt(session, e) })));
  return { baselines, drift: drift(baselines), noise, noiseDifferences: pooled?.differences ?? 0, judged, baselineRatios, neutral };
}

/** The suggestion kind of a trial, for the optimizer (remeasure rows are from older sessions). */
const kindOf = (it: TuningIterationRecord): { kind?: SuggestionKind } =>
  it.kind === 'diagnosis' || it.kind === 'heuristic' || it.kind === 'explore' ? { kind: it.kind } : {};

/**
 * The optimizer's history: every finished trial in order, judged; a failed one, or one refused
 * before it ran (a plan regression), with no objective. `withNeutral`: the plan-neutral trials too,
 * at the known-good's objective (the search must not suggest them again); a recommendation is
 * never one of them (it equals the known-good).
 */
export function historyOf(
  iterations: readonly TuningIterationRecord[],
  judgement: SessionJudgement,
  { withNeutral = false }: { withNeutral?: boolean } = {},
): Observation[] {
  return iterations.filter(isTrial).flatMap((it): Observation[] => {
    const measuredAt = it.finishedAt?.toISOString();
    const neutral = withNeutral ? judgement.neutral.get(it.ordinal) : undefined;
    if (neutral) {
      const noise = neutral.sd !== null ? { noise: neutral.sd } : {};
      return [
        { config: it.config, objective: neutral.objective, status: 'ok', ...noise, ...(measuredAt && { measuredAt }), ...kindOf(it) },
      ];
    }
    const j = judgement.judged.get(it.ordinal);
    if (it.state === 'ok' && j && j.objective > 0) {
      return [
        {
          config: it.config,
          objective: j.objective,
          status: 'ok',
          ...(j.sd !== null && { noise: j.sd }),
          ...(measuredAt && { measuredAt }),
          ...kindOf(it),
        },
      ];
    }
    if (it.state === 'failed' || it.state === 'refused')
      return [{ config: it.config, objective: null, status: 'failed', ...(measuredAt && { measuredAt }), ...kindOf(it) }];
    return [];
  });
}

type SearchPick = { iteration: number; config: Record<string, number | string>; objective: number };

/** A configuration the optimizer picks from the history, with the trial that last measured it. */
function pick(
  choose: typeof best,
  space: SearchSpace,
  iterations: readonly TuningIterationRecord[],
  judgement: SessionJudgement,
): SearchPick | null {
  const chosen = choose({ space, history: historyOf(iterations, judgement) });
  if (!chosen) return null;
  const key = configKey(chosen.config);
  const last = iterations.filter((it) => isTrial(it) && it.state === 'ok' && configKey(it.config) === key).at(-1);
  return { iteration: last?.ordinal ?? 0, config: { ...chosen.config }, objective: chosen.objective };
}

/** The search's best as the optimizer sees it (not verified). */
export const searchBest = (space: SearchSpace, iterations: readonly TuningIterationRecord[], judgement: SessionJudgement) =>
  pick(best, space, iterations, judgement);

/** What the search puts to verification: the fewest changes the windows cannot tell from its best. */
export const searchRecommendation = (space: SearchSpace, iterations: readonly TuningIterationRecord[], judgement: SessionJudgement) =>
  pick(recommend, space, iterations, judgement);

/** The search's best objective after each iteration (null before any, and for rows that are no trial's), for the chart. */
export function bestSoFar(
  space: SearchSpace,
  iterations: readonly TuningIterationRecord[],
  judgement: SessionJudgement,
): Array<number | null> {
  return iterations.map((it, i) => (isTrial(it) ? (searchBest(space, iterations.slice(0, i + 1), judgement)?.objective ?? null) : null));
}

/**
 * The search has nothing left to give: the model's optimistic bound (Prediction.possibleImprovement)
 * promised less than `minEffect` over the best so far at the next step and at each of the
 * `steps` − 1 measured trials before it. Their promises, oldest first, or null.
 */
export function nothingLeft(
  iterations: readonly TuningIterationRecord[],
  next: Suggestion,
  minEffect: number,
  steps: number,
): number[] | null {
  const measured = iterations.filter((it) => isTrial(it) && (it.state === 'ok' || it.state === 'failed')).slice(-(steps - 1));
  const promised = [...measured.map((it) => it.predicted?.possibleImprovement), next.predicted?.possibleImprovement];
  if (measured.length < steps - 1 || promised.some((p) => p === undefined || p >= minEffect)) return null;
  return promised as number[];
}

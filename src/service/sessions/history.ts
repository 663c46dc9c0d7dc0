// The optimizer's history, read off a session's iterations: every finished measurement in order,
// a failed one (refused, failed, reverted by a guardrail, or over a constraint) with no objective,
// so that the optimizer keeps away from its region.
import { best, type Observation, type SearchSpace } from '../../optimizer/index.ts';
import type { SessionBest, TuningIterationRecord } from '../storage/storage.ts';

export function historyOf(iterations: readonly TuningIterationRecord[]): Observation[] {
  return iterations.flatMap((it): Observation[] => {
    const measuredAt = it.finishedAt?.toISOString();
    if (it.state === 'ok' && it.objective !== null && it.objective > 0) {
      return [{ config: it.config, objective: it.objective, status: 'ok', ...(measuredAt && { measuredAt }) }];
    }
    if (it.state === 'failed') return [{ config: it.config, objective: null, status: 'failed', ...(measuredAt && { measuredAt }) }];
    return [];
  });
}

const keyOf = (config: Readonly<Record<string, unknown>>) => JSON.stringify(Object.entries(config).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));

/** The incumbent best as the optimizer sees it, with the iteration that last measured it. */
export function sessionBest(space: SearchSpace, iterations: readonly TuningIterationRecord[]): SessionBest | null {
  const incumbent = best({ space, history: historyOf(iterations) });
  if (!incumbent) return null;
  const key = keyOf(incumbent.config);
  const last = iterations.filter((it) => it.state === 'ok' && keyOf(it.config) === key).at(-1);
  return { iteration: last?.ordinal ?? 0, config: { ...incumbent.config }, objective: incumbent.objective, measurements: incumbent.measurements };
}

/** The best objective known after each iteration (null before any), for the chart. */
export function bestSoFar(space: SearchSpace, iterations: readonly TuningIterationRecord[]): Array<number | null> {
  return iterations.map((_, i) => sessionBest(space, iterations.slice(0, i + 1))?.objective ?? null);
}

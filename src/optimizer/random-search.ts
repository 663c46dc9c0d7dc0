// Random search under the same constraints and failed-region rule as the optimizer: the
// baseline the benchmark and the tests compare Bayesian optimization with.
import { randomCandidates } from './candidates.ts';
import { validateSuggestion } from './feasibility.ts';
import { checkHistory, DEFAULT_FAILED_RADIUS, failedPoints, inFailedRegion } from './history.ts';
import { createRng } from './random.ts';
import type { History, SearchSpace, Suggestion } from './types.ts';

export interface RandomSuggestInput {
  readonly space: SearchSpace;
  readonly history: History;
  readonly seed: number | string;
  readonly iteration?: number;
  readonly failedRadius?: number;
}

/** A configuration drawn uniformly from the feasible ones outside every failed region. */
export function randomSuggest(input: RandomSuggestInput): Suggestion {
  const { space, history } = input;
  checkHistory(history);
  const rng = createRng('random', input.seed, input.iteration ?? history.length);
  const failed = failedPoints(space, history);
  const radius = input.failedRadius ?? DEFAULT_FAILED_RADIUS;
  for (let attempt = 0; attempt < 8; attempt++) {
    const chosen = randomCandidates(space, rng, 8).find(
      (c) => !inFailedRegion(space, c.point, failed, radius) && validateSuggestion(space, c.config).ok,
    );
    if (chosen) return { kind: 'explore', config: chosen.config, reason: 'random search: a uniformly drawn feasible configuration' };
  }
  throw new Error('no feasible configuration found by random search');
}

// What any step may propose: a configuration not measured before, outside every failed
// region, and accepted by the agent's own validator.
import type { Candidate } from './candidates.ts';
import { validateSuggestion } from './feasibility.ts';
import { inFailedRegion } from './history.ts';
import type { Point, SearchSpace } from './types.ts';

export interface Filter {
  readonly failed: readonly Point[];
  /** The point of every configuration in the history. */
  readonly seen: readonly Point[];
  readonly radius: number;
}

/** Equal configurations of the space encode to equal points. */
export const samePoint = (a: Point, b: Point): boolean => a.length === b.length && a.every((v, i) => v === b[i]);

export function allowed(space: SearchSpace, filter: Filter, c: Candidate): boolean {
  return !filter.seen.some((p) => samePoint(p, c.point)) && !inFailedRegion(space, c.point, filter.failed, filter.radius);
}

/** The first candidate the agent's validator accepts, in the order given. */
export function firstValid(space: SearchSpace, ranked: readonly Candidate[]): Candidate | undefined {
  return ranked.find((c) => validateSuggestion(space, c.config).ok);
}

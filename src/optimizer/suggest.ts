// The optimizer's decisions, one call at a time. The caller (the tuning service) keeps the
// history and passes it back whole; from it and a seed the optimizer decides, deterministically:
//   1. the expert heuristic (pgtune), until it has been tried;
//   2. then exploration: a space-filling random configuration while there are too few
//      observations for a model, then Bayesian optimization (bayes.ts).
// Every suggestion passes the agent's own validateChange, and none falls in a failed region.
// Re-measuring a best is not the optimizer's business: the tuning session verifies its
// candidate by A/B rounds against the baseline (src/measure/verify.ts), and its interleaved
// baseline windows give each observation its noise level (Observation.noise).
import { describeMachine } from '../knobs/index.ts';
import { bayesianStep } from './bayes.ts';
import { randomCandidates, type Candidate } from './candidates.ts';
import { heuristicConfig } from './heuristic.ts';
import { checkHistory, DEFAULT_FAILED_RADIUS, failedPoints } from './history.ts';
import type { PgtuneWorkload } from './pgtune.ts';
import { createRng, type Rng } from './random.ts';
import { allowed, firstValid, samePoint, type Filter } from './selection.ts';
import { distance, encode } from './space.ts';
import type { History, Point, SearchSpace, Suggestion } from './types.ts';

export interface SuggestOptions {
  /** pgtune's workload profile for the heuristic (default mixed). */
  readonly workload?: PgtuneWorkload;
  /** Nothing is suggested within this distance of a failed point (default 0.15). */
  readonly failedRadius?: number;
  /** Distinct configurations observed before the model is used (default 3). */
  readonly initialDesign?: number;
  /** Random candidates per step (default 128); the model's local candidates come on top. */
  readonly candidates?: number;
}

export interface SuggestInput {
  readonly space: SearchSpace;
  readonly history: History;
  readonly seed: number | string;
  /** The caller's step number; defaults to the history's length. Part of the random stream. */
  readonly iteration?: number;
  readonly options?: SuggestOptions;
}

type Settings = Required<SuggestOptions>;

function settingsOf(options: SuggestOptions = {}): Settings {
  return {
    workload: options.workload ?? 'mixed',
    failedRadius: options.failedRadius ?? DEFAULT_FAILED_RADIUS,
    initialDesign: options.initialDesign ?? 3,
    candidates: options.candidates ?? 128,
  };
}

/** The random candidate farthest from everything tried: spreads the first points out. */
function spaceFilling(space: SearchSpace, history: History, rng: Rng, filter: Filter, count: number): Suggestion | undefined {
  const tried = history.map((o) => encode(space, o.config));
  const spread = (c: Candidate) => Math.min(Infinity, ...tried.map((p) => distance(space, c.point, p)));
  const ranked = randomCandidates(space, rng, count)
    .filter((c) => allowed(space, filter, c))
    .map((c) => ({ c, d: spread(c) }))
    .sort((a, b) => b.d - a.d);
  const chosen = firstValid(
    space,
    ranked.map((r) => r.c),
  );
  if (!chosen) return undefined;
  const why =
    tried.length === 0 ? 'nothing measured yet' : `${tried.length} observation${tried.length === 1 ? '' : 's'}, too few for a model`;
  return { kind: 'explore', config: chosen.config, reason: `space-filling random configuration (${why})` };
}

const distinctCount = (points: readonly Point[]) => points.filter((p, i) => !points.slice(0, i).some((q) => samePoint(p, q))).length;

/** The next configuration to measure. Throws when the history is malformed or nothing is feasible. */
export function suggest(input: SuggestInput): Suggestion {
  const { space, history } = input;
  checkHistory(history);
  const s = settingsOf(input.options);
  const rng = createRng('suggest', input.seed, input.iteration ?? history.length);
  const seen = history.map((o) => encode(space, o.config));
  const filter: Filter = { failed: failedPoints(space, history), seen, radius: s.failedRadius };

  const heuristic = heuristicConfig(space, s.workload);
  if (heuristic && allowed(space, filter, { config: heuristic, point: encode(space, heuristic) })) {
    return {
      kind: 'heuristic',
      config: heuristic,
      reason: `pgtune's recommendation (${s.workload} workload) for ${describeMachine(space.machine)}, within the bounds and constraints`,
    };
  }

  const explored =
    (distinctCount(seen) >= s.initialDesign ? bayesianStep(space, history, rng, filter, s.candidates) : undefined) ??
    spaceFilling(space, history, rng, filter, s.candidates);
  if (explored) return explored;
  throw new Error('no feasible configuration: every candidate breaks a constraint or lies in a failed region');
}

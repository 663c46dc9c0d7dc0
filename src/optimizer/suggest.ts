// The optimizer's decisions, one call at a time. The caller (the tuning service) keeps the
// history and passes it back whole; from it and a seed the optimizer decides, deterministically:
//   1. the expert heuristic (pgtune), until it has been tried;
//   2. a re-measurement of the incumbent best when it has been measured once only (as soon as
//      it has stood unbeaten for a couple of steps), or when it has not been measured for a
//      while (to notice drift);
//   3. otherwise exploration: a space-filling random configuration while there are too few
//      observations for a model, then Bayesian optimization (bayes.ts).
// Every suggestion passes the agent's own validateChange, and none falls in a failed region.
import { describeMachine } from '../knobs/index.ts';
import { bayesianStep } from './bayes.ts';
import { randomCandidates, type Candidate } from './candidates.ts';
import { validateSuggestion } from './feasibility.ts';
import { heuristicConfig } from './heuristic.ts';
import { best, checkHistory, DEFAULT_FAILED_RADIUS, failedPoints, type Incumbent } from './history.ts';
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
  /** A best is trusted after this many measurements (default 2)… */
  readonly minMeasurements?: number;
  /**
   * …and a new best measured fewer times is re-measured once it has stood unbeaten for this
   * many further steps (default 2): early on, bests follow each other quickly, and measuring
   * again one that is beaten next step would waste a step of the live database.
   */
  readonly confirmAfter?: number;
  /** A trusted best is re-measured after this many other steps (default 10)… */
  readonly remeasureEvery?: number;
  /** …until it has this many measurements (default 4). */
  readonly maxMeasurements?: number;
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
    minMeasurements: options.minMeasurements ?? 2,
    confirmAfter: options.confirmAfter ?? 2,
    remeasureEvery: options.remeasureEvery ?? 10,
    maxMeasurements: options.maxMeasurements ?? 4,
    initialDesign: options.initialDesign ?? 3,
    candidates: options.candidates ?? 128,
  };
}

const round3 = (x: number) => Number(x.toPrecision(3));

/** Why the incumbent should be measured again now, if it should. */
function remeasureReason(incumbent: Incumbent, s: Settings, stepsSince: number): string | undefined {
  const value = round3(incumbent.objective);
  if (incumbent.measurements < s.minMeasurements) {
    if (stepsSince < s.confirmAfter) return undefined;
    const times = incumbent.measurements === 1 ? 'once' : `${incumbent.measurements} times`;
    return `new best (objective ${value}) measured ${times}: re-measured before it is trusted`;
  }
  if (incumbent.measurements < s.maxMeasurements && stepsSince >= s.remeasureEvery) {
    return `best (objective ${value} over ${incumbent.measurements} measurements) not measured for ${stepsSince} steps: re-measured to catch drift`;
  }
  return undefined;
}

/** The random candidate farthest from everything tried: spreads the first points out. */
function spaceFilling(space: SearchSpace, history: History, rng: Rng, filter: Filter, count: number): Suggestion | undefined {
  const tried = history.map((o) => encode(space, o.config));
  const spread = (c: Candidate) => Math.min(Infinity, ...tried.map((p) => distance(space, c.point, p)));
  const ranked = randomCandidates(space, rng, count)
    .filter((c) => allowed(space, filter, c))
    .map((c) => ({ c, d: spread(c) }))
    .sort((a, b) => b.d - a.d);
  const chosen = firstValid(space, ranked.map((r) => r.c));
  if (!chosen) return undefined;
  const why = tried.length === 0 ? 'nothing measured yet' : `${tried.length} observation${tried.length === 1 ? '' : 's'}, too few for a model`;
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

  const incumbent = best({ space, history, failedRadius: s.failedRadius });
  // A best from another space (the mode changed since) may set knobs this one cannot: then it
  // is not re-measured, and exploration goes on.
  const measurable = incumbent !== null && validateSuggestion(space, incumbent.config).ok;
  const remeasure = incumbent && measurable ? remeasureReason(incumbent, s, history.length - 1 - incumbent.lastIndex) : undefined;
  if (incumbent && remeasure) return { kind: 'remeasure', config: { ...incumbent.config }, reason: remeasure };

  const explored =
    (distinctCount(seen) >= s.initialDesign ? bayesianStep(space, history, rng, filter, s.candidates) : undefined) ??
    spaceFilling(space, history, rng, filter, s.candidates);
  if (explored) return explored;
  if (incumbent && measurable) {
    return { kind: 'remeasure', config: { ...incumbent.config }, reason: 'no new feasible configuration outside the failed regions: re-measuring the best' };
  }
  throw new Error('no feasible configuration: every candidate breaks a constraint or lies in a failed region');
}

// The optimizer's decisions, one call at a time. The caller (the tuning service) keeps the
// history and passes it back whole; from it, the baseline's signals and a seed the optimizer
// decides, deterministically, in the order a careful DBA would try things on a live database:
//   1. diagnoses: what the database's own statistics argue for (diagnose.ts), one at a time,
//      each on top of the best configuration so far, each with its evidence in words;
//   2. the expert heuristic (pgtune), on top of the best so far, once (an observation of kind
//      'heuristic' says it was tried; without kinds, an identical configuration does);
//   3. steps inside a trust region around the best so far (trust-region.ts), moving at most a
//      few knobs, the knobs that matter for this workload most often (the model's importance,
//      the diagnosed knobs, and none the signals rule out: relevance.ts): chosen by the model
//      (bayes.ts) once two measurements exist, at random inside the region before.
// Nothing moves every knob at once: random configurations are for offline benchmarks
// (random-search.ts). Every suggestion passes the agent's own validateChange, and none falls in
// a failed region. Re-measuring a best is not the optimizer's business: the tuning session
// verifies its candidate by A/B rounds against the baseline (src/measure/verify.ts), and its
// interleaved baseline windows give each observation its noise level (Observation.noise).
import { describeMachine, describeValue, getKnob } from '../knobs/index.ts';
import { fitModel, modelStep, type Model } from './bayes.ts';
import { diagnose, withFloors, type Diagnosis } from './diagnose.ts';
import { isFeasible, repair } from './feasibility.ts';
import { heuristicConfig } from './heuristic.ts';
import { checkHistory, DEFAULT_FAILED_RADIUS, failedPoints } from './history.ts';
import type { PgtuneWorkload } from './pgtune.ts';
import { createRng, type Rng } from './random.ts';
import { relevance } from './relevance.ts';
import { allowed, firstValid, type Filter } from './selection.ts';
import type { WorkloadSignals } from './signals.ts';
import { currentValue, decode, encode } from './space.ts';
import { knownBest, REGION, regionCandidates, trustRegion, type TrustRegion } from './trust-region.ts';
import type { Config, History, Point, SearchSpace, Suggestion } from './types.ts';

export interface SuggestOptions {
  /** pgtune's workload profile for the heuristic (default mixed). */
  readonly workload?: PgtuneWorkload;
  /** Nothing is suggested within this distance of a failed point (default 0.15). */
  readonly failedRadius?: number;
  /** Candidates per step inside the trust region (default 128). */
  readonly candidates?: number;
}

export interface SuggestInput {
  readonly space: SearchSpace;
  readonly history: History;
  readonly seed: number | string;
  /** The caller's step number; defaults to the history's length. Part of the random stream. */
  readonly iteration?: number;
  /** What the baseline's statistics showed (signals.ts): the diagnoses come from it. */
  readonly signals?: WorkloadSignals;
  readonly options?: SuggestOptions;
}

type Settings = Required<SuggestOptions>;

function settingsOf(options: SuggestOptions = {}): Settings {
  return {
    workload: options.workload ?? 'mixed',
    failedRadius: options.failedRadius ?? DEFAULT_FAILED_RADIUS,
    candidates: options.candidates ?? 128,
  };
}

/** How much more often the region moves a knob a diagnosis named than another. */
const DIAGNOSED_WEIGHT = 2;

/** Whether some measured or failed configuration already holds the diagnosis' values. */
function tried(space: SearchSpace, history: History, d: Diagnosis): boolean {
  const wanted = encode(space, d.changes);
  const indices = space.dimensions.flatMap((dim, i) => (Object.hasOwn(d.changes, dim.name) ? [i] : []));
  return history.some((o) => {
    const point = encode(space, o.config);
    return indices.every((i) => Math.abs((point[i] as number) - (wanted[i] as number)) < 1e-9);
  });
}

/** The first untried diagnosis, applied on top of `base`, that any step may propose. */
function diagnosisStep(
  space: SearchSpace,
  history: History,
  diagnoses: readonly Diagnosis[],
  base: Readonly<Config>,
  filter: Filter,
): Suggestion | undefined {
  for (const d of diagnoses) {
    if (tried(space, history, d)) continue;
    const config = repair(space, { ...decode(space, encode(space, base)), ...d.changes });
    const candidate = { config, point: encode(space, config) };
    if (isFeasible(space, config) && allowed(space, filter, candidate) && firstValid(space, [candidate])) {
      // A full configuration of the space holds every knob within the agent's bounds for this
      // machine: a current value outside them moves too, and the reason says so.
      const alsoMoved = describeMoves(space, encode(space, {}), config, new Set([...Object.keys(d.changes), ...Object.keys(base)]), true);
      return {
        kind: 'diagnosis',
        config,
        reason: alsoMoved ? `${d.reason} (within the bounds for this machine also ${alsoMoved})` : d.reason,
      };
    }
  }
  return undefined;
}

/** "work_mem 4MB→8MB, jit on→off": what a step changes from `from` (a point of the space), or with
 * `fromCurrent` from the server's current values themselves; knobs in `except` left out. */
function describeMoves(space: SearchSpace, from: Point, config: Readonly<Config>, except = new Set<string>(), fromCurrent = false): string {
  const base = decode(space, from);
  const moves = space.dimensions.flatMap((dim) => {
    if (except.has(dim.name)) return [];
    const [a, b] = [fromCurrent ? currentValue(space, dim) : base[dim.name], config[dim.name]];
    if (a === undefined || b === undefined || a === b) return [];
    const knob = getKnob(dim.name);
    return [knob ? `${dim.name} ${describeValue(knob, a)}→${describeValue(knob, b)}` : `${dim.name} ${a}→${b}`];
  });
  return moves.join(', ');
}

/** A step of the region chosen by the model, or at random inside it while there is no model. */
function regionStep(
  space: SearchSpace,
  model: Model | undefined,
  region: TrustRegion,
  diagnosed: ReadonlySet<string>,
  relevant: readonly number[],
  rng: Rng,
  filter: Filter,
  count: number,
): Suggestion | undefined {
  const weights = space.dimensions.map(
    (dim, i) => ((model?.importance[i] ?? 1) + (diagnosed.has(dim.name) ? DIAGNOSED_WEIGHT : 0)) * (relevant[i] ?? 1),
  );
  if (model) {
    const step = modelStep(space, model, region, weights, relevant, rng, filter, count);
    if (step) return step;
  }
  const chosen = firstValid(
    space,
    regionCandidates(space, region, weights, rng, count).filter((c) => allowed(space, filter, c)),
  );
  if (!chosen) return undefined;
  const why = model ? 'no candidate the model ranks' : 'too few measurements for a model';
  return { kind: 'explore', config: chosen.config, reason: `a step near the best so far (${why})` };
}

/** The next configuration to measure. Throws when the history is malformed or nothing is feasible. */
export function suggest(input: SuggestInput): Suggestion {
  checkHistory(input.history);
  const { history } = input;
  const s = settingsOf(input.options);
  const rng = createRng('suggest', input.seed, input.iteration ?? history.length);
  const diagnoses = input.signals ? diagnose(input.space, input.signals) : [];
  const space = withFloors(input.space, diagnoses);
  const seen = history.map((o) => encode(space, o.config));
  const filter: Filter = { failed: failedPoints(space, history), seen, radius: s.failedRadius };
  const incumbent = knownBest(space, history);

  const diagnosis = diagnosisStep(space, history, diagnoses, incumbent, filter);
  if (diagnosis) return diagnosis;

  const diagnosed = new Set(diagnoses.flatMap((d) => Object.keys(d.changes)));
  const heuristic = history.some((o) => o.kind === 'heuristic') ? undefined : heuristicConfig(space, s.workload, incumbent, diagnosed);
  if (heuristic && allowed(space, filter, { config: heuristic, point: encode(space, heuristic) })) {
    return {
      kind: 'heuristic',
      config: heuristic,
      reason: `pgtune's recommendation (${s.workload} workload) for ${describeMachine(space.machine)}, within the bounds and constraints`,
    };
  }

  const model = fitModel(space, history, rng);
  const region = trustRegion(space, history);
  const relevant = relevance(space, input.signals);
  // A region with nothing left to try (measured, or next to a failure) widens, up to its limit.
  for (let halfWidth = region.halfWidth; ; halfWidth = Math.min(REGION.max, 2 * halfWidth)) {
    const step = regionStep(space, model, { ...region, halfWidth }, diagnosed, relevant, rng, filter, s.candidates);
    if (step) return { ...step, reason: `${describeMoves(space, region.center, step.config) || 'no change'}: ${step.reason}` };
    if (halfWidth >= REGION.max) break;
  }
  throw new Error('no feasible configuration: every candidate breaks a constraint or lies in a failed region');
}

// The model-guided step inside the trust region: a GP on the measured (log) objectives,
// expected improvement weighted by the probability of not failing, maximized over the region's
// candidates and refined by a short hill climb that stays in the region. The GP's length scales
// also say which knobs matter for this workload: the region moves those most.
import { logExpectedImprovement } from './acquisition.ts';
import type { Candidate } from './candidates.ts';
import { fitSuccessModel, type SuccessModel } from './failure.ts';
import { fitGp, type Gp } from './gp.ts';
import { featuresFor, trainingData, type Features } from './model.ts';
import type { Rng } from './random.ts';
import { allowed, firstValid, type Filter } from './selection.ts';
import { encode } from './space.ts';
import { regionCandidate, regionCandidates, type TrustRegion } from './trust-region.ts';
import type { History, Point, SearchSpace, Suggestion } from './types.ts';

/**
 * How much the chance of failing weighs against improvement: EI × P(ok)^2. Squared rather than
 * the textbook power 1 because a failure on a live database is a guardrail revert, not just a
 * lost evaluation.
 */
const SAFETY_EXPONENT = 2;

// Hill climb from the best candidates, with steps shrinking from the region's half-width.
const CLIMB_STEPS = [0.5, 0.2, 0.08] as const;
const CLIMB_STARTS = 5;
const PER_CLIMB = 12;

interface Scored {
  readonly candidate: Candidate;
  readonly score: number;
  /** log EI alone, without the safety and the signals' prior. */
  readonly logEi: number;
  readonly mean: number;
  readonly sd: number;
}

export interface Model {
  readonly gp: Gp;
  readonly success: SuccessModel | undefined;
  readonly features: Features;
  /** The best posterior mean at a measured point (log objective): noisy EI improves on it. */
  readonly target: number;
  /** Per dimension, how much the objective moves with it: 1 / length scale, mean 1. */
  readonly importance: readonly number[];
}

/** The model of the history; undefined with fewer than two ok measurements. */
export function fitModel(space: SearchSpace, history: History, rng: Rng): Model | undefined {
  const data = trainingData(space, history);
  if (data.measured.y.length < 2) return undefined;
  const features = featuresFor(space);
  // The baseline is a measurement too: every objective is relative to it, so the current
  // settings score 1 (log 0) by definition. Without that point the model cannot know that a step
  // back towards them undoes a gain (bench/tuning's work-mem run: a step took work_mem from
  // 16 MB back to 4.07 MB, where the report spills again, and ran 11 times slower than the best).
  // Its noise is that of the trials' windows, which the session measures on baseline windows.
  const noise = data.measured.noiseVariances;
  const gp = fitGp(
    [encode(space, {}), ...data.measured.points].map((p) => features.of(p)),
    [0, ...data.measured.y],
    features.groups,
    rng,
    noise ? { noiseVariances: [noise.reduce((a, b) => a + b, 0) / noise.length, ...noise] } : {},
  );
  const success = fitSuccessModel(features, data.attempts, rng);
  const target = Math.min(...data.measured.points.map((point) => gp.predict(features.of(point)).mean));
  const inverse = gp.lengthscales.map((l) => 1 / l);
  const meanInverse = inverse.reduce((a, b) => a + b, 0) / inverse.length;
  return { gp, success, features, target, importance: inverse.map((v) => v / meanInverse) };
}

/**
 * What the signals say against a step, in log EI: log(relevance) for each knob it moves from the
 * region's centre (relevance.ts), so a step on a knob the baseline says cannot matter must
 * promise ten times the improvement. Drawing such knobs less often is not enough: the model is
 * most uncertain about the values nobody tried, so EI favours exactly them (bench/tuning's
 * work-mem run spent most of its steps flipping wal_compression and jit on a workload that
 * writes no WAL and compiles nothing).
 */
function priorOf(center: Point, point: Point, relevant: readonly number[]): number {
  return point.reduce((sum, x, i) => (Math.abs(x - (center[i] ?? 0)) > 1e-9 ? sum + Math.log(relevant[i] ?? 1) : sum), 0);
}

function score(m: Model, c: Candidate, prior: number): Scored {
  const x = m.features.of(c.point);
  const p = m.gp.predict(x);
  const sd = Math.sqrt(p.variance);
  const safety = m.success ? SAFETY_EXPONENT * Math.log(Math.max(m.success(x), 1e-300)) : 0;
  const logEi = logExpectedImprovement(p.mean, sd, m.target);
  return { candidate: c, score: logEi + safety + prior, logEi, mean: p.mean, sd };
}

const round3 = (x: number) => Number(x.toPrecision(3));

/** The region's candidate with the highest expected improvement; undefined when none qualifies. */
export function modelStep(
  space: SearchSpace,
  model: Model,
  region: TrustRegion,
  weights: readonly number[],
  relevant: readonly number[],
  rng: Rng,
  filter: Filter,
  count: number,
): Suggestion | undefined {
  const scoreOf = (c: Candidate) => score(model, c, priorOf(region.center, c.point, relevant));
  const scored = regionCandidates(space, region, weights, rng, count)
    .filter((c) => allowed(space, filter, c))
    .map(scoreOf);
  for (const step of CLIMB_STEPS) {
    const starts = [...scored].sort((a, b) => b.score - a.score).slice(0, CLIMB_STARTS);
    for (const start of starts) {
      for (let k = 0; k < PER_CLIMB; k++) {
        const c = regionCandidate(space, region, weights, rng, step * region.halfWidth, start.candidate.point);
        if (c && allowed(space, filter, c)) scored.push(scoreOf(c));
      }
    }
  }
  scored.sort((a, b) => b.score - a.score);
  const chosen = firstValid(
    space,
    scored.map((x) => x.candidate),
  );
  const pick = scored.find((x) => x.candidate === chosen);
  if (!chosen || !pick) return undefined;
  const objective = round3(Math.exp(pick.mean));
  // What is left to give, as shares of the best so far's objective: the most any candidate of the
  // region is expected to improve on it (EI of the log objective), and the most any may improve
  // at the model's optimistic bound (mean − 2 sd). The caller decides whether that is worth more
  // windows (the tuning session: src/service/tuning/engine.ts).
  const mostExpected = Math.max(...scored.map((x) => x.logEi));
  const possible = Math.max(...scored.map((x) => model.target - (x.mean - 2 * x.sd)));
  return {
    kind: 'explore',
    config: chosen.config,
    reason: `highest expected improvement among ${scored.length} candidates within ${region.halfWidth} of the best so far: predicted objective ${objective} (best so far ${round3(Math.exp(model.target))})`,
    predicted: {
      objective,
      low: round3(Math.exp(pick.mean - 2 * pick.sd)),
      high: round3(Math.exp(pick.mean + 2 * pick.sd)),
      expectedImprovement: round3(-Math.expm1(-Math.exp(mostExpected))),
      possibleImprovement: round3(-Math.expm1(-possible)),
    },
  };
}

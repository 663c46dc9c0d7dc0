// The model-based step: a GP on the measured (log) objectives, expected improvement weighted
// by the probability of not failing, maximized over random feasible candidates plus local
// perturbations of the best points, refined by a short hill climb.
import { logExpectedImprovement } from './acquisition.ts';
import { candidateAt, perturb, randomCandidates, type Candidate } from './candidates.ts';
import { fitSuccessModel, type SuccessModel } from './failure.ts';
import { fitGp, type Gp } from './gp.ts';
import { featuresFor, trainingData, type Features } from './model.ts';
import type { Rng } from './random.ts';
import { allowed, firstValid, samePoint, type Filter } from './selection.ts';
import type { History, Point, SearchSpace, Suggestion } from './types.ts';

/**
 * How much the chance of failing weighs against improvement: EI × P(ok)^2. Squared rather than
 * the textbook power 1 because a failure on a live database is a guardrail revert, not just a
 * lost evaluation.
 */
const SAFETY_EXPONENT = 2;

// Local search: how many of the best points to start from, and the step sizes (in normalized
// units) of the perturbations around them, then of the hill climb from the best candidates.
const LEADERS = 4;
const LOCAL_STEPS = [0.03, 0.1, 0.25] as const;
const PER_LEADER = 32;
const CLIMB_STEPS = [0.1, 0.04, 0.015] as const;
const CLIMB_STARTS = 5;
const PER_CLIMB = 12;

interface Scored {
  readonly candidate: Candidate;
  readonly score: number;
  readonly mean: number;
  readonly sd: number;
}

interface Acquisition {
  readonly gp: Gp;
  readonly success: SuccessModel | undefined;
  readonly features: Features;
  /** The best posterior mean at a measured point (log objective). */
  readonly target: number;
}

function score(a: Acquisition, c: Candidate): Scored {
  const x = a.features.of(c.point);
  const p = a.gp.predict(x);
  const sd = Math.sqrt(p.variance);
  const safety = a.success ? SAFETY_EXPONENT * Math.log(Math.max(a.success(x), 1e-300)) : 0;
  return { candidate: c, score: logExpectedImprovement(p.mean, sd, a.target) + safety, mean: p.mean, sd };
}

const round3 = (x: number) => Number(x.toPrecision(3));

/** Needs two ok measurements; undefined when there are fewer or no candidate qualifies. */
export function bayesianStep(space: SearchSpace, history: History, rng: Rng, filter: Filter, randomCount: number): Suggestion | undefined {
  const data = trainingData(space, history);
  if (data.measured.y.length < 2) return undefined;
  const features = featuresFor(space);
  const gp = fitGp(
    data.measured.points.map((p) => features.of(p)),
    data.measured.y,
    features.groups,
    rng,
    data.measured.noiseVariances ? { noiseVariances: data.measured.noiseVariances } : {},
  );
  const success = fitSuccessModel(features, data.attempts, rng);

  // Noisy EI: improvement over the best posterior mean at a measured point, not over the
  // luckiest measurement.
  const byMean = data.measured.points
    .map((point) => ({ point, mean: gp.predict(features.of(point)).mean }))
    .sort((a, b) => a.mean - b.mean);
  const acquisition: Acquisition = { gp, success, features, target: (byMean[0] as { mean: number }).mean };

  const pool: Candidate[] = randomCandidates(space, rng, randomCount);
  const leaders: Point[] = [];
  for (const { point } of byMean) if (leaders.length < LEADERS && !leaders.some((l) => samePoint(l, point))) leaders.push(point);
  for (const point of leaders) {
    for (let k = 0; k < PER_LEADER; k++) {
      const c = candidateAt(space, perturb(space, point, rng, LOCAL_STEPS[k % LOCAL_STEPS.length] as number), true);
      if (c) pool.push(c);
    }
  }
  const scored = pool.filter((c) => allowed(space, filter, c)).map((c) => score(acquisition, c));
  for (const step of CLIMB_STEPS) {
    const starts = [...scored].sort((a, b) => b.score - a.score).slice(0, CLIMB_STARTS);
    for (const start of starts) {
      for (let k = 0; k < PER_CLIMB; k++) {
        const c = candidateAt(space, perturb(space, start.candidate.point, rng, step), true);
        if (c && allowed(space, filter, c)) scored.push(score(acquisition, c));
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
  return {
    kind: 'explore',
    config: chosen.config,
    reason: `highest expected improvement among ${scored.length} candidates: predicted objective ${objective} (best so far ${round3(Math.exp(acquisition.target))})`,
    predicted: { objective, low: round3(Math.exp(pick.mean - 2 * pick.sd)), high: round3(Math.exp(pick.mean + 2 * pick.sd)) },
  };
}

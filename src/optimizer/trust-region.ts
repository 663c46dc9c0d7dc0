// Where a live step may go: a region around the incumbent (the best configuration measured so
// far, or the current settings while nothing beat them), as in TuRBO (Eriksson et al., "Scalable Global Optimization via Local Bayesian
// Optimization", 2019), and never more than a few knobs at a time. The region grows after
// steps that improve on the incumbent and shrinks after steps that do not, so that the search
// reaches out when the surface rewards it and stays close when it does not. Its state is
// replayed from the history on every call: the optimizer keeps nothing between calls.
import { candidateAt, type Candidate } from './candidates.ts';
import { best } from './history.ts';
import type { Rng } from './random.ts';
import { encode, movedKnobs } from './space.ts';
import type { Config, History, Point, SearchSpace } from './types.ts';

/** Half-width of the region in normalized units (a numeric knob spans 0..1): at the start, its
 * limits, and how it changes. */
export const REGION = {
  initial: 0.2,
  min: 0.05,
  max: 0.6,
  /** Consecutive improving steps that double it, and steps without improvement that halve it. */
  successesToGrow: 2,
  failuresToShrink: 3,
  /** An improvement smaller than this share of the incumbent's objective is noise, not success. */
  minImprovement: 0.01,
} as const;

/** Knobs one live step may move away from the incumbent. */
export const MAX_MOVES = 3;

/** The least a step moves a knob (normalized units: a hundredth of its range, about 10 % of the
 * value for a size on a log scale such as work_mem). A smaller move teaches the model nothing a
 * window's noise would not hide, and in restart mode costs a restart: in bench/tuning's
 * read-heavy run most steps moved shared_buffers 771,364→771,365 pages (the incumbent's value
 * nudged to its bound), random_page_cost 4→4.01 or hash_mem_multiplier 2→1.99. A fiftieth
 * took too much fine adjustment away: the noisy synthetic problem's regret (test/optimizer.test.ts)
 * rose from 0.204 to 0.226, above random search's. */
export const MIN_MOVE = 0.01;

export interface TrustRegion {
  /** The incumbent's point, or the current configuration's before anything was measured. */
  readonly center: Point;
  readonly halfWidth: number;
}

/**
 * The best configuration known to be good: the lowest mean objective when it beats the baseline
 * (objectives are relative to it: 1.0 is the baseline), else the current settings, which run.
 */
export function knownBest(space: SearchSpace, history: History): Config {
  const incumbent = best({ space, history });
  return incumbent && incumbent.objective < 1 ? incumbent.config : {};
}

/** The region after the history, replayed step by step from the baseline (objective 1.0). */
export function trustRegion(space: SearchSpace, history: History): TrustRegion {
  let halfWidth: number = REGION.initial;
  let successes = 0;
  let failures = 0;
  let incumbent = 1;
  for (const o of history) {
    if (o.status === 'ok' && o.objective !== null && o.objective < incumbent * (1 - REGION.minImprovement)) {
      incumbent = o.objective;
      successes++;
      failures = 0;
    } else {
      failures++;
      successes = 0;
    }
    if (successes >= REGION.successesToGrow) [halfWidth, successes] = [Math.min(REGION.max, 2 * halfWidth), 0];
    if (failures >= REGION.failuresToShrink) [halfWidth, failures] = [Math.max(REGION.min, halfWidth / 2), 0];
  }
  return { center: encode(space, knownBest(space, history)), halfWidth };
}

/** `count` distinct indices drawn without replacement, each with probability ∝ its weight. */
function drawWeighted(weights: readonly number[], count: number, rng: Rng): number[] {
  const left = weights.map((w, i) => ({ w: Math.max(w, 0), i }));
  const out: number[] = [];
  while (out.length < count && left.some((x) => x.w > 0)) {
    const total = left.reduce((s, x) => s + x.w, 0);
    let r = rng.next() * total;
    const k = left.findIndex((x) => (r -= x.w) < 0);
    const [picked] = left.splice(k < 0 ? left.length - 1 : k, 1);
    out.push((picked as { i: number }).i);
  }
  return out;
}

/**
 * One candidate inside the region: one to MAX_MOVES knobs, drawn by `weights` (the knobs that
 * matter for this workload weigh most), moved within the half-width (a categorical one takes
 * another value); repaired into the constraints, and dropped when the repair moved more knobs
 * than a live step may, or any knob by less than MIN_MOVE.
 */
export function regionCandidate(
  space: SearchSpace,
  region: TrustRegion,
  weights: readonly number[],
  rng: Rng,
  halfWidth = region.halfWidth,
  from: Point = region.center,
): Candidate | undefined {
  const raw = [...from];
  for (const i of drawWeighted(weights, 1 + rng.int(MAX_MOVES), rng)) {
    const dim = space.dimensions[i];
    if (!dim) continue;
    if (dim.kind === 'categorical') {
      if (dim.values.length > 1) raw[i] = (Math.round(raw[i] as number) + 1 + rng.int(dim.values.length - 1)) % dim.values.length;
      continue;
    }
    const centre = region.center[i] as number;
    const lo = Math.max(0, centre - region.halfWidth);
    const hi = Math.min(1, centre + region.halfWidth);
    raw[i] = Math.min(hi, Math.max(lo, (raw[i] as number) + (2 * rng.next() - 1) * halfWidth));
  }
  const c = candidateAt(space, raw, true);
  return c && movedKnobs(c.point, region.center) <= MAX_MOVES && !movesTooLittle(c.point, region.center) ? c : undefined;
}

/** Whether some knob differs between the points by less than MIN_MOVE: drawn so, or nudged by
 * the repair (an effective_cache_size drawn just under shared_buffers lowers shared_buffers to it). */
function movesTooLittle(point: Point, center: Point): boolean {
  return point.some((x, i) => {
    const moved = Math.abs(x - (center[i] ?? 0));
    return moved > 1e-9 && moved < MIN_MOVE;
  });
}

/** Up to `count` candidates of the region (at most 4 × count draws). */
export function regionCandidates(
  space: SearchSpace,
  region: TrustRegion,
  weights: readonly number[],
  rng: Rng,
  count: number,
): Candidate[] {
  const out: Candidate[] = [];
  for (let draw = 0; draw < 4 * count && out.length < count; draw++) {
    const c = regionCandidate(space, region, weights, rng);
    if (c) out.push(c);
  }
  return out;
}

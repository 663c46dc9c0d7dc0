// Candidate configurations: uniform random points and local perturbations of good ones, each
// decoded to what the agent would store and kept only when it passes the constraints.
import { isFeasible, repair } from './feasibility.ts';
import type { Rng } from './random.ts';
import { decode, encode } from './space.ts';
import type { Config, Point, SearchSpace } from './types.ts';

export interface Candidate {
  /** The point of the rounded configuration (not of the raw draw). */
  readonly point: Point;
  readonly config: Config;
}

export function randomPoint(space: SearchSpace, rng: Rng): number[] {
  return space.dimensions.map((dim) => (dim.kind === 'numeric' ? rng.next() : rng.int(dim.values.length)));
}

/**
 * A neighbour of `point`: a few dimensions (three on average, at least one) move by a normal
 * step of `scale`, reflected at the edges; a categorical one takes another value. Moving a few
 * knobs at a time is what finds improvements in many dimensions.
 */
export function perturb(space: SearchSpace, point: Point, rng: Rng, scale: number): number[] {
  const d = space.dimensions.length;
  const out = [...point];
  const forced = rng.int(d);
  space.dimensions.forEach((dim, i) => {
    if (i !== forced && rng.next() >= 3 / d) return;
    if (dim.kind === 'categorical') {
      if (dim.values.length > 1) out[i] = (Math.round(out[i] as number) + 1 + rng.int(dim.values.length - 1)) % dim.values.length;
      return;
    }
    const u = Math.abs((out[i] as number) + scale * rng.normal()) % 2;
    out[i] = u > 1 ? 2 - u : u;
  });
  return out;
}

/**
 * The candidate at a raw point: decoded, and feasible as it is or (when `repairing`) once
 * repaired; otherwise none.
 */
export function candidateAt(space: SearchSpace, raw: Point, repairing: boolean): Candidate | undefined {
  let config = decode(space, raw);
  if (!isFeasible(space, config)) {
    if (!repairing) return undefined;
    config = repair(space, config);
    if (!isFeasible(space, config)) return undefined;
  }
  return { point: encode(space, config), config };
}

/**
 * Up to `count` random candidates, uniform over the feasible configurations: draws outside the
 * constraints are rejected (a third or more of them pass, depending on the machine). When
 * `draws` draws give nothing, repaired draws, which sit on the constraints' edges, stand in.
 */
export function randomCandidates(space: SearchSpace, rng: Rng, count: number, draws = 4 * count): Candidate[] {
  const out: Candidate[] = [];
  const rejected: Point[] = [];
  for (let draw = 0; draw < draws && out.length < count; draw++) {
    const raw = randomPoint(space, rng);
    const c = candidateAt(space, raw, false);
    if (c) out.push(c);
    else if (rejected.length < count) rejected.push(raw);
  }
  if (out.length > 0) return out;
  return rejected.flatMap((raw) => candidateAt(space, raw, true) ?? []);
}

// Candidate configurations: uniform random points (random search) and raw points of the trust
// region (trust-region.ts), each decoded to what the agent would store and kept only when it
// passes the constraints.
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

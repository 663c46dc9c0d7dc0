// How likely a configuration is to run without failing (refused, reverted by a guardrail,
// crashed), learned from every attempt. A GP regression on +1 (ok) / −1 (failed) labels, read
// as a probit: P(ok) = Φ(mean / sd). Cheap, and it draws a boundary where the failures are
// instead of condemning everything in their direction.
//
// Why not count a failure as a bad objective value in the objective's model: one failed
// configuration with, say, large shared_buffers then makes the smooth objective model
// condemn the whole large-shared_buffers half of the space, good configurations next to the
// failure included. On the synthetic problems that cost more regret than it saved failures.
import { fitGp } from './gp.ts';
import { normalCdf } from './acquisition.ts';
import type { Features } from './model.ts';
import type { Rng } from './random.ts';
import type { Point } from './types.ts';

/** Probability of success at a feature vector. */
export type SuccessModel = (x: Float64Array) => number;

/** The model, or undefined when nothing has failed (then every configuration counts as safe). */
export function fitSuccessModel(
  features: Features,
  attempts: { readonly points: readonly Point[]; readonly ok: readonly boolean[] },
  rng: Rng,
): SuccessModel | undefined {
  if (attempts.ok.every(Boolean)) return undefined;
  const labels = attempts.ok.map((ok) => (ok ? 1 : -1));
  const gp = fitGp(
    attempts.points.map((p) => features.of(p)),
    labels,
    features.groups,
    rng,
  );
  return (x) => {
    const p = gp.predict(x);
    return normalCdf(p.mean / Math.sqrt(p.variance + 1e-12));
  };
}

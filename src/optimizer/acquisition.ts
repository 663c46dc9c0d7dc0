// Expected improvement for minimization, on the log scale so that candidates far from the best
// still rank correctly when their improvement underflows (Ament et al., "Unexpected
// Improvements to Expected Improvement", 2023).

const LOG_SQRT_2PI = 0.5 * Math.log(2 * Math.PI);

/** erfc(x) with fractional error below 1.2e-7 everywhere (Numerical Recipes' erfcc). */
function erfc(x: number): number {
  const z = Math.abs(x);
  const t = 1 / (1 + 0.5 * z);
  const r =
    t *
    Math.exp(
      -z * z -
        1.26551223 +
        t *
          (1.00002368 +
            t *
              (0.37409196 +
                t *
                  (0.09678418 +
                    t * (-0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (-0.82215223 + t * 0.17087277)))))))),
    );
  return x >= 0 ? r : 2 - r;
}

export const normalCdf = (z: number): number => 0.5 * erfc(-z / Math.SQRT2);
const logNormalPdf = (z: number): number => -0.5 * z * z - LOG_SQRT_2PI;

/** log(φ(z) + z Φ(z)): the expected improvement of a standard normal over −z, in logs. */
function logH(z: number): number {
  if (z > -6) return Math.log(Math.exp(logNormalPdf(z)) + z * normalCdf(z));
  // Far in the tail φ(z) + zΦ(z) = φ(z)/z² (1 − 3/z² + …): the direct form cancels to zero.
  return logNormalPdf(z) - 2 * Math.log(-z) + Math.log1p(-3 / (z * z));
}

/**
 * log EI of a prediction (mean, standard deviation of the latent function) against `best`,
 * the best value believed so far; lower objective values are better.
 */
export function logExpectedImprovement(mean: number, sd: number, best: number): number {
  if (!(sd > 0)) return mean < best ? Math.log(best - mean) : -Infinity;
  return logH((best - mean) / sd) + Math.log(sd);
}

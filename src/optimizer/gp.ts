// A Gaussian process regression model: Matérn 5/2 kernel with one length scale per group of
// input features (a knob: one feature, or the one-hot features of an enum), a signal variance
// and a noise variance (measurements are noisy), all fitted by maximizing the marginal
// likelihood plus log priors (MAP) with Adam from a few starts.
//
// Priors, on outcomes standardized to mean 0 and variance 1:
// - log length scale ~ N(√2 + ½ log d, 3): the dimension-scaled prior of Hvarfner, Hellsten and
//   Nardi (2024), which keeps a model in d dimensions from assuming every knob matters;
// - log signal variance ~ N(0, 1);
// - log noise variance ~ N(−4, 1): measurements repeat within a few percent, rarely exactly.
import { cholesky, inverseFromCholesky, solveLower, solveUpper } from './linalg.ts';
import type { Rng } from './random.ts';

export interface GpPrediction {
  /** Posterior mean of the latent function, in the units of y. */
  readonly mean: number;
  /** Posterior variance of the latent function (without the measurement noise). */
  readonly variance: number;
}

export interface Gp {
  predict(x: ArrayLike<number>): GpPrediction;
  readonly lengthscales: readonly number[];
  /** Measurement noise variance, in the units of y squared. */
  readonly noiseVariance: number;
}

export interface GpOptions {
  /** Adam steps per start. */
  readonly steps?: number;
  /** Random starts besides the prior's centre. */
  readonly restarts?: number;
  /** Each outcome's noise variance, in the units of y squared, when it was measured: then the
   * model takes these instead of fitting one noise variance for all. */
  readonly noiseVariances?: readonly number[];
}

const SQRT5 = Math.sqrt(5);
const MIN_LOG_NOISE = Math.log(1e-6);
const LOG_BOUNDS = {
  lengthscale: [Math.log(1e-2), Math.log(1e3)],
  signal: [Math.log(1e-2), Math.log(1e2)],
  noise: [MIN_LOG_NOISE, Math.log(2)],
} as const;
const JITTER = 1e-8;

/** Matérn 5/2 correlation at scaled distance r, and the factor its length-scale gradients share. */
function matern(r: number): { k: number; dk: number } {
  const e = Math.exp(-SQRT5 * r);
  return { k: (1 + SQRT5 * r + (5 / 3) * r * r) * e, dk: (5 / 3) * (1 + SQRT5 * r) * e };
}

interface Fitted {
  readonly value: number;
  readonly grad: Float64Array;
}

/** Training data prepared once: squared distances per group for every pair. */
class Problem {
  readonly n: number;
  readonly groups: number;
  readonly sqdist: Float64Array[];
  readonly y: Float64Array;
  readonly priorMean: number;
  readonly priorVar = 3;
  /** Measured noise variances (standardized units), or null: one fitted noise variance. */
  readonly fixedNoise: Float64Array | null;

  constructor(x: readonly ArrayLike<number>[], y: Float64Array, groups: ReadonlyArray<readonly number[]>, fixedNoise: Float64Array | null) {
    this.n = x.length;
    this.fixedNoise = fixedNoise;
    this.groups = groups.length;
    this.y = y;
    this.priorMean = Math.SQRT2 + 0.5 * Math.log(Math.max(1, groups.length));
    this.sqdist = groups.map((features) => {
      const d = new Float64Array(this.n * this.n);
      for (let i = 0; i < this.n; i++) {
        for (let j = 0; j < i; j++) {
          let s = 0;
          for (const f of features) s += (((x[i] as ArrayLike<number>)[f] as number) - ((x[j] as ArrayLike<number>)[f] as number)) ** 2;
          d[i * this.n + j] = s;
          d[j * this.n + i] = s;
        }
      }
      return d;
    });
  }

  /** Kernel matrix (with noise) for parameters θ = [log ℓ…, log σf², log σn²]. */
  kernel(theta: Float64Array): { K: Float64Array; r: Float64Array } {
    const { n, groups } = this;
    const signal = Math.exp(theta[groups] as number);
    const noise = Math.exp(theta[groups + 1] as number);
    const inv = Array.from({ length: groups }, (_, g) => Math.exp(-2 * (theta[g] as number)));
    const K = new Float64Array(n * n);
    const r = new Float64Array(n * n);
    for (let i = 0; i < n; i++) {
      K[i * n + i] = signal + (this.fixedNoise ? (this.fixedNoise[i] as number) : noise) + JITTER;
      for (let j = 0; j < i; j++) {
        let r2 = 0;
        for (let g = 0; g < groups; g++) r2 += (this.sqdist[g] as Float64Array)[i * n + j]! * inv[g]!;
        const rij = Math.sqrt(r2);
        const k = signal * matern(rij).k;
        K[i * n + j] = k;
        K[j * n + i] = k;
        r[i * n + j] = rij;
        r[j * n + i] = rij;
      }
    }
    return { K, r };
  }

  /** Negative log posterior and its gradient with respect to θ. */
  objective(theta: Float64Array): Fitted | undefined {
    const { n, groups, y } = this;
    const { K, r } = this.kernel(theta);
    const L = cholesky(K, n);
    if (!L) return undefined;
    const alpha = solveUpper(L, n, solveLower(L, n, y));
    let value = 0.5 * n * Math.log(2 * Math.PI);
    for (let i = 0; i < n; i++) value += 0.5 * (y[i] as number) * (alpha[i] as number) + Math.log(L[i * n + i] as number);

    // d(nll)/dθ = ½ tr(W dK/dθ) with W = K⁻¹ − ααᵀ.
    const W = inverseFromCholesky(L, n);
    for (let i = 0; i < n; i++) for (let j = 0; j < n; j++) W[i * n + j]! -= (alpha[i] as number) * (alpha[j] as number);

    const grad = new Float64Array(groups + 2);
    const signal = Math.exp(theta[groups] as number);
    const noise = Math.exp(theta[groups + 1] as number);
    const inv = Array.from({ length: groups }, (_, g) => Math.exp(-2 * (theta[g] as number)));
    let gSignal = 0;
    let gNoise = 0;
    for (let i = 0; i < n; i++) {
      gSignal += 0.5 * W[i * n + i]! * signal;
      gNoise += 0.5 * W[i * n + i]! * noise;
      for (let j = 0; j < i; j++) {
        const w = W[i * n + j]!; // symmetric: the pair counts twice, the ½ cancels
        const { k, dk } = matern(r[i * n + j]!);
        gSignal += w * signal * k;
        const common = w * signal * dk;
        for (let g = 0; g < groups; g++) grad[g]! += common * (this.sqdist[g] as Float64Array)[i * n + j]! * inv[g]!;
      }
    }
    grad[groups] = gSignal;
    grad[groups + 1] = this.fixedNoise ? 0 : gNoise;

    // Log priors (negated).
    for (let g = 0; g < groups; g++) {
      const z = (theta[g] as number) - this.priorMean;
      value += (z * z) / (2 * this.priorVar);
      grad[g]! += z / this.priorVar;
    }
    const ts = theta[groups] as number;
    value += (ts * ts) / 2;
    grad[groups] += ts;
    if (!this.fixedNoise) {
      const tn = (theta[groups + 1] as number) + 4;
      value += (tn * tn) / 2;
      grad[groups + 1]! += tn;
    }
    return { value, grad };
  }
}

function clampTheta(theta: Float64Array, groups: number): void {
  const clip = (i: number, [lo, hi]: readonly [number, number]) => {
    theta[i] = Math.min(Math.max(theta[i] as number, lo), hi);
  };
  for (let g = 0; g < groups; g++) clip(g, LOG_BOUNDS.lengthscale);
  clip(groups, LOG_BOUNDS.signal);
  clip(groups + 1, LOG_BOUNDS.noise);
}

/** Adam on the negative log posterior, projected onto the parameter bounds; the best θ seen. */
function minimize(problem: Problem, start: Float64Array, steps: number): { theta: Float64Array; value: number } {
  const size = start.length;
  const theta = Float64Array.from(start);
  const m = new Float64Array(size);
  const v = new Float64Array(size);
  const [b1, b2, rate] = [0.9, 0.999, 0.1];
  let bestTheta = Float64Array.from(theta);
  let bestValue = Infinity;
  for (let t = 1; t <= steps; t++) {
    const f = problem.objective(theta);
    if (!f) {
      // Not positive definite: more noise always fixes it.
      theta[size - 1] = (theta[size - 1] as number) + 1;
      continue;
    }
    if (f.value < bestValue) {
      bestValue = f.value;
      bestTheta = Float64Array.from(theta);
    }
    for (let i = 0; i < size; i++) {
      const g = f.grad[i] as number;
      m[i] = b1 * (m[i] as number) + (1 - b1) * g;
      v[i] = b2 * (v[i] as number) + (1 - b2) * g * g;
      const mHat = (m[i] as number) / (1 - b1 ** t);
      const vHat = (v[i] as number) / (1 - b2 ** t);
      theta[i] = (theta[i] as number) - (rate * mHat) / (Math.sqrt(vHat) + 1e-8);
    }
    clampTheta(theta, problem.groups);
  }
  return { theta: bestTheta, value: bestValue };
}

/**
 * Fits a GP to points `x` (features) and outcomes `y`. `groups` lists, per length scale, the
 * feature indices it applies to.
 */
export function fitGp(
  x: readonly ArrayLike<number>[],
  y: readonly number[],
  groups: ReadonlyArray<readonly number[]>,
  rng: Rng,
  options: GpOptions = {},
): Gp {
  const n = y.length;
  const mean = y.reduce((a, b) => a + b, 0) / n;
  const sd = Math.sqrt(y.reduce((a, b) => a + (b - mean) ** 2, 0) / n) || 1;
  const standardized = Float64Array.from(y, (v) => (v - mean) / sd);
  const fixedNoise =
    options.noiseVariances && options.noiseVariances.length === n
      ? Float64Array.from(options.noiseVariances, (v) => Math.max(v, 1e-6) / (sd * sd))
      : null;
  const problem = new Problem(x, standardized, groups, fixedNoise);
  const G = groups.length;

  // Starts: length scales a little shorter than the prior's centre (the data can lengthen
  // them), and random draws around it.
  const starts: Float64Array[] = [];
  const centre = new Float64Array(G + 2).fill(problem.priorMean - 1.5);
  centre[G] = 0;
  centre[G + 1] = -4;
  starts.push(centre);
  for (let s = 0; s < (options.restarts ?? 1); s++) {
    const start = Float64Array.from(centre, (v, i) => (i < G ? v + rng.normal() : v + 0.5 * rng.normal()));
    clampTheta(start, G);
    starts.push(start);
  }
  let best: { theta: Float64Array; value: number } | undefined;
  for (const start of starts) {
    const result = minimize(problem, start, options.steps ?? 60);
    if (!best || result.value < best.value) best = result;
  }
  const theta = (best as { theta: Float64Array }).theta;

  const { K } = problem.kernel(theta);
  let L = cholesky(K, n);
  for (let extra = 1e-6; !L; extra *= 10) {
    for (let i = 0; i < n; i++) K[i * n + i]! += extra;
    L = cholesky(K, n);
  }
  const factor = L;
  const alpha = solveUpper(factor, n, solveLower(factor, n, standardized));
  const lengthscales = Array.from({ length: G }, (_, g) => Math.exp(theta[g] as number));
  const signal = Math.exp(theta[G] as number);
  const noise = Math.exp(theta[G + 1] as number);

  // Inputs divided by their length scales once, so a prediction is one distance per point.
  const scaleOf = new Map<number, number>();
  groups.forEach((features, g) => features.forEach((f) => scaleOf.set(f, 1 / (lengthscales[g] as number))));
  const featureCount = Math.max(0, ...scaleOf.keys()) + 1;
  const scale = Float64Array.from({ length: featureCount }, (_, f) => scaleOf.get(f) ?? 0);
  const scaled = x.map((p) => Float64Array.from({ length: featureCount }, (_, f) => ((p[f] as number) ?? 0) * (scale[f] as number)));

  return {
    lengthscales,
    noiseVariance: fixedNoise ? (fixedNoise.reduce((a, b) => a + b, 0) / n) * sd * sd : noise * sd * sd,
    predict(point) {
      const k = new Float64Array(n);
      for (let i = 0; i < n; i++) {
        const row = scaled[i] as Float64Array;
        let r2 = 0;
        for (let f = 0; f < featureCount; f++) r2 += ((point[f] as number) * (scale[f] as number) - (row[f] as number)) ** 2;
        k[i] = signal * matern(Math.sqrt(r2)).k;
      }
      let mu = 0;
      for (let i = 0; i < n; i++) mu += (k[i] as number) * (alpha[i] as number);
      const v = solveLower(factor, n, k);
      let explained = 0;
      for (let i = 0; i < n; i++) explained += (v[i] as number) ** 2;
      const variance = Math.max(signal - explained, 1e-12 * signal);
      return { mean: mean + sd * mu, variance: variance * sd * sd };
    },
  };
}

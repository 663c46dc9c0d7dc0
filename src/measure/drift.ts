// The baseline measured again and again (design.md, "The measure"): a live database drifts, so
// each trial is judged against the baseline windows nearest in time, the drift is estimated from
// them, and so is the noise of one window, which the optimizer is given as its noise level.
// Runtimes are compared as ratios, so everything here works on their logarithms. Pure functions.
import jStat from 'jstat';

/** One baseline window: when (its middle, epoch ms) and its baseline-mix-weighted runtime. */
export interface BaselinePoint {
  at: number;
  runtimeMs: number;
  /** The window's length, when windows of several lengths are pooled (pooledWindowNoise). */
  seconds?: number;
}

/** The baseline's log runtime at `at`: linear in time between the baseline windows around it,
 * the nearest one's outside them. `weights` are the windows' shares in it (for its variance). */
export function baselineAt(baselines: readonly BaselinePoint[], at: number): { logRuntime: number; weights: number[] } | null {
  const sorted = [...baselines].sort((a, b) => a.at - b.at);
  if (sorted.length === 0) return null;
  const first = sorted[0]!;
  const last = sorted.at(-1)!;
  if (at <= first.at) return { logRuntime: Math.log(first.runtimeMs), weights: [1] };
  if (at >= last.at) return { logRuntime: Math.log(last.runtimeMs), weights: [1] };
  const i = sorted.findIndex((b) => b.at > at);
  const before = sorted[i - 1]!;
  const after = sorted[i]!;
  const w = (at - before.at) / (after.at - before.at);
  return { logRuntime: (1 - w) * Math.log(before.runtimeMs) + w * Math.log(after.runtimeMs), weights: [1 - w, w] };
}

/** Baseline windows before the noise of one window is estimated from them. */
export const MIN_BASELINES_FOR_NOISE = 3;

/**
 * The standard deviation of one window's log runtime, from successive baseline windows (the
 * mean square successive difference over 2: slow drift between neighbours barely counts, and
 * what does count is drift a trial's own window suffers too). Null with too few baselines.
 */
export function windowNoise(baselines: readonly BaselinePoint[]): number | null {
  return pooledWindowNoise([baselines]);
}

/**
 * windowNoise over several runs of baseline windows, each at its own level (a session's
 * known-good configuration before and after a kept step): the successive differences within each
 * run, pooled; a jump between runs is no noise. With `atSeconds`, the noise of a window that long,
 * from windows of other lengths (their `seconds`) by the law that the variance of a window's log
 * runtime falls as 1/length: a difference of windows a and b has variance c (1/a + 1/b), and the
 * answer is √(c / atSeconds). Null with fewer than MIN_BASELINES_FOR_NOISE − 1 differences in all.
 */
export function pooledWindowNoise(runs: ReadonlyArray<readonly BaselinePoint[]>, atSeconds: number | null = null): number | null {
  return pooledWindowNoiseOf(runs, atSeconds)?.sd ?? null;
}

/** pooledWindowNoise, with the number of successive differences it rests on. */
export function pooledWindowNoiseOf(
  runs: ReadonlyArray<readonly BaselinePoint[]>,
  atSeconds: number | null = null,
): { sd: number; differences: number } | null {
  let sum = 0;
  let differences = 0;
  for (const run of runs) {
    const sorted = [...run].sort((a, b) => a.at - b.at);
    for (let i = 1; i < sorted.length; i++) {
      const [a, b] = [sorted[i - 1]!, sorted[i]!];
      const squared = (Math.log(b.runtimeMs) - Math.log(a.runtimeMs)) ** 2;
      // Without lengths (or a length to scale to), windows are taken as equally long: c/L = d²/2.
      const scale = atSeconds && a.seconds && b.seconds ? atSeconds * (1 / a.seconds + 1 / b.seconds) : 2;
      sum += squared / scale;
      differences++;
    }
  }
  return differences < MIN_BASELINES_FOR_NOISE - 1 ? null : { sd: Math.sqrt(sum / differences), differences };
}

/**
 * The noise σ could still be, at one-sided confidence `level`, when `sd` was measured from
 * `differences` successive differences: sd · √(k / χ²(1 − level; k)), the chi-square bound of a
 * variance estimated with k degrees of freedom (successive differences of a slowly drifting series
 * are nearly independent). Two differences allow a σ 2.1 times the measured one at 80 %; twenty,
 * 1.17 times.
 */
export function noiseUpperBound(sd: number, differences: number, level: number): number {
  return differences < 1 ? Infinity : sd * Math.sqrt(differences / jStat.chisquare.inv(1 - level, differences));
}

export interface Drift {
  /** The baseline's runtime change per hour, by a least-squares line through its logs (0.05 = +5 % an hour). */
  perHour: number;
  /** The last baseline window's runtime over the first's, minus 1. */
  total: number;
  windows: number;
}

export function drift(baselines: readonly BaselinePoint[]): Drift | null {
  if (baselines.length < 2) return null;
  const sorted = [...baselines].sort((a, b) => a.at - b.at);
  const hours = sorted.map((b) => (b.at - sorted[0]!.at) / 3_600_000);
  const logs = sorted.map((b) => Math.log(b.runtimeMs));
  const mh = hours.reduce((a, b) => a + b, 0) / hours.length;
  const ml = logs.reduce((a, b) => a + b, 0) / logs.length;
  let sxy = 0;
  let sxx = 0;
  hours.forEach((h, i) => {
    sxy += (h - mh) * (logs[i]! - ml);
    sxx += (h - mh) ** 2;
  });
  const slope = sxx > 0 ? sxy / sxx : 0;
  return { perHour: Math.expm1(slope), total: sorted.at(-1)!.runtimeMs / sorted[0]!.runtimeMs - 1, windows: sorted.length };
}

export interface Judged {
  /** The window's runtime over the baseline's at the same time: 1.0 = as fast, lower is faster. */
  objective: number;
  /** Standard deviation of log(objective): the window's noise and the baseline estimate's; null while the noise is unknown. */
  sd: number | null;
}

/** A trial window judged against the baseline windows nearest in time. */
export function judge(trial: BaselinePoint, baselines: readonly BaselinePoint[], noise: number | null): Judged | null {
  const base = baselineAt(baselines, trial.at);
  if (!base || !(trial.runtimeMs > 0)) return null;
  const sd = noise === null ? null : noise * Math.sqrt(1 + base.weights.reduce((s, w) => s + w * w, 0));
  return { objective: Math.exp(Math.log(trial.runtimeMs) - base.logRuntime), sd };
}

/** A baseline window more than this many standard deviations above the drift model is slower than drift and noise explain… */
export const SLOWER_THAN_DRIFT_Z = 2;
/** …or, while the noise is not measured, more than this much slower. */
export const SLOWER_THAN_DRIFT_RATIO = 1.1;

/**
 * A baseline window judged against the drift model of the baseline windows before it: its
 * runtime over theirs at its time, and whether the environment slowed it (the load, a noisy
 * neighbour) beyond what drift and the noise of one window explain. Null without earlier ones.
 */
export function slowerThanDrift(
  window: BaselinePoint,
  before: readonly BaselinePoint[],
  noise: number | null,
): (Judged & { slower: boolean }) | null {
  const j = judge(window, before, noise);
  if (!j) return null;
  const slower = j.sd === null ? j.objective > SLOWER_THAN_DRIFT_RATIO : Math.log(j.objective) > SLOWER_THAN_DRIFT_Z * j.sd;
  return { ...j, slower };
}

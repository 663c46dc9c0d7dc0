// The watch on a kept configuration (issue 31 part 1): the reports after the keep, cut into
// windows as long as the session's, each weighed on the verified session's query mix and judged
// against the level the verification measured for the kept configuration (its candidate
// windows), with the drift model and the noise of one window the session measured. Pure.
import { contamination, type WindowReport } from '../../measure/contamination.ts';
import { judge, type BaselinePoint } from '../../measure/drift.ts';
import { windowStats, type QueryMix } from '../../measure/objective.ts';
import type { Interval } from '../../measure/verify.ts';
import jStat from 'jstat';

export const WATCH = {
  /** Windows judged together: one window of noise never says the gain is gone. */
  runWindows: 4,
} as const;

/** measuring: too few windows judged yet; holding: the gain may still be there; gone: the
 * interval of the runtime ratio no longer clears 1 − the minimum effect, and the kept level has
 * risen beyond the run's noise (the interval lies wholly above the verified ratio). */
export type WatchState = 'measuring' | 'holding' | 'gone';
export const WATCH_STATES: readonly WatchState[] = ['measuring', 'holding', 'gone'];

/** What the kept configuration was verified at, read off its session. */
export interface WatchReference {
  mix: QueryMix;
  /** The verification's runtime ratio (kept over baseline). */
  verified: Interval;
  /** The candidate windows of the verification: the kept configuration's level over time. */
  level: readonly BaselinePoint[];
  /** Standard deviation of one window's log runtime (the session's baseline windows); null when unknown. */
  noise: number | null;
  windowSeconds: number;
  minEffectPercent: number;
  confidencePercent: number;
}

/** A report as the watch reads it: WindowReport with its interval on the service's clock. */
export interface WatchReport extends WindowReport {
  /** Epoch ms, the service's clock (tuning/window.ts serviceInterval). */
  start: number;
  end: number;
}

export interface WatchVerdict {
  state: WatchState;
  /** Windows that could be judged (untrusted ones are left out). */
  windows: number;
  /** The runtime ratio over the baseline now (the verified one times the kept level's change), over the last run. */
  runtime: Interval | null;
}

/** Consecutive reports cut into windows of `seconds` (a last, shorter one is left for later). */
export function watchWindows(reports: readonly WatchReport[], seconds: number): WatchReport[][] {
  const windows: WatchReport[][] = [];
  let current: WatchReport[] = [];
  for (const r of [...reports].sort((a, b) => a.start - b.start)) {
    current.push(r);
    if (r.end - current[0]!.start >= seconds * 1000) {
      windows.push(current);
      current = [];
    }
  }
  return windows;
}

/** A window's weighted runtime at its middle, or null when it cannot be trusted (contamination.ts
 * without a reference mix: a workload change is the workload check's to report). */
function pointOfWindow(window: readonly WatchReport[], mix: QueryMix): BaselinePoint | null {
  const stats = windowStats(
    window.map((r) => r.metrics),
    mix,
  );
  if (contamination({ reports: window, stats, reference: null }).length > 0) return null;
  const runtime = stats.weightedRuntimeMs;
  return runtime !== null && runtime > 0 ? { at: (window[0]!.start + window.at(-1)!.end) / 2, runtimeMs: runtime } : null;
}

export function watchVerdict(reference: WatchReference, reports: readonly WatchReport[]): WatchVerdict {
  const judged = watchWindows(reports, reference.windowSeconds).flatMap((w) => {
    const point = pointOfWindow(w, reference.mix);
    const j = point && judge(point, reference.level, reference.noise);
    return j ? [j] : [];
  });
  if (judged.length < WATCH.runWindows) return { state: 'measuring', windows: judged.length, runtime: null };
  const run = judged.slice(-WATCH.runWindows);
  const z = jStat.normal.inv((1 + reference.confidencePercent / 100) / 2, 0, 1);
  const change = run.reduce((s, j) => s + Math.log(j.objective), 0) / run.length;
  // Without a measured noise the run's own spread stands in.
  const spread = Math.sqrt(run.reduce((s, j) => s + (Math.log(j.objective) - change) ** 2, 0) / (run.length - 1));
  const windowSd = Math.sqrt(run.reduce((s, j) => s + (j.sd ?? spread) ** 2, 0)) / run.length;
  // The verification decided that the gain cleared the minimum effect; the question now is
  // whether the kept level has moved since, so only the watch's own noise widens the interval.
  const sd = windowSd;
  const center = Math.log(reference.verified.estimate) + change;
  const runtime = { estimate: Math.exp(center), low: Math.exp(center - z * sd), high: Math.exp(center + z * sd) };
  // Gone when the run's interval no longer clears the minimum effect (its high end is past
  // 1 − the minimum effect: the verification's rule, turned round), and the kept level has risen
  // beyond the run's noise since the verification (its low end is past the verified ratio), so
  // that a noisy run of a gain near the minimum effect does not raise the event. Requiring the
  // whole interval past 1 − the minimum effect instead (or even the estimate) asked the runtime
  // to come back slower than the baseline the session measured: on a real cluster (±19 % over 4
  // windows of 5 s) a kept configuration back at the baseline's speed, give or take its drift,
  // held on (e2e-watch.test.ts, watch.test.ts).
  const threshold = 1 - reference.minEffectPercent / 100;
  const gone = runtime.high > threshold && runtime.low > reference.verified.estimate;
  return { state: gone ? 'gone' : 'holding', windows: judged.length, runtime };
}

// How long a session's windows are, and what its verification can still prove (issue #30, part 6).
//
// A window must be long enough for its runtime to be a fair sample of the workload, and every
// window costs the same wall-clock time, so the session's length is its window count times its
// window. The windows start at the longest a person allows (windowSeconds), since before the
// noise is measured nothing says a shorter one would do. Once the noise of one window (σ) is
// measured on the baseline windows, the windows shrink to the length at which σ would be
// TARGET_WINDOW_NOISE, assuming it falls with the square root of the length (the runtime of a
// window is a mean over its statements), and no shorter than windowMinSeconds:
//   L' = L · (σ / target)², within [windowMinSeconds, windowSeconds].
// The noise of the shorter windows is then estimated from windows of both lengths scaled by the
// same law (drift.ts pooledWindowNoise): where the noise does not fall with the length (drift, a
// neighbour's load) that overstates it for the short windows, which only widens their intervals.
//
// What a verification can prove: after its most rounds, the confidence sequence's half-width for
// that noise (verify.ts sequenceInterval) sets the smallest gain whose interval can clear the
// minimum effect. A search whose model promises less than that cannot end in a verified gain, so
// the search ends (history.ts nothingLeft).
import { sequenceInterval, type VerifySettings } from '../../measure/verify.ts';
import type { TuningSessionRecord } from './store.ts';

/** One window's noise the chosen length aims at: at 5 %, 5 A/B rounds verify a gain of 14 % or more. */
export const TARGET_WINDOW_NOISE = 0.05;

/** The length of the session's windows from now on. */
export const windowOf = (session: Pick<TuningSessionRecord, 'windowSeconds' | 'windowNowSeconds'>): number =>
  session.windowNowSeconds ?? session.windowSeconds;

/** The window length for a measured noise `noise` of windows `measuredSeconds` long, within the session's bounds. */
export function chooseWindowSeconds(noise: number, measuredSeconds: number, bounds: { min: number; max: number }): number {
  const wanted = measuredSeconds * (noise / TARGET_WINDOW_NOISE) ** 2;
  return Math.round(Math.min(bounds.max, Math.max(bounds.min, wanted)));
}

/**
 * The smallest gain (0.14 = 14 % less runtime) a verification of `settings.maxRounds` rounds can
 * prove at window noise `noise`: its interval, were the rounds to measure exactly that gain, just
 * clears the minimum effect. The minimum effect itself while the noise is unknown.
 */
export function smallestVerifiableGain(noise: number | null, settings: VerifySettings): number {
  if (noise === null || !(noise > 0)) return settings.minEffect;
  const zeros = Array.from({ length: settings.maxRounds }, () => 0);
  const interval = sequenceInterval(zeros, settings.confidence, Math.SQRT2 * noise, settings.minRounds);
  if (!interval) return settings.minEffect;
  return 1 - (1 - settings.minEffect) / interval.high;
}

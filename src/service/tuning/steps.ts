// Verified steps (issue #30, part 2): a trial far enough below the baseline that a short
// verification is likely to clear the minimum effect is verified at once, in A/B rounds, instead
// of waiting for the end of the search, and kept (or offered for approval). The search then goes
// on from it: it is the known-good configuration, the baseline windows after it measure it, and
// later trials are judged against them. A session may so keep several steps, each with its own
// interval against the one before.
//
// The windows of a session fall into epochs: epoch 0 before the first kept step, epoch k after the
// k-th. A trial is judged against the baseline windows of its own epoch only (the known-good
// configuration changed between epochs, which is no drift), and its objective is carried back to
// the session's first baseline by the kept steps' estimates before it, so the optimizer sees one
// scale. The noise of one window is pooled over the epochs (drift.ts pooledWindowNoise).
//
// Pure functions of the session and its windows.
import { noiseUpperBound } from '../../measure/drift.ts';
import { sequenceInterval, type Interval, type VerifySettings } from '../../measure/verify.ts';
import type { SessionStep, TuningIterationKind, TuningSessionRecord } from './store.ts';

/** While the noise of one window is not measured yet (fewer than 3 baseline windows, as at the
 * first trial), a win is judged as if windows varied by this much, within the 8-15 % shared
 * machines show from one window to the next: a diagnosis 1.45× faster or more is verified at
 * once. The assumption only decides when to verify: the verification's own interval uses the
 * noise measured by then (its baseline windows complete the three needed). */
export const ASSUMED_WINDOW_NOISE = 0.12;

/** Once it is measured, a win is judged as if windows varied as much as the noise could still be at
 * this one-sided confidence (drift.ts noiseUpperBound): the first estimate rests on two or three
 * differences of baseline windows, and on select-1 a σ of 2.5 % measured on so few made a single
 * window at 0.92 a step, 6 windows spent on noise. Twice σ early, a sixth more after 20. */
export const STEP_NOISE_CONFIDENCE = 0.8;

/** While the noise is not measured, a trial the statistics did not argue for (not a diagnosis) is
 * judged as if windows varied this many times ASSUMED_WINDOW_NOISE: on a loaded machine single
 * select-1 windows measured 0.62 and 0.70 of the baseline, which the assumed noise would verify
 * (its bar is 0.70), while index-join's first trial, pgtune's random_page_cost, measured 0.41-0.45
 * (the bar at twice the noise is 0.52, at 3-5 rounds and a 5 % minimum effect). */
export const UNARGUED_NOISE_FACTOR = 2;

/** The noise a step on a trial of `kind` is decided on: the measured one's upper bound; before it
 * is measured, the assumed noise (UNARGUED_NOISE_FACTOR times it for a trial no diagnosis argued for). */
export const stepNoise = (noise: number | null, differences: number, kind: TuningIterationKind): number =>
  noise !== null
    ? noiseUpperBound(noise, differences, STEP_NOISE_CONFIDENCE)
    : ASSUMED_WINDOW_NOISE * (kind === 'diagnosis' ? 1 : UNARGUED_NOISE_FACTOR);

/** The steps kept, in order (each with the window it became known-good after). */
export const keptSteps = (session: Pick<TuningSessionRecord, 'steps'>): Array<SessionStep & { keptAfter: number }> =>
  (session.steps ?? []).filter((s): s is SessionStep & { keptAfter: number } => s.outcome === 'kept' && s.keptAfter !== null);

/** The epoch of a window: how many kept steps came before it. */
export const epochOf = (session: Pick<TuningSessionRecord, 'steps'>, ordinal: number): number =>
  keptSteps(session).filter((s) => ordinal > s.keptAfter).length;

/** The session's current epoch: the number of kept steps. */
export const currentEpoch = (session: Pick<TuningSessionRecord, 'steps'>): number => keptSteps(session).length;

/** The known-good configuration's runtime in epoch `epoch` over the first baseline's: the product
 * of the estimates of the steps kept before it (1 in epoch 0). */
export function chainAt(session: Pick<TuningSessionRecord, 'steps'>, epoch: number): number {
  return keptSteps(session)
    .slice(0, epoch)
    .reduce((product, s) => product * (s.runtime?.estimate ?? 1), 1);
}

/** The kept steps' gain over the first baseline: the product of their estimates, its bounds the
 * products of theirs (each step's interval holds at the verification's level on its own). */
export function chainedInterval(session: Pick<TuningSessionRecord, 'steps'>, last: Interval | null = null): Interval | null {
  const intervals = [...keptSteps(session).map((s) => s.runtime), ...(last ? [last] : [])];
  if (intervals.length === 0 || intervals.some((i) => i === null)) return null;
  return intervals.reduce<Interval>((p, i) => ({ estimate: p.estimate * i!.estimate, low: p.low * i!.low, high: p.high * i!.high }), {
    estimate: 1,
    low: 1,
    high: 1,
  });
}

/** A step waiting on something (its rounds, a person, the keep): no other starts meanwhile. */
export const pendingStep = (session: Pick<TuningSessionRecord, 'steps'>): SessionStep | null =>
  (session.steps ?? []).find((s) => s.outcome === 'verifying' || s.outcome === 'awaiting_approval' || s.outcome === 'applying') ?? null;

/**
 * A window at `objective` of the known-good's runtime is worth verifying at once when, were the
 * A/B rounds to measure the same ratio, the verification's own interval after its minimum rounds
 * would clear the minimum effect: a large effect, given the noise of one window (or
 * ASSUMED_WINDOW_NOISE before it is measured). Smaller gains wait for the search's end, where the
 * best of them is verified as before.
 */
export function worthVerifyingNow(objective: number, noise: number | null, settings: VerifySettings): boolean {
  if (!(objective > 0) || objective >= 1) return false;
  const logs = Array.from({ length: settings.minRounds }, () => Math.log(objective));
  const interval = sequenceInterval(logs, settings.confidence, Math.SQRT2 * (noise ?? ASSUMED_WINDOW_NOISE), settings.minRounds);
  return interval !== null && interval.high <= 1 - settings.minEffect;
}

/** "step 1 (iteration 2): runtime −66 % (95 % CI …), kept" lines for people. */
export const stepOutcomeWords: Record<SessionStep['outcome'], string> = {
  verifying: 'being verified',
  awaiting_approval: 'waiting for approval',
  applying: 'being applied to keep it',
  kept: 'kept',
  not_verified: 'not verified',
  refused: 'not recommended',
  not_kept: 'verified, not kept (the session ended first)',
};

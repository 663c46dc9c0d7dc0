// A guardrail trip the environment caused is not the configuration's failure (issue #30, part 5).
// A trial reverted by a guardrail, or failed by a constraint on its window (throughput fell,
// rollbacks rose), may have met a busy neighbour rather than a bad configuration: a failure
// excludes its region from the search for good. So after such a trip the baseline is measured
// again at once, and when that window is just as slow, by the constraints against the baseline
// before the trip or by its runtime against the drift model (src/measure/drift.ts), the trial is
// marked contaminated instead: the optimizer never sees it, and may try it again later. The same
// holds for a verification's candidate window a guardrail ended, which would end the verification
// (verificationTrip): contaminated, its round is measured again.
import { slowerThanDrift, windowNoise } from '../../measure/drift.ts';
import { ENVIRONMENT_BREACH, ENVIRONMENT_CAUSE } from '../../protocol/v1.ts';
import type { TuningIterationRecord, TuningSessionRecord } from './store.ts';
import { constraintBreach } from './constraints.ts';
import { baselinePoints, isTrial, pointOf } from './history.ts';
import { epochOf } from './steps.ts';

/** How a trip the environment caused begins its `failure`: the engine counts them by it. */
export const ENVIRONMENT_TRIP = 'contaminated: the environment, not the configuration:';

/** The agent ended the trial because the environment changed under it (a failover: its guardrail
 * event begins with ENVIRONMENT_BREACH): its window is contaminated, not failed. */
export const isEnvironmentBreach = (message: string) => message.startsWith(ENVIRONMENT_BREACH);

/** The agent's apply failed because the environment changed under it (its first error begins
 * with ENVIRONMENT_CAUSE): not the configuration's failure either. */
export const isEnvironmentCause = (errors: string) => errors.startsWith(ENVIRONMENT_CAUSE);

/** A trial failed by a guardrail or by a constraint on its measured window (not refused, not unacknowledged). */
export const isTrip = (it: TuningIterationRecord) =>
  isTrial(it) && it.state === 'failed' && (/\bguardrail\b/.test(it.failure ?? '') || it.stats !== null);

const okBaseline = (it: TuningIterationRecord) => it.kind === 'baseline' && it.state === 'ok' && it.stats !== null;

/** The last trip with no clean baseline window measured after it: the baseline is due now. */
export function tripAwaitingBaseline(iterations: readonly TuningIterationRecord[]): TuningIterationRecord | null {
  const trip = iterations.filter(isTrip).at(-1);
  return trip && !iterations.some((it) => it.ordinal > trip.ordinal && okBaseline(it)) ? trip : null;
}

const percent = (x: number) => `${(x * 100).toFixed(1)} %`;

/**
 * Why the clean baseline window `after` shows that the environment caused `trip`: the baseline
 * is just as slow, by the constraints against the baseline window before the trip or by its
 * runtime against the drift model of the baseline windows before it (of the trip's own epoch,
 * steps.ts: a kept step before it is no drift). Null when it is not.
 */
function environmentCause(
  session: TuningSessionRecord,
  iterations: readonly TuningIterationRecord[],
  trip: TuningIterationRecord,
  after: TuningIterationRecord,
): string | null {
  const point = pointOf(after);
  if (!after.stats || !point) return null;
  const earlier = iterations.filter((it) => it.ordinal < trip.ordinal);
  const before = baselinePoints(session, earlier, epochOf(session, trip.ordinal));
  const reference = earlier.filter(okBaseline).at(-1)?.stats ?? session.baseline?.stats ?? null;
  const breach = reference && constraintBreach(after.stats, reference, { window: null, baseline: null });
  if (breach) return `its ${breach}`;
  const slower = slowerThanDrift(point, before, windowNoise(before));
  return slower?.slower
    ? `its runtime was ${percent(slower.objective - 1)} above what the drift of the baseline windows before it predicts${slower.sd === null ? '' : ` (σ ${percent(slower.sd)})`}`
    : null;
}

const contaminatedBy = (trip: TuningIterationRecord, after: TuningIterationRecord, why: string) =>
  `${ENVIRONMENT_TRIP} ${trip.failure ?? 'a guardrail trip'}, but the baseline window after it (iteration ${after.ordinal}) was just as slow: ${why}; it may be tried again`;

/**
 * The trips the baseline window after them shows the environment caused: each with the failure
 * it is marked contaminated with. Pure: the same iterations give the same answer.
 */
export function environmentTrips(
  session: TuningSessionRecord,
  iterations: readonly TuningIterationRecord[],
): Array<{ ordinal: number; failure: string }> {
  return iterations.filter(isTrip).flatMap((trip) => {
    const after = iterations.find((it) => it.ordinal > trip.ordinal && okBaseline(it));
    const why = after && environmentCause(session, iterations, trip, after);
    return after && why ? [{ ordinal: trip.ordinal, failure: contaminatedBy(trip, after, why) }] : [];
  });
}

/** A verification's candidate window a guardrail ended (the agent returned to known-good). */
export const isVerificationTrip = (it: TuningIterationRecord) =>
  it.phase === 'verify' && it.kind === 'candidate' && it.state === 'failed' && /\bguardrail\b/.test(it.failure ?? '');

/**
 * What a verification's candidate window that failed (`failed`, of a round from the
 * verification's first on) comes to. A guardrail trip is judged as a trial's is (issue #30 part 5):
 * 'awaiting' until a clean baseline window is measured after it (the engine measures the round's
 * baseline next), then 'environment' with the failure to mark it contaminated with (the round is
 * measured again), or 'configuration'. Any other failure (a refused apply) is the configuration's.
 */
export function verificationTrip(
  session: TuningSessionRecord,
  iterations: readonly TuningIterationRecord[],
  failed: TuningIterationRecord,
): { outcome: 'awaiting' } | { outcome: 'environment'; failure: string } | { outcome: 'configuration' } {
  if (!isVerificationTrip(failed)) return { outcome: 'configuration' };
  const after = iterations.find((it) => it.ordinal > failed.ordinal && okBaseline(it));
  if (!after) return { outcome: 'awaiting' };
  const why = environmentCause(session, iterations, failed, after);
  return why ? { outcome: 'environment', failure: contaminatedBy(failed, after, why) } : { outcome: 'configuration' };
}

// A guardrail trip the environment caused is not the configuration's failure (issue #30, part 5).
// A trial reverted by a guardrail, or failed by a constraint on its window (throughput fell,
// rollbacks rose), may have met a busy neighbour rather than a bad configuration: a failure
// excludes its region from the search for good. So after such a trip the baseline is measured
// again at once, and when that window is just as slow, by the constraints against the baseline
// before the trip or by its runtime against the drift model (src/measure/drift.ts), the trial is
// marked contaminated instead: the optimizer never sees it, and may try it again later.
import { slowerThanDrift, windowNoise } from '../../measure/drift.ts';
import { ENVIRONMENT_BREACH } from '../../protocol/v1.ts';
import type { TuningIterationRecord, TuningSessionRecord } from './store.ts';
import { constraintBreach } from './constraints.ts';
import { baselinePoints, isTrial, pointOf } from './history.ts';
import { epochOf } from './steps.ts';

/** How a trip the environment caused begins its `failure`: the engine counts them by it. */
export const ENVIRONMENT_TRIP = 'contaminated: the environment, not the configuration:';

/** The agent ended the trial because the environment changed under it (a failover: its guardrail
 * event begins with ENVIRONMENT_BREACH): its window is contaminated, not failed. */
export const isEnvironmentBreach = (message: string) => message.startsWith(ENVIRONMENT_BREACH);

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
 * The trips the baseline window after them shows the environment caused: each with the failure
 * it is marked contaminated with. Pure: the same iterations give the same answer.
 */
export function environmentTrips(
  session: TuningSessionRecord,
  iterations: readonly TuningIterationRecord[],
): Array<{ ordinal: number; failure: string }> {
  return iterations.filter(isTrip).flatMap((trip) => {
    const after = iterations.find((it) => it.ordinal > trip.ordinal && okBaseline(it));
    const point = after && pointOf(after);
    if (!after?.stats || !point) return [];
    const earlier = iterations.filter((it) => it.ordinal < trip.ordinal);
    // The known-good configuration of the trip's own epoch (steps.ts): a kept step before it is no drift.
    const before = baselinePoints(session, earlier, epochOf(session, trip.ordinal));
    const reference = earlier.filter(okBaseline).at(-1)?.stats ?? session.baseline?.stats ?? null;
    const breach = reference && constraintBreach(after.stats, reference, { window: null, baseline: null });
    const slower = slowerThanDrift(point, before, windowNoise(before));
    const why = breach
      ? `its ${breach}`
      : slower?.slower
        ? `its runtime was ${percent(slower.objective - 1)} above what the drift of the baseline windows before it predicts${slower.sd === null ? '' : ` (σ ${percent(slower.sd)})`}`
        : null;
    if (!why) return [];
    return [
      {
        ordinal: trip.ordinal,
        failure: `${ENVIRONMENT_TRIP} ${trip.failure ?? 'a guardrail trip'}, but the baseline window after it (iteration ${after.ordinal}) was just as slow: ${why}; it may be tried again`,
      },
    ];
  });
}

// Waiting on Cloud A: status polls that start fast and slow down, that ride out throttling
// (on top of the SDK's own retries), and retries of calls refused because a parameter group or
// instance is busy.
import { setTimeout as sleep } from 'node:timers/promises';
import { hasCode, isThrottling } from './aws.ts';

export interface ManagedATimings {
  /** The first status poll follows a change at once; later ones grow by half up to this. */
  firstPollMs: number;
  maxPollMs: number;
  /** An `in-sync` status is believed without an `applying` seen before it only after this long:
   * Cloud A may still show the old status for a moment after a change. */
  settleMs: number;
  /** Longest wait for parameter changes to be applied. */
  applyTimeoutMs: number;
  /** Longest wait for a reboot (Multi-AZ and large instances take minutes). */
  rebootTimeoutMs: number;
  /** A call refused because the group or instance is busy is retried after this, doubling. */
  busyRetryMs: number;
  busyAttempts: number;
  /** After a change is applied, how long values may take to show in pg_settings. */
  convergeTimeoutMs: number;
}

export const DEFAULT_TIMINGS: ManagedATimings = {
  firstPollMs: 250,
  maxPollMs: 10_000,
  settleMs: 20_000,
  applyTimeoutMs: 15 * 60_000,
  rebootTimeoutMs: 30 * 60_000,
  busyRetryMs: 2_000,
  busyAttempts: 7,
  convergeTimeoutMs: 30_000,
};

export class WaitTimeoutError extends Error {
  override name = 'WaitTimeoutError';
}

/**
 * Calls `step` until it returns a value (done) or throws (given up), first at once, then after
 * growing pauses. A throttled step is not a failure: the next poll simply comes later.
 */
export async function poll<T>(
  what: string,
  timings: ManagedATimings,
  timeoutMs: number,
  step: (elapsedMs: number) => Promise<T | undefined>,
): Promise<T> {
  const started = Date.now();
  let pause = timings.firstPollMs;
  for (;;) {
    const elapsed = Date.now() - started;
    try {
      const result = await step(elapsed);
      if (result !== undefined) return result;
    } catch (err) {
      if (!isThrottling(err)) throw err;
      pause = Math.min(timings.maxPollMs, pause * 2);
    }
    if (Date.now() - started > timeoutMs) {
      throw new WaitTimeoutError(`gave up waiting for ${what} after ${Math.round(timeoutMs / 1000)} s`);
    }
    await sleep(pause);
    pause = Math.min(timings.maxPollMs, Math.ceil(pause * 1.5));
  }
}

/** Cloud A refuses changes to a group (or a reboot) while it is busy with the previous one. */
const BUSY = ['InvalidDBParameterGroupState', 'InvalidDBInstanceState', 'InvalidDBClusterStateFault', 'InvalidDBClusterState'];

/** Runs `call`, retrying later (with doubling pauses) while the group or instance is busy. */
export async function retryWhileBusy<T>(timings: ManagedATimings, call: () => Promise<T>): Promise<T> {
  let pause = timings.busyRetryMs;
  for (let attempt = 1; ; attempt++) {
    try {
      return await call();
    } catch (err) {
      if (!hasCode(err, ...BUSY) || attempt >= timings.busyAttempts) throw err;
      await sleep(pause);
      pause *= 2;
    }
  }
}

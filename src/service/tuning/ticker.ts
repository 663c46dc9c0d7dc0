// A light timer for what no request brings: a measurement window that ends while the agent is
// quiet, an acknowledgement that never comes. Every replica runs one (repeat.ts); a session another
// replica is advancing is skipped (SKIP LOCKED), not waited for.
import type { FastifyBaseLogger } from 'fastify';
import { safeErrorForLog } from '../errors.ts';
import { repeatEvery, type Repeating } from '../repeat.ts';
import { advanceTuningSession, type AdvanceDeps } from './advance.ts';

export const TICK_MS = 5_000;

export type TuningSessionTicker = Repeating;

export function startTuningSessionTicker(
  { stores, runningSessions: running }: AdvanceDeps,
  log: FastifyBaseLogger,
  everyMs = TICK_MS,
): TuningSessionTicker {
  const tick = async () => {
    let databases: string[];
    try {
      const readAt = performance.now();
      databases = await stores.tuning.databasesWithRunningSession();
      running.refresh(databases, readAt);
    } catch (err) {
      log.warn({ err: safeErrorForLog(err) }, 'tuning sessions: the timer could not list running sessions');
      return;
    }
    for (const databaseId of databases) {
      try {
        await advanceTuningSession(stores.tuning, databaseId, { skipLocked: true });
      } catch (err) {
        log.warn({ err: safeErrorForLog(err), databaseId }, 'tuning session: the timer could not advance it; it tries again');
      }
    }
  };
  // At once too: after a restart, sessions go on without waiting for the first tick.
  return repeatEvery(tick, everyMs, { atOnce: true });
}

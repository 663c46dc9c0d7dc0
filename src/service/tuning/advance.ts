// When sessions move: after each report and each acknowledgement of their database (the agent
// API calls these), and on a timer for what no request brings (a window that ends while the
// agent is quiet, an acknowledgement that never comes). A failure here never fails the agent's
// request: the report is stored already, and the next report or tick tries again.
import type { FastifyBaseLogger } from 'fastify';
import { safeErrorForLog } from '../errors.ts';
import type { Storage } from '../storage/storage.ts';
import { RUNNING_SESSION_STATES, type TuningSessionRecord } from './store.ts';
import { advanceSession, type AdvanceResult } from './engine.ts';
import { sessionReportInterval } from './params.ts';
import type { RunningSessions } from './running.ts';
import type { ServiceContext } from '../app/context.ts';

const RUNNING = new Set(RUNNING_SESSION_STATES);
const MEASURING = new Set<TuningSessionRecord['state']>(['baseline', 'iterating']);

export interface AdvanceOptions {
  /** The clock; the storage's by default (the one reports and acks are stamped with). */
  now?: Date;
  /** Skip a session another request or replica is advancing (the timer does). */
  skipLocked?: boolean;
}

/** Advances the database's active session, holding its row lock. Null when there is none. */
export function advanceTuningSession(storage: Storage, databaseId: string, options: AdvanceOptions = {}): Promise<AdvanceResult | null> {
  return storage.withTuningSession(databaseId, null, { skipLocked: options.skipLocked ?? false }, async (tx, session) =>
    advanceSession(tx, session, options.now ?? (await tx.now())),
  );
}

export interface AfterReport {
  /** While a session measures, the agent reports this often (at most: the database's own interval wins when shorter). */
  reportIntervalSeconds: number | null;
  /** The session queued a command: hand it over in this answer. */
  commandIssued: boolean;
}

const NOTHING: AfterReport = { reportIntervalSeconds: null, commandIssued: false };

/** The database's session when it is running; forgets the database in the cache otherwise. */
async function runningSession(storage: Storage, running: RunningSessions, databaseId: string): Promise<TuningSessionRecord | null> {
  if (!running.has(databaseId)) return null;
  const active = await storage.activeTuningSession(databaseId);
  if (active && RUNNING.has(active.state)) return active;
  running.delete(databaseId);
  return null;
}

export async function afterReport(
  { storage, runningSessions }: ServiceContext,
  databaseId: string,
  log: FastifyBaseLogger,
): Promise<AfterReport> {
  try {
    if (!(await runningSession(storage, runningSessions, databaseId))) return NOTHING;
    const advanced = await advanceTuningSession(storage, databaseId);
    if (!advanced) return NOTHING;
    const session = advanced.session;
    return {
      reportIntervalSeconds: MEASURING.has(session.state) ? sessionReportInterval(session.windowSeconds) : null,
      commandIssued: advanced.commandIssued,
    };
  } catch (err) {
    log.warn(
      { err: safeErrorForLog(err), databaseId },
      'tuning session: advancing after a report failed; the next report or tick tries again',
    );
    return NOTHING;
  }
}

export async function afterAck({ storage, runningSessions }: ServiceContext, databaseId: string, log: FastifyBaseLogger): Promise<void> {
  try {
    if (await runningSession(storage, runningSessions, databaseId)) await advanceTuningSession(storage, databaseId);
  } catch (err) {
    log.warn(
      { err: safeErrorForLog(err), databaseId },
      'tuning session: advancing after an acknowledgement failed; the next report or tick tries again',
    );
  }
}

// When sessions move: after each report and each acknowledgement of their database (the agent
// API calls these), and on a timer for what no request brings (a window that ends while the
// agent is quiet, an acknowledgement that never comes). A failure here never fails the agent's
// request: the report is stored already, and the next report or tick tries again.
import type { FastifyBaseLogger } from 'fastify';
import type { Command } from '../../protocol/v1.ts';
import { safeErrorForLog } from '../errors.ts';
import { MEASURING_SESSION_STATES, RUNNING_SESSION_STATES, type TuningSessionRecord, type TuningStore } from './store.ts';
import { advanceSession, type AdvanceResult } from './engine.ts';
import { sessionReportInterval } from './params.ts';
import { windowOf } from './window-length.ts';
import type { RunningSessions } from './running.ts';

const RUNNING = new Set(RUNNING_SESSION_STATES);
const MEASURING = new Set(MEASURING_SESSION_STATES);

/** What moving sessions on needs: the tuning port, and the cache of databases with a running session. */
export interface AdvanceDeps {
  stores: { tuning: TuningStore };
  runningSessions: RunningSessions;
}

export interface AdvanceOptions {
  /** The clock; the storage's by default (the one reports and acks are stamped with). */
  now?: Date;
  /** Skip a session another request or replica is advancing (the timer does). */
  skipLocked?: boolean;
}

/** Advances the database's active session, holding its row lock. Null when there is none. */
export function advanceTuningSession(
  storage: TuningStore,
  databaseId: string,
  options: AdvanceOptions = {},
): Promise<AdvanceResult | null> {
  return storage.withTuningSession(databaseId, null, { skipLocked: options.skipLocked ?? false }, async (tx, session) =>
    advanceSession(tx, session, options.now ?? (await tx.now())),
  );
}

export interface AfterReport {
  /** While a session measures, the agent reports this often (at most: the database's own interval wins when shorter). */
  reportIntervalSeconds: number | null;
  /** The command the session queued, handed over in this answer (when the answer had none already). */
  command: Command | null;
}

const NOTHING: AfterReport = { reportIntervalSeconds: null, command: null };

/** Whether to advance the database's session: the cache names it and the storage says it runs;
 * the cache forgets it when it does not run. */
function runs(running: RunningSessions, databaseId: string, runsInStorage: boolean): boolean {
  if (!running.has(databaseId)) return false;
  if (runsInStorage) return true;
  running.delete(databaseId);
  return false;
}

/** The database's active session when it is running; forgets the database in the cache otherwise. */
async function runningSession(storage: TuningStore, running: RunningSessions, databaseId: string): Promise<TuningSessionRecord | null> {
  if (!running.has(databaseId)) return null;
  const active = await storage.activeTuningSession(databaseId);
  return runs(running, databaseId, active !== null && RUNNING.has(active.state)) ? active : null;
}

/**
 * Moves the session on after a report, in one transaction: the step, and (`handOver`: the answer
 * carries no command yet) the command the step queued, marked sent. `runsInStorage`: whether the
 * database has a running session, as the report's own statement read it, so that knowing it costs
 * nothing more.
 */
export async function afterReport(
  { stores, runningSessions }: AdvanceDeps,
  databaseId: string,
  runsInStorage: boolean,
  handOver: boolean,
  log: FastifyBaseLogger,
): Promise<AfterReport> {
  try {
    if (!runs(runningSessions, databaseId, runsInStorage)) return NOTHING;
    const stepped = await stores.tuning.withTuningSession(databaseId, null, { skipLocked: false }, async (tx, active) => {
      const advanced = await advanceSession(tx, active, await tx.now());
      return { advanced, command: advanced.commandIssued && handOver ? await tx.sendNextCommand() : null };
    });
    if (!stepped) return NOTHING;
    const session = stepped.advanced.session;
    return {
      reportIntervalSeconds: MEASURING.has(session.state) ? sessionReportInterval(windowOf(session)) : null,
      command: stepped.command,
    };
  } catch (err) {
    log.warn(
      { err: safeErrorForLog(err), databaseId },
      'tuning session: advancing after a report failed; the next report or tick tries again',
    );
    return NOTHING;
  }
}

export async function afterAck({ stores, runningSessions }: AdvanceDeps, databaseId: string, log: FastifyBaseLogger): Promise<void> {
  try {
    if (await runningSession(stores.tuning, runningSessions, databaseId)) await advanceTuningSession(stores.tuning, databaseId);
  } catch (err) {
    log.warn(
      { err: safeErrorForLog(err), databaseId },
      'tuning session: advancing after an acknowledgement failed; the next report or tick tries again',
    );
  }
}

// Keeps each database's advice as last computed in the storage (store.ts), for the fleet page:
// a background round, like the watch's, computes the advice (queries.ts adviceOf, the same the
// dashboard shows) for the databases whose agent reported since their last computation, and
// writes what it found. So the fleet's single statement joins one row per database, and the
// cost of the diagnoses is paid once per database per interval, off any request, however often
// the page is opened.
import type { FastifyBaseLogger } from 'fastify';
import { safeErrorForLog } from '../errors.ts';
import { repeatEvery, type Repeating } from '../repeat.ts';
import type { AdviceStore, StoredAdvice } from './store.ts';
import { ADVICE_LIMITS, adviceOf, type AdviceDeps } from './queries.ts';

export interface AdviceRefreshOptions {
  /** A database's advice is computed again at most this often (when a report came since). */
  everySeconds: number;
  /** Databases computed per round at most. */
  perRound: number;
}

export const ADVICE_REFRESH_DEFAULTS: AdviceRefreshOptions = { everySeconds: 60, perRound: 50 };

export type AdviceRefreshDeps = AdviceDeps & { stores: { advice: AdviceStore } };

/** Computes and stores one database's advice; what was stored, or null when the database is gone. */
export async function refreshAdvice(deps: AdviceRefreshDeps, organizationId: string, databaseId: string): Promise<StoredAdvice | null> {
  const database = await deps.stores.databases.getDatabase(organizationId, databaseId);
  if (!database) return null;
  const answer = await adviceOf(deps, database);
  const stored: StoredAdvice = {
    databaseId,
    state: answer.state,
    findings: answer.items.map((item) => item.finding),
    parameters: [...new Set(answer.items.flatMap((item) => item.changes.map((c) => c.parameter)))],
    reportsTo: answer.window?.to ?? null,
  };
  await deps.stores.advice.saveAdvice(stored);
  return stored;
}

/** One round: the databases due, each computed and stored; how many were. */
export async function refreshDueAdvice(deps: AdviceRefreshDeps, options: AdviceRefreshOptions, log?: FastifyBaseLogger): Promise<number> {
  const due = await deps.stores.advice.adviceDue(options.everySeconds, ADVICE_LIMITS.windowSeconds, options.perRound);
  let done = 0;
  for (const d of due) {
    try {
      await refreshAdvice(deps, d.organizationId, d.databaseId);
      done++;
    } catch (err) {
      log?.warn({ err: safeErrorForLog(err), databaseId: d.databaseId }, 'advice: could not compute the advice; it tries again');
    }
  }
  return done;
}

/** Refreshes the advice of the databases due every `everyMs`; a slow round is not stacked upon. */
export function startAdviceRefresh(
  deps: AdviceRefreshDeps,
  log: FastifyBaseLogger,
  options: AdviceRefreshOptions,
  everyMs: number,
): Repeating {
  return repeatEvery(async () => {
    try {
      await refreshDueAdvice(deps, options, log);
    } catch (err) {
      log.warn({ err: safeErrorForLog(err) }, 'advice: could not list the databases due; it tries again');
    }
  }, everyMs);
}

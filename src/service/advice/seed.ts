// A session started from the advice: it keeps what the advice read (SessionSpaceInput.advice),
// and its diagnoses read that instead of its own baseline's, so its first trials are the ones the
// person saw argued for, in the same order, whatever the baseline window happened to catch.
import { conflict } from '../errors.ts';
import type { DatabaseSummary } from '../databases/store.ts';
import type { SessionAdviceSeed } from '../tuning/store.ts';
import { adviceOf, type AdviceDeps } from './queries.ts';

/** The advice to seed a new session with; a conflict when there is none to start from. */
export async function adviceSeed(deps: AdviceDeps, database: DatabaseSummary): Promise<SessionAdviceSeed> {
  const advice = await adviceOf(deps, database);
  if (advice.state !== 'advice' || !advice.signals || !advice.window)
    throw conflict(`no advice to start a session from: ${advice.message}`);
  return {
    signals: advice.signals,
    findings: advice.items.map((item) => item.finding),
    from: advice.window.from.toISOString(),
    to: advice.window.to.toISOString(),
  };
}

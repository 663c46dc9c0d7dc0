// A session started from the advice: it keeps what the advice read (SessionSpaceInput.advice),
// and its diagnoses read that instead of its own baseline's, so its first trials are the ones the
// person saw argued for, in the same order, whatever the baseline window happened to catch.
import type { WorkloadSignals } from '../../optimizer/index.ts';
import { conflict } from '../errors.ts';
import type { DatabaseSummary } from '../databases/store.ts';
import type { SessionAdviceSeed, TuningSessionRecord } from '../tuning/store.ts';
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

/** What a session's diagnoses read: the advice it was started from, else its baseline's signals. */
export function diagnosisSignals(session: Pick<TuningSessionRecord, 'space' | 'baseline'>): WorkloadSignals | undefined {
  return session.space.advice?.signals ?? session.baseline?.signals;
}

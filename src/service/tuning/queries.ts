// What people read of tuning sessions, through the JSON API or the dashboard alike: a database's
// sessions, and one session with its windows (iterations). The acting user's organization bounds it.
import { databaseOf } from '../databases/actions.ts';
import type { DatabaseSummary } from '../databases/store.ts';
import type { User } from '../people/store.ts';
import { noSuchSession, type TuningDeps } from './actions.ts';
import type { TuningIterationRecord, TuningSessionRecord } from './store.ts';

/** The database's sessions, newest first. */
export async function listTuningSessions(deps: TuningDeps, user: User, databaseId: string, limit: number): Promise<TuningSessionRecord[]> {
  await databaseOf(deps, user, databaseId);
  return deps.stores.tuning.listTuningSessions(user.organizationId, databaseId, limit);
}

/** The sessions of a database `databaseOf` returned (its organization checked already), newest first. */
export function tuningSessionsOf(deps: TuningDeps, database: DatabaseSummary, limit: number): Promise<TuningSessionRecord[]> {
  return deps.stores.tuning.listTuningSessions(database.organizationId, database.id, limit);
}

export interface TuningSessionDetail {
  session: TuningSessionRecord;
  iterations: TuningIterationRecord[];
}

/** The session with its iterations, or a not_found error that says so. */
export async function getTuningSession(deps: TuningDeps, user: User, databaseId: string, sessionId: string): Promise<TuningSessionDetail> {
  const found = await findTuningSession(deps, user.organizationId, databaseId, sessionId);
  if (!found) throw noSuchSession(sessionId);
  return found;
}

/** The session with its iterations, or null: for a page that shows the latest when the one asked for is gone. */
export function findTuningSession(
  deps: TuningDeps,
  organizationId: string,
  databaseId: string,
  sessionId: string,
): Promise<TuningSessionDetail | null> {
  return deps.stores.tuning.getTuningSession(organizationId, databaseId, sessionId);
}

// What people read of their databases, through the JSON API or the pages alike: each read names
// the acting user, whose organization bounds what it sees (a database of another organization is not found).
import type { User } from '../people/store.ts';
import { databaseOf, type DatabasesDeps } from './actions.ts';
import type { ApiKeyInfo, CommandRecord, DatabaseSummary, ReportPoint, StoredEvent, StoredReport } from './store.ts';

export { databaseOf };

export function listDatabases(deps: DatabasesDeps, user: User): Promise<DatabaseSummary[]> {
  return deps.stores.databases.listDatabases(user.organizationId);
}

export async function apiKeys(deps: DatabasesDeps, user: User, databaseId: string): Promise<ApiKeyInfo[]> {
  return apiKeysOf(deps, await databaseOf(deps, user, databaseId));
}

/** The keys of a database `databaseOf` returned (its organization checked already). */
export function apiKeysOf(deps: DatabasesDeps, database: DatabaseSummary): Promise<ApiKeyInfo[]> {
  return deps.stores.databases.listApiKeys(database.organizationId, database.id);
}

export async function commands(deps: DatabasesDeps, user: User, databaseId: string, limit: number): Promise<CommandRecord[]> {
  await databaseOf(deps, user, databaseId);
  return deps.stores.databases.listCommands(user.organizationId, databaseId, limit);
}

export async function latestReport(deps: DatabasesDeps, user: User, databaseId: string): Promise<StoredReport | null> {
  return latestReportOf(deps, await databaseOf(deps, user, databaseId));
}

/** The latest report of a database `databaseOf` returned (its organization checked already). */
export function latestReportOf(deps: DatabasesDeps, database: DatabaseSummary): Promise<StoredReport | null> {
  return deps.stores.databases.latestReport(database.organizationId, database.id);
}

export async function recentEvents(deps: DatabasesDeps, user: User, databaseId: string, limit: number): Promise<StoredEvent[]> {
  await databaseOf(deps, user, databaseId);
  return deps.stores.databases.recentEvents(user.organizationId, databaseId, limit);
}

/** What the dashboard shows of a database besides its tuning sessions, read side by side. The
 * database is one `databaseOf` returned: the organization was checked already. */
export interface DatabaseActivity {
  report: StoredReport | null;
  series: ReportPoint[];
  commands: CommandRecord[];
  events: StoredEvent[];
}

export async function databaseActivity(
  deps: DatabasesDeps,
  database: DatabaseSummary,
  limits: { series: number; commands: number; events: number },
): Promise<DatabaseActivity> {
  const { organizationId, id } = database;
  const store = deps.stores.databases;
  const [report, series, commandList, events] = await Promise.all([
    store.latestReport(organizationId, id),
    store.reportSeries(organizationId, id, limits.series),
    store.listCommands(organizationId, id, limits.commands),
    store.recentEvents(organizationId, id, limits.events),
  ]);
  return { report, series, commands: commandList, events };
}

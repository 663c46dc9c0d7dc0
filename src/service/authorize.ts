// Who may do what: the one rule the pages, the people's API and the features ask. A user must be
// logged in; some things need an admin; a database is seen only by its own account (anyone
// else is told there is no such database, which says nothing of other accounts' ids).
import type { DatabaseStore, DatabaseSummary } from './databases/store.ts';
import { forbidden, notFound, unauthorized } from './errors.ts';
import type { User } from './people/store.ts';

/** What a request needs: a logged-in user, an admin (`admin`: what for, said in the refusal), or
 * a database of the user's account. */
export type Need = { loggedIn: true } | { admin: string } | { databaseId: string };

/** What authorizing may read: whether a database is the user's. */
export interface AuthorizeDeps {
  stores: { databases: Pick<DatabaseStore, 'getDatabase'> };
}

/** The user, when allowed; the database too when the need names one. Throws unauthorized (nobody
 * logged in), forbidden (not an admin) or not_found (no such database in the user's account). */
export async function authorize(
  deps: AuthorizeDeps,
  user: User | null | undefined,
  need: Need,
): Promise<{ user: User; database: DatabaseSummary | null }> {
  if (!user) throw unauthorized('log in first');
  if ('admin' in need && !user.isAdmin) throw forbidden(`only an admin can ${need.admin}`);
  if (!('databaseId' in need)) return { user, database: null };
  const database = await deps.stores.databases.getDatabase(user.accountId, need.databaseId);
  if (!database) throw notFound(`no database ${need.databaseId} in your account`);
  return { user, database };
}

// Who may do what: the one rule the pages, the people's API and the features ask. A person must
// be logged in (or present an API token) and belongs to one organization, where their role says
// what they may do: a viewer reads everything of the organization; an operator also runs tuning
// sessions and changes configurations; an admin also manages databases, keys, people, tokens and
// the audit log. A database is seen only by its own organization (anyone else is told there is no
// such database, which says nothing of other organizations' ids).
import type { DatabaseStore, DatabaseSummary } from './databases/store.ts';
import { forbidden, notFound, unauthorized } from './errors.ts';
import { ROLES, type Actor, type Role, type User } from './people/store.ts';

/** What a request needs: a logged-in person; a role (`to`: what for, said in the refusal); or a
 * database of the person's organization, and a role there when it changes something. */
export type Need = { loggedIn: true } | { role: Role; to: string; person?: true } | { databaseId: string; role?: Role; to?: string };

/** What authorizing may read: whether a database is the person's organization's. */
export interface AuthorizeDeps {
  stores: { databases: Pick<DatabaseStore, 'getDatabase'> };
}

/** Whether `role` may do what `needed` may (the roles are ordered). */
export function hasRole(role: Role, needed: Role): boolean {
  return ROLES.indexOf(role) >= ROLES.indexOf(needed);
}

const article = (role: Role) => (role === 'viewer' ? 'a viewer' : role === 'operator' ? 'an operator' : 'an admin');

/** The user, when allowed; the database too when the need names one. Throws unauthorized (nobody
 * logged in), not_found (no such database in the organization) or forbidden (naming the role needed). */
export async function authorize(
  deps: AuthorizeDeps,
  user: User | null | undefined,
  need: Need,
): Promise<{ user: User; database: DatabaseSummary | null }> {
  if (!user) throw unauthorized('log in first');
  let database: DatabaseSummary | null = null;
  if ('databaseId' in need) {
    database = await deps.stores.databases.getDatabase(user.organizationId, need.databaseId);
    if (!database) throw notFound(`no database ${need.databaseId} in your organization`);
  }
  if ('person' in need && need.person && (user as Partial<Actor>).token) {
    throw forbidden(`an API token cannot ${need.to}: log in as an admin`);
  }
  if ('role' in need && need.role && !hasRole(user.role, need.role)) {
    const who = need.role === 'admin' ? 'an admin' : `${article(need.role)} or an admin`;
    throw forbidden(`only ${who} can ${need.to ?? 'do this'}: your role is ${user.role}`);
  }
  return { user, database };
}

// What people read of people: the users of their organization, for an admin; the login a
// browser's cookie opens.
import { authorize, type AuthorizeDeps } from '../authorize.ts';
import type { PeopleDeps } from './actions.ts';
import type { StoredLoginSession, User } from './store.ts';

/** The users of the actor's organization, oldest first: for an admin (`what`: what the admin is
 * doing, said in a refusal). */
export async function listUsers(deps: PeopleDeps & AuthorizeDeps, actor: User | null, what = 'list people'): Promise<User[]> {
  const { user } = await authorize(deps, actor, { role: 'admin', to: what });
  return deps.stores.people.listUsers(user.organizationId);
}

/** The unexpired login session whose token has this SHA-256 hash (hex), if any. */
export function loginSessionOf(deps: PeopleDeps, tokenHash: string): Promise<StoredLoginSession | null> {
  return deps.stores.people.findLoginSession(tokenHash);
}

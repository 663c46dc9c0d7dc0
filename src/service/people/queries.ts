// What people read of people: the users, for an admin; the login a browser's cookie opens.
import { authorize, type AuthorizeDeps } from '../authorize.ts';
import type { PeopleDeps } from './actions.ts';
import type { LoginSession, User } from './store.ts';

/** Every user, oldest first: for an admin (`what`: what the admin is doing, said in a refusal). */
export async function listUsers(deps: PeopleDeps & AuthorizeDeps, actor: User | null, what = 'list users'): Promise<User[]> {
  await authorize(deps, actor, { admin: what });
  return deps.stores.people.listUsers();
}

/** The unexpired login session whose token has this SHA-256 hash (hex), if any. */
export function loginSessionOf(deps: PeopleDeps, tokenHash: string): Promise<LoginSession | null> {
  return deps.stores.people.findLoginSession(tokenHash);
}

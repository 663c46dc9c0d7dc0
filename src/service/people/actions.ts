// What people do about people, through the JSON API or the HTML forms alike: an admin adds people
// to their own organization, changes their roles and removes them; an organization always keeps
// an admin.
import type { ServiceConfig } from '../app/config.ts';
import { authorize, type AuthorizeDeps } from '../authorize.ts';
import { conflict, notFound } from '../errors.ts';
import type { NewUserInput } from './inputs.ts';
import { generatePassword, hashPassword } from './passwords.ts';
import { recordAudit, type AuditDeps } from '../audit/record.ts';
import { LastAdminError, UsernameTakenError, type Actor, type PeopleStore, type Role, type User } from './store.ts';

/** What the people feature needs: its port. */
export interface PeopleDeps extends AuditDeps {
  stores: { people: PeopleStore } & AuditDeps['stores'];
}

export async function createUser(
  deps: PeopleDeps & AuthorizeDeps,
  actor: Actor,
  input: NewUserInput,
): Promise<{ user: User; password: string | null }> {
  await authorize(deps, actor, { role: 'admin', to: 'add people' });
  const password = input.password ?? generatePassword();
  try {
    const user = await deps.stores.people.createUser(actor.organizationId, input.username, await hashPassword(password), input.role);
    await recordAudit(deps, actor, 'user.created', { userId: user.id, username: user.username, role: user.role });
    return { user, password: input.password ? null : password };
  } catch (err) {
    if (err instanceof UsernameTakenError) throw conflict(`username "${input.username}" is taken`);
    throw err;
  }
}

const noSuchUser = (id: string) => notFound(`no user ${id} in your organization`);
const lastAdmin = (err: unknown): never => {
  if (err instanceof LastAdminError) throw conflict(`${err.message}: make another person an admin first`);
  throw err;
};

/** Changes the role of a user of the actor's organization (the actor's own too, unless they are
 * its last admin). */
export async function setRole(
  deps: PeopleDeps & AuthorizeDeps,
  actor: Actor,
  userId: string,
  role: Role,
): Promise<{ before: User; after: User }> {
  await authorize(deps, actor, { role: 'admin', to: 'change roles' });
  const changed = await deps.stores.people.setRole(actor.organizationId, userId, role).catch(lastAdmin);
  if (!changed) throw noSuchUser(userId);
  const { before, after } = changed;
  await recordAudit(deps, actor, 'user.role_changed', {
    userId,
    username: after.username,
    role: { before: before.role, after: after.role },
  });
  return changed;
}

/** Removes a user of the actor's organization, unless they are its last admin. */
export async function removeUser(deps: PeopleDeps & AuthorizeDeps, actor: Actor, userId: string): Promise<User> {
  await authorize(deps, actor, { role: 'admin', to: 'remove people' });
  const removed = await deps.stores.people.removeUser(actor.organizationId, userId).catch(lastAdmin);
  if (!removed) throw noSuchUser(userId);
  await recordAudit(deps, actor, 'user.removed', { userId, username: removed.username, role: removed.role });
  return removed;
}

/** Creates the first admin on an empty storage; its password is the configured one or generated. */
export async function ensureFirstAdmin(
  { stores, config }: PeopleDeps & { config: Pick<ServiceConfig, 'adminUsername' | 'adminPassword'> },
  announce: (text: string) => void,
): Promise<void> {
  const password = config.adminPassword ?? generatePassword();
  const created = await stores.people.createFirstAdmin(config.adminUsername, await hashPassword(password));
  if (!created) return;
  if (config.adminPassword) announce(`created the admin login "${config.adminUsername}" with the password from TUNER_ADMIN_PASSWORD\n`);
  else announce(`created the admin login (shown once, keep it safe):\n  username: ${config.adminUsername}\n  password: ${password}\n`);
}

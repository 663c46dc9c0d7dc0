// What people do about people, through the JSON API or the HTML forms alike.
import type { ServiceConfig } from '../app/config.ts';
import { authorize, type AuthorizeDeps } from '../authorize.ts';
import { conflict } from '../errors.ts';
import type { NewUserInput } from './inputs.ts';
import { generatePassword, hashPassword } from './passwords.ts';
import { UsernameTakenError, type PeopleStore, type User } from './store.ts';

/** What the people feature needs: its port. */
export interface PeopleDeps {
  stores: { people: PeopleStore };
}

export async function createUser(
  deps: PeopleDeps & AuthorizeDeps,
  actor: User,
  input: NewUserInput,
): Promise<{ user: User; password: string | null }> {
  await authorize(deps, actor, { admin: 'create users' });
  const password = input.password ?? generatePassword();
  try {
    const user = await deps.stores.people.createUser(input.username, await hashPassword(password), input.isAdmin);
    return { user, password: input.password ? null : password };
  } catch (err) {
    if (err instanceof UsernameTakenError) throw conflict(`username "${input.username}" is taken`);
    throw err;
  }
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

// What people do about people, through the JSON API or the HTML forms alike.
import type { ServiceContext } from '../app/context.ts';
import { conflict, forbidden } from '../errors.ts';
import type { NewUserInput } from './inputs.ts';
import { generatePassword, hashPassword } from './passwords.ts';
import { UsernameTakenError, type User } from './store.ts';

export async function createUser(ctx: ServiceContext, actor: User, input: NewUserInput): Promise<{ user: User; password: string | null }> {
  if (!actor.isAdmin) throw forbidden('only an admin can create users');
  const password = input.password ?? generatePassword();
  try {
    const user = await ctx.storage.createUser(input.username, await hashPassword(password), input.isAdmin);
    return { user, password: input.password ? null : password };
  } catch (err) {
    if (err instanceof UsernameTakenError) throw conflict(`username "${input.username}" is taken`);
    throw err;
  }
}

/** Creates the first admin on an empty storage; its password is the configured one or generated. */
export async function ensureFirstAdmin({ storage, config }: ServiceContext, announce: (text: string) => void): Promise<void> {
  const password = config.adminPassword ?? generatePassword();
  const created = await storage.createFirstAdmin(config.adminUsername, await hashPassword(password));
  if (!created) return;
  if (config.adminPassword) announce(`created the admin login "${config.adminUsername}" with the password from TUNER_ADMIN_PASSWORD\n`);
  else announce(`created the admin login (shown once, keep it safe):\n  username: ${config.adminUsername}\n  password: ${password}\n`);
}

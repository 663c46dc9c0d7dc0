// What people may send about people (logging in, creating users), for the JSON API and the HTML
// forms alike.
import { z } from 'zod';
import { ROLES, type Role } from './store.ts';

export const USERNAME_MAX_LENGTH = 64;
/** What a username may be, as the users page's form checks it in the browser too: the pattern
 * attribute is anchored by the browser and compiled with the v flag, where a '-' in a class is
 * escaped. */
export const USERNAME_HTML_PATTERN = `[A-Za-z0-9._@\\-]{1,${USERNAME_MAX_LENGTH}}`;
/** The usernames the service creates: the admin's (TUNER_ADMIN_USERNAME) and the users'. */
export const UsernameSchema = z
  .string()
  .regex(new RegExp(`^${USERNAME_HTML_PATTERN}$`), `expected 1 to ${USERNAME_MAX_LENGTH} letters, digits or ._@-`);

export const LoginInputSchema = z.strictObject({
  username: z.string().min(1, 'expected a username').max(USERNAME_MAX_LENGTH),
  password: z.string().min(1, 'expected a password').max(200),
});

export const RoleSchema = z.enum(ROLES, { error: `expected one of ${ROLES.join(', ')}` });

export const NewUserInputSchema = z
  .strictObject({
    username: UsernameSchema,
    /** Generated (and returned once) when absent. */
    password: z.string().min(12, 'expected at least 12 characters').max(200).optional(),
    role: RoleSchema.optional(),
    /** Deprecated, accepted for one release: a request without a role is read as before roles,
     * isAdmin true as role admin, otherwise role operator (what a user who was not an admin could
     * do then). */
    isAdmin: z.boolean().optional(),
  })
  .superRefine((input, ctx) => {
    if (input.role !== undefined && input.isAdmin !== undefined && (input.role === 'admin') !== input.isAdmin)
      ctx.addIssue({ code: 'custom', path: ['isAdmin'], message: 'contradicts role: send role only (isAdmin is deprecated)' });
  })
  .transform(({ username, password, role, isAdmin }) => ({
    username,
    ...(password !== undefined && { password }),
    role: role ?? (isAdmin ? 'admin' : 'operator'),
  }));

export const RoleInputSchema = z.strictObject({ role: RoleSchema });

export type LoginInput = z.infer<typeof LoginInputSchema>;
export type NewUserInput = { username: string; password?: string; role: Role };

// What people may send about people (logging in, creating users), for the JSON API and the HTML
// forms alike.
import { z } from 'zod';

export const USERNAME_PATTERN = /^[A-Za-z0-9._@-]{1,64}$/;

export const LoginInputSchema = z.strictObject({
  username: z.string().min(1, 'expected a username').max(64),
  password: z.string().min(1, 'expected a password').max(200),
});

export const NewUserInputSchema = z.strictObject({
  username: z.string().regex(USERNAME_PATTERN, 'expected 1 to 64 letters, digits or ._@-'),
  /** Generated (and returned once) when absent. */
  password: z.string().min(12, 'expected at least 12 characters').max(200).optional(),
  isAdmin: z.boolean().default(false),
});

export type LoginInput = z.infer<typeof LoginInputSchema>;
export type NewUserInput = z.infer<typeof NewUserInputSchema>;

// Logging in, the same for the JSON API and the login page.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { verifyAgainstNothing, verifyPassword } from '../auth/passwords.ts';
import type { ServiceContext } from '../context.ts';
import type { LoginInput } from '../inputs.ts';
import type { Session } from '../storage/storage.ts';
import { HttpError } from './errors.ts';
import { startSession, type LoginThrottle } from './sessions.ts';

export async function logIn(ctx: ServiceContext, throttle: LoginThrottle, request: FastifyRequest, reply: FastifyReply, input: LoginInput): Promise<Session> {
  const keys = [`${request.ip}|${input.username.toLowerCase()}`];
  if (throttle.blocked(keys)) {
    throw new HttpError(429, 'rate_limited', 'too many failed logins for this username: wait 15 minutes and try again');
  }
  const found = await ctx.storage.findUserForLogin(input.username);
  const ok = found ? await verifyPassword(input.password, found.passwordHash) : await verifyAgainstNothing(input.password);
  if (!found || !ok) {
    throttle.fail(keys);
    throw new HttpError(401, 'unauthorized', 'wrong username or password');
  }
  throttle.succeed(keys);
  return startSession(ctx, request, reply, found.user);
}

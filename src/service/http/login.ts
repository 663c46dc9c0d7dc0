// Logging in, the same for the JSON API and the login page.
import type { FastifyReply, FastifyRequest } from 'fastify';
import { verifyAgainstNothing, verifyPassword } from '../people/passwords.ts';
import type { ServiceContext } from '../app/context.ts';
import type { LoginInput } from '../databases/inputs.ts';
import type { LoginSession } from '../people/store.ts';
import { HttpError } from './errors.ts';
import { startLoginSession, type LoginThrottle } from './login-sessions.ts';

/** Checks a login against the throttle, then the password. `request.ip` is the client's address
 * as the configured proxies tell it (TUNER_TRUST_PROXY), never what the client claims. */
export async function logIn(ctx: ServiceContext, throttle: LoginThrottle, request: FastifyRequest, reply: FastifyReply, input: LoginInput): Promise<LoginSession> {
  const wait = throttle.retryAfterSeconds(request.ip, input.username);
  if (wait > 0) {
    void reply.header('retry-after', String(wait));
    throw new HttpError(429, 'rate_limited', `too many failed logins from this address or for this username: try again in ${Math.ceil(wait / 60)} minute(s)`);
  }
  const found = await ctx.storage.findUserForLogin(input.username);
  const ok = found ? await verifyPassword(input.password, found.passwordHash) : await verifyAgainstNothing(input.password);
  if (!found || !ok) {
    throttle.fail(request.ip, input.username);
    throw new HttpError(401, 'unauthorized', 'wrong username or password');
  }
  throttle.succeed(request.ip, input.username);
  return startLoginSession(ctx, request, reply, found.user);
}

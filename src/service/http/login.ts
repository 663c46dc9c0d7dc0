// Logging in over HTTP, the same for the JSON API and the login page: people/login.ts decides,
// this starts the login session (its cookie) and says when to try again.
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ServiceContext } from '../app/context.ts';
import { ServiceError } from '../errors.ts';
import type { LoginInput } from '../people/inputs.ts';
import { authenticate } from '../people/login.ts';
import type { LoginSession } from '../people/store.ts';
import type { LoginThrottle } from '../people/throttle.ts';
import { startLoginSession } from './login-sessions.ts';

export async function logIn(
  ctx: ServiceContext,
  throttle: LoginThrottle,
  request: FastifyRequest,
  reply: FastifyReply,
  input: LoginInput,
): Promise<LoginSession> {
  try {
    return await startLoginSession(ctx, request, reply, await authenticate(ctx, throttle, request.ip, input));
  } catch (err) {
    if (err instanceof ServiceError && err.retryAfterSeconds !== null) void reply.header('retry-after', String(err.retryAfterSeconds));
    throw err;
  }
}

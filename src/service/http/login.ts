// Logging in over HTTP, the same for the JSON API and the login page: people/login.ts decides,
// this starts the login session (its cookie), gives the device its device cookie (so that the
// throttle knows it at its next login) and says when to try again. Whoever asks, the body
// of a login is small: at most LOGIN_BODY_BYTES, whatever the routes' other bodies may be.
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ServiceContext } from '../app/context.ts';
import { ServiceError } from '../errors.ts';
import type { LoginInput } from '../people/inputs.ts';
import { authenticate } from '../people/login.ts';
import type { LoginSession } from '../people/store.ts';
import type { LoginThrottle } from '../people/throttle.ts';
import { isHttps, startLoginSession } from './login-sessions.ts';
import { refuseUnstorableText } from './storable.ts';

/** A username of at most 64 characters and a password of at most 200, even written as JSON
 * escapes (6 bytes a character), with room to spare; the login form's CSRF token fits too. */
export const LOGIN_BODY_BYTES = 4096;

/** Names the device and the user it logged in as (people/devices.ts); sent only to this site. */
export const DEVICE_COOKIE = 'tuner_device';
const DEVICE_COOKIE_DAYS = 365;

export async function logIn(
  ctx: ServiceContext,
  throttle: LoginThrottle,
  request: FastifyRequest,
  reply: FastifyReply,
  input: LoginInput,
  where: 'body' | 'form',
): Promise<LoginSession> {
  // A username PostgreSQL cannot store is refused here, before it is looked up.
  refuseUnstorableText(null, input, where);
  try {
    const { user, deviceToken } = await authenticate(ctx, throttle, request.ip, input, request.cookies[DEVICE_COOKIE]);
    reply.setCookie(DEVICE_COOKIE, deviceToken, {
      httpOnly: true,
      sameSite: 'strict',
      secure: isHttps(ctx, request),
      path: '/',
      maxAge: DEVICE_COOKIE_DAYS * 86_400,
    });
    return await startLoginSession(ctx, request, reply, user, 'password');
  } catch (err) {
    if (err instanceof ServiceError && err.retryAfterSeconds !== null) void reply.header('retry-after', String(err.retryAfterSeconds));
    throw err;
  }
}

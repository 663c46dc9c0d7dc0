// Who is logging in: the throttle first (a refused attempt costs no password hashing), then the
// password. The same for the JSON API and the login page.
import type { ServiceContext } from '../app/context.ts';
import { ServiceError, unauthorized } from '../errors.ts';
import type { LoginInput } from './inputs.ts';
import { verifyAgainstNothing, verifyPassword } from './passwords.ts';
import type { User } from './store.ts';
import type { LoginThrottle } from './throttle.ts';

/** `address` is the client's address as the configured proxies tell it (TUNER_TRUST_PROXY), never what the client claims. */
export async function authenticate(ctx: ServiceContext, throttle: LoginThrottle, address: string, input: LoginInput): Promise<User> {
  const wait = throttle.retryAfterSeconds(address, input.username);
  if (wait > 0) {
    throw new ServiceError(
      'rate_limited',
      `too many failed logins from this address or for this username: try again in ${Math.ceil(wait / 60)} minute(s)`,
      wait,
    );
  }
  const found = await ctx.storage.findUserForLogin(input.username);
  const ok = found ? await verifyPassword(input.password, found.passwordHash) : await verifyAgainstNothing(input.password);
  if (!found || !ok) {
    throttle.fail(address, input.username);
    throw unauthorized('wrong username or password');
  }
  throttle.succeed(address, input.username);
  return found.user;
}

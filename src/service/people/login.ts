// Who is logging in: the user and their device first (a database lookup, no password hashing),
// then the throttle (a refused attempt costs no password hashing), then the password. The same
// for the JSON API and the login page.
import { ServiceError, unauthorized } from '../errors.ts';
import type { PeopleDeps } from './actions.ts';
import { deviceOf, issueDeviceToken } from './devices.ts';
import type { LoginInput } from './inputs.ts';
import { verifyAgainstNothing, verifyPassword } from './passwords.ts';
import type { LoginSession, User } from './store.ts';
import type { LoginThrottle } from './throttle.ts';

export interface Authenticated {
  user: User;
  /** The device token to give the client (people/devices.ts), which it presents at its next login. */
  deviceToken: string;
}

/** `address` is the client's address as the configured proxies tell it (TUNER_TRUST_PROXY), never
 * what the client claims; `deviceToken` the token it got at an earlier login, if any. */
export async function authenticate(
  deps: PeopleDeps,
  throttle: LoginThrottle,
  address: string,
  input: LoginInput,
  deviceToken: string | undefined,
): Promise<Authenticated> {
  const found = await deps.stores.people.findUserForLogin(input.username);
  const attempt = { address, username: input.username, device: found && deviceOf(deviceToken, found.user.id, found.passwordHash) };
  const wait = throttle.retryAfterSeconds(attempt);
  if (wait > 0) {
    throw new ServiceError(
      'rate_limited',
      `too many failed logins from this address or for this username: try again in ${Math.ceil(wait / 60)} minute(s)`,
      wait,
    );
  }
  const ok = found ? await verifyPassword(input.password, found.passwordHash) : await verifyAgainstNothing(input.password);
  if (!found || !ok) {
    throttle.fail(attempt);
    throw unauthorized('wrong username or password');
  }
  throttle.succeed(attempt);
  return { user: found.user, deviceToken: issueDeviceToken(found.user.id, found.passwordHash) };
}

/** Stores a login session (only its token's hash) for the user who just logged in. */
export async function recordLoginSession(deps: PeopleDeps, tokenHash: string, login: LoginSession): Promise<void> {
  await deps.stores.people.createLoginSession(tokenHash, login.user.id, login.csrfToken, login.expiresAt);
}

/** Logging out: the login session with this token hash is forgotten. */
export function forgetLoginSession(deps: PeopleDeps, tokenHash: string): Promise<void> {
  return deps.stores.people.deleteLoginSession(tokenHash);
}

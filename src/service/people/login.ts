// Who is logging in: the user and their device first (a database lookup, no password hashing),
// then the throttle (a refused attempt costs no password hashing), then the password. The same
// for the JSON API and the login page.
import type { ServiceConfig } from '../app/config.ts';
import { ServiceError, forbidden, unauthorized } from '../errors.ts';
import type { PeopleDeps } from './actions.ts';
import { deviceOf, issueDeviceToken } from './devices.ts';
import type { LoginInput } from './inputs.ts';
import { verifyAgainstNothing, verifyPassword } from './passwords.ts';
import type { Actor, LoginSession, User } from './store.ts';
import { recordAudit, recordLoginAttempt, type AuditDeps } from '../audit/record.ts';
import type { LoginThrottle } from './throttle.ts';

export interface Authenticated {
  user: User;
  /** The device token to give the client (people/devices.ts), which it presents at its next login. */
  deviceToken: string;
}

/** `address` is the client's address as the configured proxies tell it (TUNER_TRUST_PROXY), never
 * what the client claims; `deviceToken` the token it got at an earlier login, if any. */
export async function authenticate(
  deps: PeopleDeps & AuditDeps & { config: Pick<ServiceConfig, 'passwordLogin' | 'sso'> },
  throttle: LoginThrottle,
  address: string,
  input: LoginInput,
  deviceToken: string | undefined,
): Promise<Authenticated> {
  const { passwordLogin } = deps.config;
  /** Who the audit log says tried: the username, and the user and organization when it names one. */
  const trying = (found: { user: User } | null) => ({
    username: input.username,
    address,
    organizationId: found?.user.organizationId ?? null,
    userId: found?.user.id ?? null,
    via: 'password' as const,
  });
  if (!passwordLogin.enabled && input.username !== passwordLogin.breakGlassAdmin) {
    // Refused before any password is checked: the answer says nothing of the password.
    const found = await deps.stores.people.findUserForLogin(input.username);
    await recordLoginAttempt(deps, trying(found), 'login.refused', { reason: 'password login is off' });
    throw forbidden(`password login is off: log in with ${deps.config.sso?.name ?? 'single sign-on'}`);
  }
  const found = await deps.stores.people.findUserForLogin(input.username);
  const attempt = { address, username: input.username, device: found && deviceOf(deviceToken, found.user.id, found.passwordHash) };
  // Counted as a failure already, unless refused: attempts made at once take turns (throttle.ts).
  const { wait, counted, firstRefusal } = await throttle.begin(attempt);
  if (wait > 0) {
    // The first refusal of a lockout is recorded; the flood behind it is not (it costs no password
    // check, and must not cost a write each).
    if (firstRefusal) {
      await recordLoginAttempt(deps, trying(found), 'login.refused', { reason: 'too many failed logins', retryAfterSeconds: wait });
    }
    throw new ServiceError(
      'rate_limited',
      `too many failed logins from this address or for this username: try again in ${Math.ceil(wait / 60)} minute(s)`,
      wait,
    );
  }
  const ok = found ? await verifyPassword(input.password, found.passwordHash) : await verifyAgainstNothing(input.password);
  if (!found || !ok) {
    await recordLoginAttempt(deps, trying(found), 'login.refused', { reason: found ? 'wrong password' : 'no such user' });
    throw unauthorized('wrong username or password');
  }
  await throttle.succeed(attempt, counted);
  await recordLoginAttempt(deps, trying(found), 'login');
  return { user: found.user, deviceToken: issueDeviceToken(found.user.id, found.passwordHash) };
}

/** Stores a login session (only its token's hash) for the user who just logged in. */
export async function recordLoginSession(deps: PeopleDeps, tokenHash: string, login: LoginSession): Promise<void> {
  const via = login.user.via === 'sso' ? 'sso' : 'password';
  await deps.stores.people.createLoginSession(tokenHash, login.user.id, via, login.csrfToken, login.expiresAt);
}

/** Logging out: the login session with this token hash is forgotten (and the log says who left). */
export async function forgetLoginSession(deps: PeopleDeps & AuditDeps, tokenHash: string, actor: Actor | null): Promise<void> {
  await deps.stores.people.deleteLoginSession(tokenHash);
  if (actor) await recordAudit(deps, actor, 'logout');
}

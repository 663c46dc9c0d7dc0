// Signing in through single sign-on, once the provider's answer is checked (sso-client.ts): the
// person's groups give their role (on every sign-in, so that a change at the provider follows),
// the user is found by the provider's issuer and subject or created in the configured
// organization, and the audit log records the sign-in or the refusal and why. A person none of
// whose groups has a role (and no default role) is refused: no account is created.
import { createHash } from 'node:crypto';
import type { SsoConfig } from '../app/config.ts';
import { recordAudit, recordLoginAttempt, type AuditDeps } from '../audit/record.ts';
import type { PeopleDeps } from './actions.ts';
import { USERNAME_MAX_LENGTH } from './inputs.ts';
import { SsoRefusal, type SsoClaims } from './sso-client.ts';
import { LastAdminError, ROLES, UsernameTakenError, type Actor, type Role, type User } from './store.ts';

/** The groups a claim lists: an array of names (or ids, as Entra ID sends), or one name. */
export function groupsOf(claims: SsoClaims, claim: string): string[] {
  const value = claims[claim];
  if (typeof value === 'string') return [value];
  return Array.isArray(value) ? value.filter((g): g is string => typeof g === 'string') : [];
}

/**
 * Whether the provider left the groups out and pointed elsewhere for them instead: Entra ID's
 * "groups overage" (more than 200 groups in a token) puts the claim's name in `_claim_names`
 * (OpenID Connect Core 5.6.2, distributed claims) and no list. Reading the list would take a
 * Microsoft Graph call the service does not make; taking "no groups" for the answer would give
 * the person the default role, or take away the role their groups give them.
 */
export function groupsElsewhere(claims: SsoClaims, claim: string): boolean {
  const names = claims['_claim_names'];
  return claims[claim] === undefined && typeof names === 'object' && names !== null && claim in names;
}

/** The highest role any of the groups maps to, else the default role (null: none). */
export function roleOf(sso: Pick<SsoConfig, 'roles' | 'defaultRole'>, groups: readonly string[]): Role | null {
  const mapped = groups.map((g) => sso.roles.get(g)).filter((r): r is Role => r !== undefined);
  if (mapped.length === 0) return sso.defaultRole;
  return mapped.reduce((a, b) => (ROLES.indexOf(a) >= ROLES.indexOf(b) ? a : b));
}

/** The username the person gets: what the provider calls them, in the characters a username may
 * have. */
export function usernameOf(claims: SsoClaims): string {
  const named = [claims['preferred_username'], claims['email'], claims['name']].find(
    (v): v is string => typeof v === 'string' && v.trim() !== '',
  );
  const base = (named ?? claims.sub).trim().replace(/[^A-Za-z0-9._@-]+/g, '-');
  return base.slice(0, USERNAME_MAX_LENGTH) || 'sso-user';
}

/** The username with a suffix of the subject's hash, for when a local user has the name. */
function distinctUsername(username: string, issuer: string, subject: string): string {
  const suffix = createHash('sha256').update(`${issuer} ${subject}`).digest('hex').slice(0, 8);
  return `${username.slice(0, USERNAME_MAX_LENGTH - 9)}-${suffix}`;
}

/** The email's domain must be allowed, and the email verified (unless the provider does not say). */
function checkEmail(sso: SsoConfig, claims: SsoClaims): void {
  if (sso.emailDomains.length === 0) return;
  const email = typeof claims['email'] === 'string' ? claims['email'].toLowerCase() : '';
  const domain = email.includes('@') ? email.slice(email.lastIndexOf('@') + 1) : '';
  const allowed = sso.emailDomains.join(' or ');
  if (!sso.emailDomains.includes(domain)) {
    throw new SsoRefusal(
      `Your email (${email || 'none given'}) is not at ${allowed}: this tuning service does not accept it.`,
      `email domain not allowed: ${domain || 'none'}`,
      403,
    );
  }
  if (claims['email_verified'] === false) {
    throw new SsoRefusal(
      `Your email (${email}) is not verified at the provider: verify it, then sign in again.`,
      'email not verified',
      403,
    );
  }
}

/** Records a sign-in refused before the provider's answer named anyone (a mismatched state or
 * nonce, a forged cookie), in the organization SSO users join, so that its admins see it. */
export async function recordSsoRefusal(deps: PeopleDeps & AuditDeps, sso: SsoConfig, address: string, reason: string): Promise<void> {
  const organizationId = await deps.stores.people.findOrganizationByName(sso.organization);
  await recordLoginAttempt(deps, { username: UNKNOWN_PERSON, address, organizationId, userId: null, via: 'sso' }, 'login.refused', {
    reason,
  });
}

/** Who a refused sign-in is recorded as when the provider's answer named nobody it checked. */
const UNKNOWN_PERSON = '(single sign-on)';

/**
 * The user the person signs in as, created or updated; throws SsoRefusal (recorded in the audit
 * log) when their email or groups give them no place here.
 */
export async function signInWithSso(deps: PeopleDeps & AuditDeps, sso: SsoConfig, claims: SsoClaims, address: string): Promise<User> {
  const username = usernameOf(claims);
  const groups = groupsOf(claims, sso.groupsClaim);
  const link = { issuer: sso.issuer, subject: claims.sub };
  const organizationId = await deps.stores.people.findOrganizationByName(sso.organization);
  const refuse = async (refusal: SsoRefusal, user: User | null = null): Promise<never> => {
    await recordLoginAttempt(
      deps,
      { username, address, organizationId: user?.organizationId ?? organizationId, userId: user?.id ?? null, via: 'sso' },
      'login.refused',
      { reason: refusal.reason, groups },
    );
    throw refusal;
  };
  try {
    checkEmail(sso, claims);
  } catch (err) {
    return refuse(err as SsoRefusal);
  }
  if (groupsElsewhere(claims, sso.groupsClaim)) {
    return refuse(
      new SsoRefusal(
        `You signed in as ${username}, but the provider sent a reference to your groups (claim "${sso.groupsClaim}") instead of the list, as Entra ID does for someone in more than 200 groups. Ask its admin to emit only the groups assigned to this application (docs/people.md, Microsoft Entra ID).`,
        'groups not listed (overage)',
        403,
      ),
    );
  }
  const role = roleOf(sso, groups);
  if (!role) {
    const listed = groups.length > 0 ? `your groups (${groups.join(', ')})` : `the provider listed no groups (claim "${sso.groupsClaim}")`;
    return refuse(
      new SsoRefusal(
        `You signed in as ${username}, but ${listed} give you no role in this tuning service. Ask its admin to map one of your groups to a role.`,
        'no mapped group',
        403,
      ),
    );
  }
  if (!organizationId) {
    return refuse(
      new SsoRefusal(
        `Single sign-on is misconfigured: there is no organization named "${sso.organization}" (TUNER_SSO_ORGANIZATION).`,
        'no such organization',
        500,
      ),
    );
  }
  let found: { user: User; created: boolean };
  try {
    found = await deps.stores.people.upsertSsoUser(link, organizationId, username, role);
  } catch (err) {
    if (!(err instanceof UsernameTakenError)) throw err;
    found = await deps.stores.people.upsertSsoUser(link, organizationId, distinctUsername(username, link.issuer, link.subject), role);
  }
  let user = found.user;
  const actor = (u: User): Actor => ({ ...u, via: 'sso', address, token: null });
  if (found.created) {
    await recordAudit(deps, actor(user), 'user.created', { userId: user.id, username: user.username, role, by: 'single sign-on', groups });
  } else if (user.role !== role) {
    try {
      const changed = await deps.stores.people.setRole(user.organizationId, user.id, role);
      if (changed) {
        user = changed.after;
        await recordAudit(deps, actor(user), 'user.role_changed', {
          userId: user.id,
          username: user.username,
          role: { before: changed.before.role, after: changed.after.role },
          by: 'single sign-on groups',
          groups,
        });
      }
    } catch (err) {
      if (!(err instanceof LastAdminError)) throw err;
      return refuse(
        new SsoRefusal(
          `Your groups now make you ${role}, but you are the organization's last admin: make another person an admin first.`,
          'last admin would lose the role',
          409,
        ),
        user,
      );
    }
  }
  await recordLoginAttempt(
    deps,
    { username: user.username, address, organizationId: user.organizationId, userId: user.id, via: 'sso' },
    'login',
    { role: user.role, groups },
  );
  return user;
}

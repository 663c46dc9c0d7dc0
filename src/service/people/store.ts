// What the people feature asks of its storage: organizations, their users (each with a role in
// their organization), and login sessions (a browser's or an API client's, not a tuning session).

/** What a person may do in their organization (authorize.ts): each role may what the one before may. */
export const ROLES = ['viewer', 'operator', 'admin'] as const;
export type Role = (typeof ROLES)[number];

export interface User {
  id: string;
  organizationId: string;
  username: string;
  role: Role;
  createdAt: Date;
}

/** How a person proved who they are: a password, single sign-on, or an API token. */
export type LoginVia = 'password' | 'sso' | 'token';

/** Who acts in a request: the user (or, for an API token, the token in the organization with the
 * token's role, named after it), how they logged in and from which address. The audit log records
 * each action under it. */
export interface Actor extends User {
  via: LoginVia;
  /** The client's address as the trusted proxies tell it; null when not over HTTP. */
  address: string | null;
  /** The API token the request presented, if any (then `id` is its maker's user id). */
  token: { id: string; name: string } | null;
}

export interface LoginSession {
  user: Actor;
  csrfToken: string;
  expiresAt: Date;
}

/** A login session as stored: its user and how they logged in. */
export interface StoredLoginSession {
  user: User;
  via: LoginVia;
  csrfToken: string;
  expiresAt: Date;
}

export interface PeopleStore {
  /** Creates the first admin, in an organization of their own, unless a user exists; true when
   * created (both under a lock). */
  createFirstAdmin(username: string, passwordHash: string): Promise<boolean>;
  /** A new organization with its first user, its admin. Throws UsernameTakenError. */
  createOrganization(name: string, adminUsername: string, passwordHash: string): Promise<User>;
  /** A user of this organization. Throws UsernameTakenError. */
  createUser(organizationId: string, username: string, passwordHash: string, role: Role): Promise<User>;
  findUserForLogin(username: string): Promise<{ user: User; passwordHash: string } | null>;
  /** The organization's users, oldest first. */
  listUsers(organizationId: string): Promise<User[]>;
  getUser(organizationId: string, userId: string): Promise<User | null>;
  /** Changes a user's role, unless that leaves the organization without an admin (the check and
   * the change under the organization's row lock). The user as changed; null when there is no such
   * user in the organization. Throws LastAdminError. */
  setRole(organizationId: string, userId: string, role: Role): Promise<{ before: User; after: User } | null>;
  /** Removes a user (and their login sessions), unless that leaves the organization without an
   * admin. The user removed; null when there is no such user. Throws LastAdminError. */
  removeUser(organizationId: string, userId: string): Promise<User | null>;
  /** The id of the organization with this name; null unless exactly one has it. */
  findOrganizationByName(name: string): Promise<string | null>;
  /** The user linked to this provider's subject; created in the organization with `role` and a
   * password no one knows when new (`created`), renamed to `username` when the provider renamed
   * them and the name is free. Throws UsernameTakenError when a new user's name is taken. */
  upsertSsoUser(link: SsoLink, organizationId: string, username: string, role: Role): Promise<{ user: User; created: boolean }>;
  createLoginSession(tokenHash: string, userId: string, via: LoginVia, csrfToken: string, expiresAt: Date): Promise<void>;
  findLoginSession(tokenHash: string): Promise<StoredLoginSession | null>;
  deleteLoginSession(tokenHash: string): Promise<void>;
}

/** Who a person is at an OpenID provider: its issuer and their subject there (the `sub` claim). */
export interface SsoLink {
  issuer: string;
  subject: string;
}

/** An API token for automation: a role in its organization, until it expires or is revoked. Only
 * its hash is stored; it acts on behalf of the admin who made it (removing them removes it). */
export interface ApiToken {
  id: string;
  organizationId: string;
  name: string;
  role: Role;
  displayPrefix: string;
  createdBy: string;
  createdAt: Date;
  expiresAt: Date;
  revokedAt: Date | null;
  lastUsedAt: Date | null;
}

export interface ApiTokenStore {
  /** Throws TokenNameTakenError when a live token of the organization has the name. */
  createApiToken(token: Omit<ApiToken, 'createdAt' | 'revokedAt' | 'lastUsedAt'> & { tokenHash: string }): Promise<ApiToken>;
  listApiTokens(organizationId: string): Promise<ApiToken[]>;
  /** The token revoked now; null when there is no live token of that id in the organization. */
  revokeApiToken(organizationId: string, tokenId: string): Promise<ApiToken | null>;
  /** The token with this hash (revoked or expired too: the caller says why it is refused), and
   * the user it acts for; its last use is noted. */
  findApiToken(tokenHash: string): Promise<{ token: ApiToken; maker: User } | null>;
}

export class TokenNameTakenError extends Error {
  override name = 'TokenNameTakenError';
}

export class UsernameTakenError extends Error {
  override name = 'UsernameTakenError';
}

/** The change would leave an organization with no admin. */
export class LastAdminError extends Error {
  override name = 'LastAdminError';
}

/** Failed logins under one key (an address, a username, a pair, a device: people/throttle.ts),
 * counted in the storage so that every replica sees the same count. */
export interface LoginFailureCount {
  failures: number;
  /** When the window that began with the count's first failure ends. */
  expiresAt: Date;
}

export interface LoginFailureStore {
  /** The counts of these keys whose window has not ended at `at`. */
  loginFailures(keys: readonly string[], at: Date): Promise<Map<string, LoginFailureCount>>;
  /** One failure more under each key, in one statement (replicas counting at once both count); a
   * count whose window has ended starts again at 1, with a window of `windowMs` from `at`. */
  countLoginFailure(keys: readonly string[], at: Date, windowMs: number): Promise<void>;
  forgetLoginFailures(keys: readonly string[]): Promise<void>;
  /** In one transaction: reads the counts of `keys` with their rows locked (attempts for the
   * same keys on any replica take turns), lets `decide` name the keys to count one failure more
   * under (none: nothing is written), and counts them as countLoginFailure does. The counts read. */
  countLoginAttempt(
    keys: readonly string[],
    at: Date,
    windowMs: number,
    decide: (counts: ReadonlyMap<string, LoginFailureCount>) => readonly string[],
  ): Promise<Map<string, LoginFailureCount>>;
  /** One failure fewer under each key whose window has not ended at `at` (an attempt counted
   * in advance that turned out right). */
  uncountLoginFailure(keys: readonly string[], at: Date): Promise<void>;
}

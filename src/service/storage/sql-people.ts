// The people's storage: organizations, their users (each with a role) and login sessions.
import { randomUUID } from 'node:crypto';
import {
  LastAdminError,
  UsernameTakenError,
  type PeopleStore,
  type StoredLoginSession,
  type LoginVia,
  type Role,
  type SsoLink,
  type User,
} from '../people/store.ts';
import { NO_PASSWORD } from '../people/passwords.ts';
import type { Queryable, SqlDriver } from './driver.ts';
import { isUniqueViolation, one, toUser, type UserRow } from './sql-rows.ts';

/** Serializes the creation of the first admin across replicas. */
const FIRST_ADMIN_LOCK_KEY = 0x74756e6573;

const USER_COLUMNS = 'id, organization_id, username, role, created_at';

async function insertUser(q: Queryable, organizationId: string, username: string, passwordHash: string, role: Role): Promise<User> {
  const row = await one<UserRow>(
    q,
    `INSERT INTO users (id, organization_id, username, password_hash, role) VALUES ($1::uuid, $2::uuid, $3, $4, $5)
     RETURNING ${USER_COLUMNS}`,
    [randomUUID(), organizationId, username, passwordHash, role],
  );
  return toUser(row!);
}

async function insertOrganization(q: Queryable, name: string, adminUsername: string, passwordHash: string): Promise<User> {
  const organizationId = randomUUID();
  await q.query('INSERT INTO organizations (id, name) VALUES ($1::uuid, $2)', [organizationId, name]);
  return insertUser(q, organizationId, adminUsername, passwordHash, 'admin');
}

async function usernameTaken<T>(username: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (isUniqueViolation(err)) throw new UsernameTakenError(`username "${username}" is taken`);
    throw err;
  }
}

/** Locks the organization's row (so that two changes of roles cannot each leave the other as the
 * last admin) and says whether another admin than `userId` remains. */
async function anotherAdmin(q: Queryable, organizationId: string, userId: string): Promise<boolean> {
  await q.query('SELECT id FROM organizations WHERE id = $1::uuid FOR UPDATE', [organizationId]);
  const row = await one<{ n: number }>(
    q,
    `SELECT count(*)::int AS n FROM users WHERE organization_id = $1::uuid AND role = 'admin' AND id <> $2::uuid`,
    [organizationId, userId],
  );
  return (row?.n ?? 0) > 0;
}

export function createPeopleStore(driver: SqlDriver): PeopleStore {
  const db: Queryable = driver;
  const getUser = async (q: Queryable, organizationId: string, userId: string) => {
    const row = await one<UserRow>(q, `SELECT ${USER_COLUMNS} FROM users WHERE organization_id = $1::uuid AND id = $2::uuid`, [
      organizationId,
      userId,
    ]);
    return row && toUser(row);
  };
  return {
    createFirstAdmin: (username, passwordHash) =>
      driver.withAdvisoryLock(FIRST_ADMIN_LOCK_KEY, async (conn) => {
        const existing = await one(conn, 'SELECT 1 AS ok FROM users LIMIT 1', []);
        if (existing) return false;
        await conn.transaction((tx) => insertOrganization(tx, username, username, passwordHash));
        return true;
      }),

    createOrganization: (name, adminUsername, passwordHash) =>
      usernameTaken(adminUsername, () => driver.transaction((tx) => insertOrganization(tx, name, adminUsername, passwordHash))),

    createUser: (organizationId, username, passwordHash, role) =>
      usernameTaken(username, () => insertUser(db, organizationId, username, passwordHash, role)),

    async findUserForLogin(username) {
      const row = await one<UserRow & { password_hash: string }>(
        db,
        `SELECT ${USER_COLUMNS}, password_hash FROM users WHERE username = $1`,
        [username],
      );
      return row ? { user: toUser(row), passwordHash: row.password_hash } : null;
    },

    async listUsers(organizationId) {
      const rows = await db.query<UserRow>(
        `SELECT ${USER_COLUMNS} FROM users WHERE organization_id = $1::uuid ORDER BY created_at, username`,
        [organizationId],
      );
      return rows.map(toUser);
    },

    getUser: (organizationId, userId) => getUser(db, organizationId, userId),

    setRole: (organizationId, userId, role) =>
      driver.transaction(async (tx) => {
        const before = await getUser(tx, organizationId, userId);
        if (!before) return null;
        if (before.role === 'admin' && role !== 'admin' && !(await anotherAdmin(tx, organizationId, userId))) {
          throw new LastAdminError(`${before.username} is the organization's last admin`);
        }
        const row = await one<UserRow>(
          tx,
          `UPDATE users SET role = $3 WHERE organization_id = $1::uuid AND id = $2::uuid RETURNING ${USER_COLUMNS}`,
          [organizationId, userId, role],
        );
        return { before, after: toUser(row!) };
      }),

    removeUser: (organizationId, userId) =>
      driver.transaction(async (tx) => {
        const user = await getUser(tx, organizationId, userId);
        if (!user) return null;
        if (user.role === 'admin' && !(await anotherAdmin(tx, organizationId, userId))) {
          throw new LastAdminError(`${user.username} is the organization's last admin`);
        }
        await tx.query('DELETE FROM users WHERE organization_id = $1::uuid AND id = $2::uuid', [organizationId, userId]);
        return user;
      }),

    async findOrganizationByName(name) {
      const rows = await db.query<{ id: string }>('SELECT id FROM organizations WHERE name = $1 LIMIT 2', [name]);
      return rows.length === 1 ? rows[0]!.id : null;
    },

    upsertSsoUser: (link: SsoLink, organizationId: string, username: string, role: Role) =>
      driver.transaction(async (tx) => {
        const row = await one<UserRow>(tx, `SELECT ${USER_COLUMNS} FROM users WHERE sso_issuer = $1 AND sso_subject = $2 FOR UPDATE`, [
          link.issuer,
          link.subject,
        ]);
        if (!row) {
          const user = await usernameTaken(username, async () => {
            const created = await one<UserRow>(
              tx,
              `INSERT INTO users (id, organization_id, username, password_hash, role, sso_issuer, sso_subject)
               VALUES ($1::uuid, $2::uuid, $3, $4, $5, $6, $7) RETURNING ${USER_COLUMNS}`,
              [randomUUID(), organizationId, username, NO_PASSWORD, role, link.issuer, link.subject],
            );
            return toUser(created!);
          });
          return { user, created: true };
        }
        if (row.username === username) return { user: toUser(row), created: false };
        // Renamed at the provider: the new name, unless another user has it.
        const renamed = await one<UserRow>(
          tx,
          `UPDATE users SET username = $2 WHERE id = $1::uuid AND NOT EXISTS (SELECT 1 FROM users WHERE username = $2)
           RETURNING ${USER_COLUMNS}`,
          [row.id, username],
        );
        return { user: toUser(renamed ?? row), created: false };
      }),

    async createLoginSession(tokenHash, userId, via, csrfToken, expiresAt) {
      await db.query(
        'INSERT INTO login_sessions (token_hash, user_id, via, csrf_token, expires_at) VALUES ($1, $2::uuid, $3, $4, $5::timestamptz)',
        [tokenHash, userId, via, csrfToken, expiresAt.toISOString()],
      );
    },

    async findLoginSession(tokenHash) {
      const row = await one<UserRow & { via: LoginVia; csrf_token: string; expires_at: Date }>(
        db,
        `SELECT u.id, u.organization_id, u.username, u.role, u.created_at, s.via, s.csrf_token, s.expires_at
           FROM login_sessions s JOIN users u ON u.id = s.user_id
          WHERE s.token_hash = $1 AND s.expires_at > now()`,
        [tokenHash],
      );
      return row
        ? ({ user: toUser(row), via: row.via, csrfToken: row.csrf_token, expiresAt: row.expires_at } satisfies StoredLoginSession)
        : null;
    },

    async deleteLoginSession(tokenHash) {
      await db.query('DELETE FROM login_sessions WHERE token_hash = $1', [tokenHash]);
    },
  };
}

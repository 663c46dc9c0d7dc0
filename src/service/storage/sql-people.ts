// The people's storage: users (each with an account of their own) and login sessions.
import { randomUUID } from 'node:crypto';
import { UsernameTakenError, type LoginSession, type PeopleStore, type User } from '../people/store.ts';
import type { Queryable, SqlDriver } from './driver.ts';
import { isUniqueViolation, one, toUser, type UserRow } from './sql-rows.ts';

/** Serializes the creation of the first admin across replicas. */
const FIRST_ADMIN_LOCK_KEY = 0x74756e6573;

async function insertUser(q: Queryable, username: string, passwordHash: string, isAdmin: boolean): Promise<User> {
  const accountId = randomUUID();
  await q.query('INSERT INTO accounts (id, name) VALUES ($1::uuid, $2)', [accountId, username]);
  const row = await one<UserRow>(
    q,
    `INSERT INTO users (id, account_id, username, password_hash, is_admin) VALUES ($1::uuid, $2::uuid, $3, $4, $5)
     RETURNING id, account_id, username, is_admin, created_at`,
    [randomUUID(), accountId, username, passwordHash, isAdmin],
  );
  return toUser(row!);
}

export function createPeopleStore(driver: SqlDriver): PeopleStore {
  const db: Queryable = driver;
  return {
    createFirstAdmin: (username, passwordHash) =>
      driver.withAdvisoryLock(FIRST_ADMIN_LOCK_KEY, async (conn) => {
        const existing = await one(conn, 'SELECT 1 AS ok FROM users LIMIT 1', []);
        if (existing) return false;
        await conn.transaction((tx) => insertUser(tx, username, passwordHash, true));
        return true;
      }),

    async createUser(username, passwordHash, isAdmin) {
      try {
        return await driver.transaction((tx) => insertUser(tx, username, passwordHash, isAdmin));
      } catch (err) {
        if (isUniqueViolation(err)) throw new UsernameTakenError(`username "${username}" is taken`);
        throw err;
      }
    },

    async findUserForLogin(username) {
      const row = await one<UserRow & { password_hash: string }>(
        db,
        'SELECT id, account_id, username, is_admin, created_at, password_hash FROM users WHERE username = $1',
        [username],
      );
      return row ? { user: toUser(row), passwordHash: row.password_hash } : null;
    },

    async listUsers() {
      const rows = await db.query<UserRow>(
        'SELECT id, account_id, username, is_admin, created_at FROM users ORDER BY created_at, username',
      );
      return rows.map(toUser);
    },

    async createLoginSession(tokenHash, userId, csrfToken, expiresAt) {
      await db.query(
        'INSERT INTO login_sessions (token_hash, user_id, csrf_token, expires_at) VALUES ($1, $2::uuid, $3, $4::timestamptz)',
        [tokenHash, userId, csrfToken, expiresAt.toISOString()],
      );
    },

    async findLoginSession(tokenHash) {
      const row = await one<UserRow & { csrf_token: string; expires_at: Date }>(
        db,
        `SELECT u.id, u.account_id, u.username, u.is_admin, u.created_at, s.csrf_token, s.expires_at
           FROM login_sessions s JOIN users u ON u.id = s.user_id
          WHERE s.token_hash = $1 AND s.expires_at > now()`,
        [tokenHash],
      );
      return row ? ({ user: toUser(row), csrfToken: row.csrf_token, expiresAt: row.expires_at } satisfies LoginSession) : null;
    },

    async deleteLoginSession(tokenHash) {
      await db.query('DELETE FROM login_sessions WHERE token_hash = $1', [tokenHash]);
    },
  };
}

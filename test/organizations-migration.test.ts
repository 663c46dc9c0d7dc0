// Migration 10 on both storages: a storage written by the schema before organizations (9, as the
// service wrote it: each user with an account of their own, one of them the service's admin)
// reads back with nothing lost. Each account is an organization with the same id, its databases,
// keys, commands, tuning sessions and login sessions; its user is its admin; a person added later
// joins the organization and sees its databases.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { test } from 'node:test';
import type { SqlDriver } from '../src/service/storage/driver.ts';
import { MIGRATIONS, migrate } from '../src/service/storage/migrations.ts';
import { createSqlStorage } from '../src/service/storage/sql-storage.ts';
import { STORAGE_KINDS, openScratchDriver } from './helpers/service.ts';

/** An account as schema 9 held it: its user, a database with a key, a command and a session. */
async function writeAccount(driver: SqlDriver, username: string, isAdmin: boolean) {
  const ids = {
    account: randomUUID(),
    user: randomUUID(),
    database: randomUUID(),
    key: randomUUID(),
    command: randomUUID(),
    session: randomUUID(),
  };
  await driver.query('INSERT INTO accounts (id, name) VALUES ($1, $2)', [ids.account, username]);
  await driver.query('INSERT INTO users (id, account_id, username, password_hash, is_admin) VALUES ($1, $2, $3, $4, $5)', [
    ids.user,
    ids.account,
    username,
    `hash-of-${username}`,
    isAdmin,
  ]);
  await driver.query('INSERT INTO databases (id, account_id, name, target, report_interval_seconds) VALUES ($1, $2, $3, $4, 30)', [
    ids.database,
    ids.account,
    `${username}'s db`,
    'local',
  ]);
  await driver.query(
    `INSERT INTO api_keys (id, database_id, key_hash, display_prefix, label, created_by) VALUES ($1, $2, $3, 'tuner_abcdef', 'first key', $4)`,
    [ids.key, ids.database, `keyhash-${username}`, ids.user],
  );
  await driver.query(`INSERT INTO commands (id, database_id, body, status, created_by) VALUES ($1, $2, $3::jsonb, 'pending', $4)`, [
    ids.command,
    ids.database,
    JSON.stringify({ id: ids.command, kind: 'revert', to: 'baseline' }),
    ids.user,
  ]);
  await driver.query(
    `INSERT INTO tuning_sessions (id, database_id, state, mode, iterations, window_seconds, warmup_seconds, seed, require_approval, space, created_by)
     VALUES ($1, $2, 'done', 'reload-only', 5, 600, 60, 1, true, '{}'::jsonb, $3)`,
    [ids.session, ids.database, ids.user],
  );
  await driver.query(
    `INSERT INTO login_sessions (token_hash, user_id, csrf_token, expires_at) VALUES ($1, $2, 'csrf', now() + interval '1 hour')`,
    [`login-${username}`, ids.user],
  );
  return ids;
}

for (const kind of STORAGE_KINDS) {
  test(`migration 10 on ${kind}: each account becomes an organization, its user its admin, nothing lost`, async () => {
    const { driver, dispose } = await openScratchDriver(kind);
    try {
      await migrate(
        driver,
        MIGRATIONS.filter((m) => m.version <= 9),
      );
      const admin = await writeAccount(driver, 'admin', true);
      const dba = await writeAccount(driver, 'dba', false);
      assert.deepEqual(
        await migrate(driver),
        MIGRATIONS.filter((m) => m.version > 9).map((m) => m.version),
      );
      const storage = createSqlStorage(driver);

      for (const [username, ids] of [
        ['admin', admin],
        ['dba', dba],
      ] as const) {
        const login = await storage.findLoginSession(`login-${username}`);
        assert.deepEqual(
          login && { id: login.user.id, organizationId: login.user.organizationId, role: login.user.role },
          { id: ids.user, organizationId: ids.account, role: 'admin' },
          `${username} is the admin of the organization their account became, still logged in`,
        );
        assert.equal((await storage.findUserForLogin(username))?.passwordHash, `hash-of-${username}`);
        const databases = await storage.listDatabases(ids.account);
        assert.deepEqual(
          databases.map((d) => [d.id, d.name, d.reportIntervalSeconds]),
          [[ids.database, `${username}'s db`, 30]],
        );
        assert.deepEqual(
          (await storage.listApiKeys(ids.account, ids.database)).map((k) => [k.id, k.label]),
          [[ids.key, 'first key']],
        );
        assert.equal(await storage.isLiveKeyHash(`keyhash-${username}`), true, 'the agent keys still authenticate');
        assert.deepEqual(
          (await storage.listCommands(ids.account, ids.database, 10)).map((c) => c.id),
          [ids.command],
        );
        assert.deepEqual(
          (await storage.listTuningSessions(ids.account, ids.database, 10)).map((s) => s.id),
          [ids.session],
        );
      }
      assert.equal(await storage.getDatabase(dba.account, admin.database), null, 'organizations stay apart');

      // A person the admin adds joins the admin's organization and sees its databases; the
      // organization keeps an admin.
      const added = await storage.createUser(admin.account, 'second-dba', 'hash', 'viewer');
      assert.deepEqual(
        (await storage.listUsers(admin.account)).map((u) => [u.username, u.role]),
        [
          ['admin', 'admin'],
          ['second-dba', 'viewer'],
        ],
      );
      assert.deepEqual(
        (await storage.listDatabases(added.organizationId)).map((d) => d.id),
        [admin.database],
      );
      await assert.rejects(storage.setRole(admin.account, admin.user, 'operator'), { name: 'LastAdminError' });
      await assert.rejects(storage.removeUser(admin.account, admin.user), { name: 'LastAdminError' });
      // A removed user's keys and commands stay, without their maker.
      await storage.setRole(admin.account, added.id, 'admin');
      assert.equal((await storage.removeUser(admin.account, admin.user))?.username, 'admin');
      assert.deepEqual(
        (await storage.listApiKeys(admin.account, admin.database)).map((k) => k.id),
        [admin.key],
      );
      await assert.rejects(driver.query(`UPDATE users SET role = 'owner' WHERE id = $1`, [added.id]), /users_role_check/);
    } finally {
      await dispose();
    }
  });
}

// Migrations 3 and 4 on both storages. 3: a session that was running under schema 2 reads back with the
// verification's defaults and its windows in the search phase, and the new states are allowed
// (one active session per database still holds for `verifying`). 4: a login session from before the
// rename of `sessions` to `login_sessions` still logs its user in.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { test } from 'node:test';
import { MIGRATIONS, migrate } from '../src/service/storage/migrations.ts';
import { createSqlStorage } from '../src/service/storage/sql-storage.ts';
import { STORAGE_KINDS, openScratchDriver } from './helpers/service.ts';

for (const kind of STORAGE_KINDS) {
  test(`migration 3 on ${kind}: a session from schema 2 goes on with the verification's defaults`, async () => {
    const { driver, dispose } = await openScratchDriver(kind);
    try {
      assert.deepEqual(
        await migrate(
          driver,
          MIGRATIONS.filter((m) => m.version <= 2),
        ),
        [1, 2],
      );
      const [account, user, database, session] = [randomUUID(), randomUUID(), randomUUID(), randomUUID()];
      await driver.query('INSERT INTO accounts (id, name) VALUES ($1, $2)', [account, 'a']);
      await driver.query('INSERT INTO users (id, account_id, username, password_hash) VALUES ($1, $2, $3, $4)', [user, account, 'u', 'x']);
      await driver.query('INSERT INTO databases (id, account_id, name, target) VALUES ($1, $2, $3, $4)', [
        database,
        account,
        'db',
        'local',
      ]);
      await driver.query(
        `INSERT INTO tuning_sessions (id, database_id, state, mode, iterations, window_seconds, warmup_seconds, seed, require_approval, space, created_by)
         VALUES ($1, $2, 'iterating', 'reload-only', 5, 600, 60, 1, true, '{}'::jsonb, $3)`,
        [session, database, user],
      );
      await driver.query(
        `INSERT INTO tuning_iterations (session_id, ordinal, kind, config, reason, command_id, state, objective)
         VALUES ($1, 1, 'remeasure', '{"work_mem": 8192}'::jsonb, 'old', $2, 'ok', 0.9)`,
        [session, randomUUID()],
      );
      assert.deepEqual(
        await migrate(
          driver,
          MIGRATIONS.filter((m) => m.version <= 3),
        ),
        [3],
      );
      // The storage reads today's schema: the later migrations too (5: statementRegressions, 'approve').
      assert.deepEqual(
        await migrate(driver),
        MIGRATIONS.filter((m) => m.version > 3).map((m) => m.version),
      );
      const found = await createSqlStorage(driver).getTuningSession(account, database, session);
      assert.equal(found?.session.statementRegressions, 'approve');
      assert.ok(found);
      const s = found.session;
      assert.deepEqual(
        [s.state, s.abRoundsMin, s.abRoundsMax, s.minEffectPercent, s.confidencePercent, s.verification],
        ['iterating', 3, 8, 5, 95, null],
      );
      assert.deepEqual(
        found.iterations.map((it) => [it.kind, it.phase, it.round, it.state]),
        [['remeasure', 'search', null, 'ok']],
      );

      await driver.query(`UPDATE tuning_sessions SET state = 'verifying' WHERE id = $1`, [session]);
      await driver.query(`UPDATE tuning_iterations SET state = 'contaminated' WHERE session_id = $1`, [session]);
      const second = `INSERT INTO tuning_sessions (id, database_id, state, mode, iterations, window_seconds, warmup_seconds, seed, require_approval, space)
        VALUES ($1, $2, 'baseline', 'reload-only', 5, 600, 60, 1, true, '{}'::jsonb)`;
      await assert.rejects(
        driver.query(second, [randomUUID(), database]),
        /tuning_sessions_one_active/,
        'a verifying session is active: one at a time',
      );
      await assert.rejects(
        driver.query(`UPDATE tuning_sessions SET state = 'pondering' WHERE id = $1`, [session]),
        /tuning_sessions_state_check/,
      );
    } finally {
      await dispose();
    }
  });
}

for (const kind of STORAGE_KINDS) {
  test(`migration 4 on ${kind}: a login session from schema 3 still logs in, from login_sessions`, async () => {
    const { driver, dispose } = await openScratchDriver(kind);
    try {
      assert.deepEqual(
        await migrate(
          driver,
          MIGRATIONS.filter((m) => m.version <= 3),
        ),
        [1, 2, 3],
      );
      const [account, user] = [randomUUID(), randomUUID()];
      await driver.query('INSERT INTO accounts (id, name) VALUES ($1, $2)', [account, 'a']);
      await driver.query('INSERT INTO users (id, account_id, username, password_hash) VALUES ($1, $2, $3, $4)', [user, account, 'u', 'x']);
      await driver.query(
        `INSERT INTO sessions (token_hash, user_id, csrf_token, expires_at) VALUES ('h', $1, 'c', now() + interval '1 hour')`,
        [user],
      );
      assert.deepEqual(
        await migrate(driver),
        MIGRATIONS.filter((m) => m.version > 3).map((m) => m.version),
      );
      const found = await createSqlStorage(driver).findLoginSession('h');
      assert.deepEqual([found?.user.username, found?.csrfToken], ['u', 'c']);
      await assert.rejects(driver.query('SELECT 1 FROM sessions'), /sessions/, 'the old name is gone');
    } finally {
      await dispose();
    }
  });
}

// What the storage's SQL and the TypeScript both list must agree: the values a CHECK constraint
// allows are exactly the values the type names, and the one-active-session index covers exactly
// the active states. Read from a freshly migrated PGlite storage, as PostgreSQL prints them back.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import type { SqlDriver } from '../src/service/storage/driver.ts';
import { migrate } from '../src/service/storage/migrations.ts';
import { openPgliteDriver } from '../src/service/storage/pglite-driver.ts';
import { TUNING_MODES } from '../src/protocol/v1.ts';
import { COMMAND_STATUSES } from '../src/service/databases/store.ts';
import { ACTIVE_SESSION_STATES, TUNING_ITERATION_STATES, TUNING_SESSION_STATES } from '../src/service/tuning/store.ts';

let dir: string;
let driver: SqlDriver;

before(async () => {
  dir = mkdtempSync(join(tmpdir(), 'tuner-storage-lists-'));
  driver = await openPgliteDriver(dir);
  await migrate(driver);
});

after(async () => {
  await driver.close();
  rmSync(dir, { recursive: true, force: true });
});

/** The quoted words of a definition PostgreSQL prints back ('a'::text, …), sorted. */
const quoted = (definition: string) => [...definition.matchAll(/'([a-z_-]+)'/g)].map((m) => m[1]!).sort();

async function constraint(name: string): Promise<string> {
  const [row] = await driver.query<{ def: string }>('SELECT pg_get_constraintdef(oid) AS def FROM pg_constraint WHERE conname = $1', [
    name,
  ]);
  assert.ok(row, `constraint ${name}`);
  return row.def;
}

test('a tuning session may be stored in exactly the states TUNING_SESSION_STATES lists', async () => {
  assert.deepEqual(quoted(await constraint('tuning_sessions_state_check')), [...TUNING_SESSION_STATES].sort());
});

test('a tuning iteration may be stored in exactly the states TUNING_ITERATION_STATES lists', async () => {
  assert.deepEqual(quoted(await constraint('tuning_iterations_state_check')), [...TUNING_ITERATION_STATES].sort());
});

test("a session's mode is one of TUNING_MODES, a command's status one of COMMAND_STATUSES", async () => {
  assert.deepEqual(quoted(await constraint('tuning_sessions_mode_check')), [...TUNING_MODES].sort());
  assert.deepEqual(quoted(await constraint('commands_status_check')), [...COMMAND_STATUSES].sort());
});

test('one active session per database: the unique index covers exactly ACTIVE_SESSION_STATES', async () => {
  const [row] = await driver.query<{ def: string }>("SELECT pg_get_indexdef('tuning_sessions_one_active'::regclass) AS def");
  assert.ok(row);
  const predicate = row.def.split(' WHERE ')[1] ?? '';
  assert.deepEqual(quoted(predicate), [...ACTIVE_SESSION_STATES].sort());
});

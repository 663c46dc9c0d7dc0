import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, test } from 'node:test';
import { JOURNAL_FILE_NAME, Journal, JournalError } from '../src/agent/applying/journal.ts';

const dirs: string[] = [];
function tempDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'tuner-journal-'));
  dirs.push(dir);
  return dir;
}
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const TARGET = 'local 127.0.0.1:5432/postgres';

test('nothing is written until the first change, which is on disk before it is made', () => {
  const dir = tempDir();
  const journal = Journal.open(dir, TARGET);
  assert.equal(existsSync(join(dir, JOURNAL_FILE_NAME)), false);
  journal.beginChange('c1', { work_mem: { set: false } }, { work_mem: { set: true, value: '8192' } }, { work_mem: '4096' });
  const onDisk = JSON.parse(readFileSync(join(dir, JOURNAL_FILE_NAME), 'utf8')) as { inFlight: { id: string }; baseline: unknown };
  assert.equal(onDisk.inFlight.id, 'c1');
  assert.deepEqual(onDisk.baseline, { work_mem: { set: false } });
  assert.equal(statSync(join(dir, JOURNAL_FILE_NAME)).mode & 0o777, 0o600);
  assert.equal(existsSync(join(dir, `${JOURNAL_FILE_NAME}.tmp`)), false);
});

test('a reopened journal with a change in flight needs recovery; a finished accepted one does not', () => {
  const dir = tempDir();
  const first = Journal.open(dir, TARGET);
  first.beginChange('c1', { work_mem: { set: false } }, { work_mem: { set: true, value: '8192' } }, { work_mem: '4096' });
  assert.equal(Journal.open(dir, TARGET).needsRecovery(), true);

  first.finishChange(true);
  const reopened = Journal.open(dir, TARGET);
  assert.equal(reopened.needsRecovery(), false);
  assert.deepEqual(reopened.data.knownGood, { work_mem: { set: true, value: '8192' } });
  // The baseline stays what was found first, whatever comes after.
  assert.deepEqual(reopened.data.baseline, { work_mem: { set: false } });
  assert.deepEqual(reopened.data.baselineSettings, { work_mem: '4096' });
});

test('a configuration applied but never accepted needs recovery after a restart of the agent', () => {
  const dir = tempDir();
  const journal = Journal.open(dir, TARGET);
  journal.beginChange(
    'trial',
    { random_page_cost: { set: false } },
    { random_page_cost: { set: true, value: '1.1' } },
    { random_page_cost: '4' },
  );
  journal.finishChange(false);
  assert.equal(Journal.open(dir, TARGET).needsRecovery(), true);
  journal.acceptApplied();
  assert.equal(Journal.open(dir, TARGET).needsRecovery(), false);
});

test('an aborted change leaves the applied configuration as it was', () => {
  const dir = tempDir();
  const journal = Journal.open(dir, TARGET);
  journal.beginChange('c1', { work_mem: { set: true, value: '64MB' } }, { work_mem: { set: true, value: '8192' } }, { work_mem: '65536' });
  journal.abortChange();
  assert.equal(journal.needsRecovery(), false);
  assert.deepEqual(journal.data.applied, { work_mem: { set: true, value: '64MB' } });
});

test('a corrupt journal is refused and left untouched', () => {
  const dir = tempDir();
  const path = join(dir, JOURNAL_FILE_NAME);
  writeFileSync(path, '{"version": 1, "target": ');
  assert.throws(
    () => Journal.open(dir, TARGET),
    (err: unknown) => err instanceof JournalError && /is not valid JSON/.test(err.message) && /left as it is/.test(err.message),
  );
  assert.equal(readFileSync(path, 'utf8'), '{"version": 1, "target": ');
  writeFileSync(path, JSON.stringify({ version: 1, target: TARGET }));
  assert.throws(() => Journal.open(dir, TARGET), /is not a tuner-agent journal \(baseline: /);
});

test("another database's journal is refused: one directory per agent", () => {
  const dir = tempDir();
  Journal.open(dir, TARGET).beginChange('c', { a: { set: false } }, { a: { set: true, value: '1' } }, {});
  assert.throws(() => Journal.open(dir, 'local 10.0.0.9:5432/other'), /belongs to local 127\.0\.0\.1:5432\/postgres/);
});

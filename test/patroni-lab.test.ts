// The Patroni lab itself (src/lab/patroni.ts): a leader and a streaming replica that apply the
// dynamic configuration, with the REST API's basic auth, and nothing left behind by stop().
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { after, before, test } from 'node:test';
import pg from 'pg';
import { startPatroniLab, type PatroniLab } from '../src/lab/patroni.ts';
import { until } from './helpers/until.ts';

let lab: PatroniLab;
before(async () => {
  const started = Date.now();
  lab = await startPatroniLab();
  console.log(`patroni lab started in ${Date.now() - started} ms`);
});
after(async () => {
  await lab?.stop();
});

const workMem = async (m: PatroniLab['members'][number]) =>
  (await m.sql<{ setting: string }>(`SELECT setting FROM pg_settings WHERE name = 'work_mem'`))[0]?.setting;

test('a leader and a streaming replica, pg_stat_statements preloaded, agent_user on both', async () => {
  const leader = await lab.leader();
  const replica = lab.members.find((m) => m !== leader)!;
  const [wal] = await replica.sql<{ status: string }>('SELECT status FROM pg_stat_wal_receiver');
  assert.equal(wal?.status, 'streaming');
  for (const m of lab.members) {
    const client = new pg.Client({ connectionString: m.agentUrl });
    await client.connect();
    const r = await client.query<{ libs: string; monitor: boolean }>(
      `SELECT current_setting('shared_preload_libraries') AS libs, pg_has_role('agent_user', 'pg_monitor', 'MEMBER') AS monitor`,
    );
    await client.end();
    assert.deepEqual(r.rows[0], { libs: 'pg_stat_statements', monitor: true });
  }
});

test('PATCH /config work_mem reaches pg_settings on both members; without credentials it is refused', async () => {
  const leader = await lab.leader();
  const refused = await fetch(`${leader.apiUrl}/config`, {
    method: 'PATCH',
    body: JSON.stringify({ postgresql: { parameters: { work_mem: '8MB' } } }),
  });
  assert.equal(refused.status, 401);

  const patched = await lab.api(leader, 'PATCH', '/config', { postgresql: { parameters: { work_mem: '12MB' } } });
  assert.equal(patched.status, 200);
  for (const m of lab.members) await until(`work_mem on ${m.name}`, async () => (await workMem(m)) === String(12 * 1024), 30_000);

  await lab.api(leader, 'PATCH', '/config', { postgresql: { parameters: { work_mem: null } } });
  for (const m of lab.members) await until(`work_mem back on ${m.name}`, async () => (await workMem(m)) === '4096', 30_000);
});

test('stop() leaves no process and no directory behind', async () => {
  const dirs = lab.members.map((m) => m.dataDir);
  await lab.stop();
  for (const d of dirs) assert.equal(existsSync(d), false);
  for (const m of lab.members) {
    await assert.rejects(fetch(`${m.apiUrl}/health`));
    const client = new pg.Client({ connectionString: m.agentUrl });
    client.on('error', () => undefined);
    await assert.rejects(client.connect());
  }
  await assert.rejects(fetch(`${lab.etcdUrl}/health`));
});

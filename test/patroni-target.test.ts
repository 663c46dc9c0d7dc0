// The Patroni target against a real cluster (src/lab/patroni.ts): changes go into the dynamic
// configuration, reach both members, and are put back exactly; restart-only parameters are
// applied by restarting the members through Patroni's API.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { connectDb, type Db } from '../src/agent/database/db.ts';
import { createPatroniTarget, type PatroniTarget } from '../src/agent/targets/patroni/target.ts';
import { startPatroniLab, type PatroniLab, type PatroniLabMember } from '../src/lab/patroni.ts';

let lab: PatroniLab;
let db: Db;
const targets: PatroniTarget[] = [];

before(async () => {
  const started = Date.now();
  lab = await startPatroniLab();
  console.log(`patroni lab started in ${Date.now() - started} ms`);
  db = await connectDb((await lab.leader()).agentUrl);
});
after(async () => {
  for (const t of targets) await t.close();
  await db?.close();
  await lab?.stop();
});

function target(options: { allowRestart?: boolean; applyTimeoutSeconds?: number } = {}): PatroniTarget {
  const t = createPatroniTarget({
    db,
    config: {
      postgresql: {
        connectionUrl: lab.members[0]!.agentUrl,
        includeQueries: true,
        includePlans: false,
        allowRestart: options.allowRestart ?? false,
      },
      targets: {},
    },
    patroni: {
      restApiUrls: lab.members.map((m) => m.apiUrl),
      username: lab.apiUser,
      password: lab.apiPassword,
      applyTimeoutSeconds: options.applyTimeoutSeconds ?? 60,
      maxReplicaLagMb: 64,
    },
  });
  targets.push(t);
  return t;
}

async function setting(m: PatroniLabMember, name: string): Promise<{ setting: string; pending_restart: boolean }> {
  const [row] = await m.sql<{ setting: string; pending_restart: boolean }>(
    'SELECT setting, pending_restart FROM pg_settings WHERE name = $1',
    [name],
  );
  return row!;
}

async function dynamicConfig(): Promise<unknown> {
  return (await lab.api(await lab.leader(), 'GET', '/config')).body;
}

test('a change is written to the dynamic configuration, read back, and runs on both members', async () => {
  const t = target();
  assert.deepEqual(await t.readOverrides(['work_mem']), { work_mem: { set: false } });
  const result = await t.writeOverrides({ work_mem: { set: true, value: '16384' } }, { allowRestart: false });
  assert.deepEqual(result, { restarted: false });
  assert.deepEqual(await t.readOverrides(['work_mem']), { work_mem: { set: true, value: '16384' } });
  for (const m of lab.members) assert.equal((await setting(m, 'work_mem')).setting, '16384', m.name);
  await t.writeOverrides({ work_mem: { set: false } }, { allowRestart: false });
  for (const m of lab.members) assert.equal((await setting(m, 'work_mem')).setting, '4096', m.name);
});

test('putting back what was read restores the exact dynamic configuration (an absent parameter removed)', async () => {
  const t = target();
  const leader = await lab.leader();
  await lab.api(leader, 'PATCH', '/config', { postgresql: { parameters: { random_page_cost: '1.5' } } });
  const found = await dynamicConfig();
  const names = ['random_page_cost', 'effective_io_concurrency', 'work_mem'];
  const previous = await t.readOverrides(names);
  assert.deepEqual(previous, {
    random_page_cost: { set: true, value: '1.5' },
    effective_io_concurrency: { set: false },
    work_mem: { set: false },
  });
  await t.writeOverrides(
    {
      random_page_cost: { set: true, value: '1.1' },
      effective_io_concurrency: { set: true, value: '200' },
      work_mem: { set: true, value: '8192' },
    },
    { allowRestart: false },
  );
  for (const m of lab.members) assert.equal((await setting(m, 'effective_io_concurrency')).setting, '200', m.name);
  await t.writeOverrides(previous, { allowRestart: false });
  assert.deepEqual(await dynamicConfig(), found);
  for (const m of lab.members) {
    assert.equal((await setting(m, 'random_page_cost')).setting, '1.5', m.name);
    assert.equal((await setting(m, 'effective_io_concurrency')).setting, '1', m.name);
  }
  await lab.api(leader, 'PATCH', '/config', { postgresql: { parameters: { random_page_cost: null } } });
});

test('in reload-only mode a restart-only change waits for a restart on both members and nothing is restarted', async () => {
  const t = target();
  const previous = await t.readOverrides(['shared_buffers']);
  const [started] = await lab.members[1]!.sql<{ t: Date }>('SELECT pg_postmaster_start_time() AS t');
  const result = await t.writeOverrides({ shared_buffers: { set: true, value: '4096' } }, { allowRestart: false });
  assert.deepEqual(result, { restarted: false });
  for (const m of lab.members) assert.equal((await setting(m, 'shared_buffers')).pending_restart, true, m.name);
  const [still] = await lab.members[1]!.sql<{ t: Date }>('SELECT pg_postmaster_start_time() AS t');
  assert.equal(still!.t.getTime(), started!.t.getTime());
  await t.writeOverrides(previous, { allowRestart: false });
  for (const m of lab.members) assert.deepEqual(await setting(m, 'shared_buffers'), { setting: '16384', pending_restart: false }, m.name);
});

test('restart mode: shared_buffers through the dynamic configuration, members restarted through Patroni, read back on both', async () => {
  const t = target({ allowRestart: true });
  const leaderBefore = await lab.leader();
  const found = await dynamicConfig();
  const previous = await t.readOverrides(['shared_buffers']);
  const result = await t.writeOverrides({ shared_buffers: { set: true, value: '8192' } }, { allowRestart: true });
  assert.deepEqual(result, { restarted: true });
  for (const m of lab.members) assert.deepEqual(await setting(m, 'shared_buffers'), { setting: '8192', pending_restart: false }, m.name);
  // Restarted in place: the same leader, no switchover; the replica first, the leader last.
  assert.equal((await lab.leader()).name, leaderBefore.name);
  const startedAt = async (m: PatroniLabMember) => (await m.sql<{ t: Date }>('SELECT pg_postmaster_start_time() AS t'))[0]!.t.getTime();
  const replica = lab.members.find((m) => m.name !== leaderBefore.name)!;
  assert.ok((await startedAt(replica)) < (await startedAt(leaderBefore)), 'the replica restarted before the leader');
  const back = await t.writeOverrides(previous, { allowRestart: true });
  assert.deepEqual(back, { restarted: true });
  for (const m of lab.members) assert.deepEqual(await setting(m, 'shared_buffers'), { setting: '16384', pending_restart: false }, m.name);
  assert.deepEqual(await dynamicConfig(), found);
  await lab.waitHealthy();
});

test('a change a member does not run within the bound is put back exactly and the write fails', async () => {
  const t = target({ applyTimeoutSeconds: 6 });
  const found = await dynamicConfig();
  const replica = lab.members.find((m) => m.name !== lab.members[0]!.name)!;
  // A local override on the replica: postgresql.auto.conf wins over Patroni's postgresql.conf.
  await replica.sql(`ALTER SYSTEM SET work_mem = '6MB'`);
  await replica.sql('SELECT pg_reload_conf()');
  try {
    await assert.rejects(
      t.writeOverrides({ work_mem: { set: true, value: '10240' } }, { allowRestart: false }),
      /did not apply the change on every member within 6 s: .*work_mem is 6144 kB \(from ALTER SYSTEM/,
    );
    assert.deepEqual(await dynamicConfig(), found);
    assert.equal((await setting(lab.members[0]!, 'work_mem')).setting, '4096');
  } finally {
    await replica.sql('ALTER SYSTEM RESET work_mem');
    await replica.sql('SELECT pg_reload_conf()');
  }
});

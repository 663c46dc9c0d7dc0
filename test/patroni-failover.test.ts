// Failover awareness against a real Patroni cluster (src/lab/patroni.ts): a switchover in the
// middle of a trial is seen and the trial is put back through the dynamic configuration; a member
// with a local override blocks tuning until it agrees; a replica that stops streaming is a
// guardrail breach; and a Patroni member is told apart from a plain server (for --local).
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { connectDb, type Db } from '../src/agent/database/db.ts';
import { detectPatroni, localRefusal } from '../src/agent/targets/patroni/detect.ts';
import { createPatroniTarget, type PatroniTarget } from '../src/agent/targets/patroni/target.ts';
import { readTopology, replicaHealth, replicationBreaches, topologyChangedSince } from '../src/agent/targets/patroni/topology.ts';
import { startCluster, type Cluster } from '../src/lab/cluster.ts';
import { startPatroniLab, type PatroniLab } from '../src/lab/patroni.ts';
import { until } from './helpers/until.ts';

let lab: PatroniLab;
let db: Db;
let target: PatroniTarget;

before(async () => {
  const started = Date.now();
  lab = await startPatroniLab();
  console.log(`patroni lab started in ${Date.now() - started} ms`);
  db = await connectDb(lab.members[0]!.agentUrl);
  target = createPatroniTarget({
    db,
    config: {
      postgresql: { connectionUrl: lab.members[0]!.agentUrl, includeQueries: true, includePlans: false, allowRestart: false },
      targets: {},
    },
    patroni: {
      restApiUrls: lab.members.map((m) => m.apiUrl),
      username: lab.apiUser,
      password: lab.apiPassword,
      applyTimeoutSeconds: 60,
      maxReplicaLagMb: 64,
    },
  });
});
after(async () => {
  await target?.close();
  await db?.close();
  await lab?.stop();
});

const dynamicConfig = async () => (await lab.api(await lab.leader(), 'GET', '/config')).body;

test('a Patroni member is detected (its data directory, its REST API); a plain server is not', async () => {
  const member = await detectPatroni(db, { host: '127.0.0.1', apiPorts: [] });
  assert.match(member?.sign ?? '', /patroni\.dynamic\.json/);
  assert.match(localRefusal(member!), /Use --patroni/);

  let plain: Cluster | undefined;
  let plainDb: Db | undefined;
  try {
    plain = await startCluster();
    plainDb = await connectDb(plain.agentUrl);
    assert.equal(await detectPatroni(plainDb, { host: '127.0.0.1', apiPorts: [plain.port] }), null);
    // Patroni's REST API answering on the database's host is the other sign.
    const byApi = await detectPatroni(plainDb, { host: '127.0.0.1', apiPorts: [lab.members[1]!.apiPort] });
    assert.match(byApi?.sign ?? '', /REST API answers at http:\/\/127\.0\.0\.1:\d+\/patroni/);
    assert.equal(byApi?.scope, lab.scope);
  } finally {
    await plainDb?.close();
    await plain?.destroy();
  }
});

test('a member with a local override blocks tuning until it agrees', async () => {
  assert.equal(await target.applyBlockedReason(), null);
  const replica = lab.members.find((m) => m.name !== 'm0')!;
  await replica.sql(`ALTER SYSTEM SET random_page_cost = 2.5`);
  await replica.sql('SELECT pg_reload_conf()');
  try {
    const reason = await target.applyBlockedReason();
    assert.match(reason ?? '', new RegExp(`${replica.name}: random_page_cost is 2.5 \\(from ALTER SYSTEM`));
    assert.match(reason ?? '', /Tuning waits until it agrees/);
  } finally {
    await replica.sql('ALTER SYSTEM RESET random_page_cost');
    await replica.sql('SELECT pg_reload_conf()');
  }
  await until('the member to agree again', async () => (await target.applyBlockedReason()) === null, 10_000);
});

test('a member that missed a change (its postgresql.conf behind the dynamic configuration) is asked to reload, and then runs it', async () => {
  await target.writeOverrides({ work_mem: { set: true, value: '20480' } }, { allowRestart: false });
  const replica = lab.members.find((m) => m.name !== 'm0')!;
  const workMemOn = async () =>
    (await replica.sql<{ setting: string }>(`SELECT setting FROM pg_settings WHERE name = 'work_mem'`))[0]!.setting;
  assert.equal(await workMemOn(), '20480');
  // As a member restarting when the change came is left: Patroni holds the value, its file does not.
  const conf = join(replica.dataDir, 'postgresql.conf');
  const text = readFileSync(conf, 'utf8');
  assert.match(text, /^work_mem = '20480'$/m);
  writeFileSync(conf, text.replace(/^work_mem = '20480'\n/m, ''));
  await replica.sql('SELECT pg_reload_conf()');
  assert.equal(await workMemOn(), '4096');
  try {
    // The same value again: a patch that changes nothing makes Patroni reload nobody; the write
    // waits for every member, asks the one behind to reload after two of Patroni's loops, and
    // Patroni writes its file anew.
    await target.writeOverrides({ work_mem: { set: true, value: '20480' } }, { allowRestart: false });
    assert.equal(await workMemOn(), '20480');
    assert.match(readFileSync(conf, 'utf8'), /^work_mem = '20480'$/m);
  } finally {
    await target.writeOverrides({ work_mem: { set: false } }, { allowRestart: false });
  }
});

test('a member that missed a change does not block tuning for good: asked to reload before the refusal, it agrees', async () => {
  await target.writeOverrides({ work_mem: { set: true, value: '20480' } }, { allowRestart: false });
  const replica = lab.members.find((m) => m.name !== 'm0')!;
  const workMemOn = async () =>
    (await replica.sql<{ setting: string }>(`SELECT setting FROM pg_settings WHERE name = 'work_mem'`))[0]!.setting;
  const conf = join(replica.dataDir, 'postgresql.conf');
  try {
    // The member missed the change (as a leader demoted by a switchover, restarting when it came,
    // is left). Before the fix, every change was refused from here on, so no change ever came
    // to make Patroni write its file again: tuning stayed blocked for good.
    writeFileSync(conf, readFileSync(conf, 'utf8').replace(/^work_mem = '20480'\n/m, ''));
    await replica.sql('SELECT pg_reload_conf()');
    assert.equal(await workMemOn(), '4096');
    assert.equal(await target.applyBlockedReason(), null);
    assert.equal(await workMemOn(), '20480');
    assert.match(readFileSync(conf, 'utf8'), /^work_mem = '20480'$/m);
  } finally {
    await target.writeOverrides({ work_mem: { set: false } }, { allowRestart: false });
  }
});

test('a member whose file still sets a parameter the dynamic configuration dropped: POST /reload does not mend it, a round trip does', async () => {
  const found = await dynamicConfig();
  const replica = lab.members.find((m) => m.name !== 'm0')!;
  const workMemOn = async () =>
    (await replica.sql<{ setting: string }>(`SELECT setting FROM pg_settings WHERE name = 'work_mem'`))[0]!.setting;
  const conf = join(replica.dataDir, 'postgresql.conf');
  // As a leader demoted while the removal came is left: Patroni's own view lacks work_mem, the
  // file it wrote before still sets it.
  writeFileSync(conf, `${readFileSync(conf, 'utf8')}work_mem = '30855'\n`);
  await replica.sql('SELECT pg_reload_conf()');
  assert.equal(await workMemOn(), '30855');
  // Patroni compares only the parameters it knows of: asked to reload, it reloads PostgreSQL and
  // leaves the file as is.
  const loadedAt = async () => (await replica.sql<{ t: Date }>('SELECT pg_conf_load_time() AS t'))[0]!.t.getTime();
  const before = await loadedAt();
  assert.equal((await lab.api(replica, 'POST', '/reload')).status, 202);
  await until('Patroni to reload the member', async () => (await loadedAt()) > before, 30_000);
  assert.equal(await workMemOn(), '30855');

  assert.equal(await target.applyBlockedReason(), null);
  assert.equal(await workMemOn(), '4096');
  assert.doesNotMatch(readFileSync(conf, 'utf8'), /^work_mem/m);
  assert.deepEqual(await dynamicConfig(), found, 'the dynamic configuration as found');
});

test('a switchover in the middle of a trial is detected, and the trial is put back through the dynamic configuration', async () => {
  const found = await dynamicConfig();
  const atStart = await readTopology(target.api);
  assert.equal(atStart.leader, 'm0');
  const previous = await target.readOverrides(['work_mem']);
  await target.writeOverrides({ work_mem: { set: true, value: '20480' } }, { allowRestart: false });
  assert.equal(topologyChangedSince(atStart, await readTopology(target.api)), null);

  const switched = await lab.api(lab.members[0]!, 'POST', '/switchover', { leader: 'm0', candidate: 'm1' });
  assert.equal(switched.status, 200, JSON.stringify(switched.body));
  const changed = await until(
    'the switchover to be seen',
    async () => topologyChangedSince(atStart, await readTopology(target.api).catch(() => atStart)),
    60_000,
  );
  assert.match(changed, /leader changed from m0 to m1|no leader/);
  await lab.waitHealthy();
  const now = await readTopology(target.api);
  assert.equal(now.leader, 'm1');
  assert.ok((now.timeline ?? 0) > (atStart.timeline ?? 0), 'a new timeline');

  // The trial ends: put back what was found, through Patroni, on the new leader and the old one.
  await target.writeOverrides(previous, { allowRestart: false });
  assert.deepEqual(await dynamicConfig(), found);
  for (const m of lab.members) {
    const [row] = await m.sql<{ setting: string }>(`SELECT setting FROM pg_settings WHERE name = 'work_mem'`);
    assert.equal(row?.setting, '4096', m.name);
  }
  const replicas = await replicaHealth(target.api, target.sessions);
  assert.deepEqual(
    replicas.map((r) => [r.name, r.streaming]),
    [['m0', true]],
  );
  assert.deepEqual(replicationBreaches(replicas, 64 * 2 ** 20), []);
  const metrics = await target.metrics();
  assert.ok(metrics.some((m) => m.name === 'patroni_replica_lag_bytes:m0' && m.unit === 'bytes'));
});

test('a replica that stops streaming is a replication breach', async () => {
  const leader = await lab.leader();
  const replica = lab.members.find((m) => m.name !== leader.name)!;
  await replica.kill();
  const breaches = await until(
    'the replica to stop streaming',
    async () => {
      const found = replicationBreaches(await replicaHealth(target.api, target.sessions), 64 * 2 ** 20);
      return found.length > 0 ? found : null;
    },
    30_000,
  );
  assert.deepEqual(breaches, [`replica ${replica.name} is not streaming from the leader`]);
});

// The fake Cloud C (test/fakes/cloud-sql) through Google's own clients, apart from the agent: what
// the agent's tests rely on it to do as Cloud SQL documents. Operations go PENDING, RUNNING, DONE,
// one at a time; a second patch meanwhile meets 409 operationInProgress; a stale settingsVersion
// 412; a patch replaces the whole flag list; a token the service account did not sign is refused;
// the metadata server answers only with Metadata-Flavor: Google.
import assert from 'node:assert/strict';
import { generateKeyPairSync } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, beforeEach, test } from 'node:test';
import { sqladmin, type sqladmin_v1 } from '@googleapis/sqladmin';
import { GoogleAuth, JWT } from 'google-auth-library';
import { startCluster, type Cluster } from '../src/lab/cluster.ts';
import { makeTestCa, type TestCa } from '../src/lab/tls.ts';
import { startFakeCloudSql, type FakeCloudSql } from './fakes/cloud-sql/index.ts';

let ca: TestCa;
let cluster: Cluster;
let cloud: FakeCloudSql;
let sql: sqladmin_v1.Sqladmin;

/** Google's client signing with `keyFile` as the agent does: a self-signed JWT for the scope. */
async function clientWith(keyFile: string): Promise<sqladmin_v1.Sqladmin> {
  const auth = new GoogleAuth({ keyFile, scopes: ['https://www.googleapis.com/auth/cloud-platform'] });
  const jwt = await auth.getClient();
  assert.ok(jwt instanceof JWT);
  jwt.useJWTAccessWithScope = true;
  return sqladmin({ version: 'v1', auth, rootUrl: cloud.url, retry: false });
}

/** The Google error of a refused call: HTTP status, status name and first reason. */
async function refusal(call: Promise<unknown>): Promise<string> {
  try {
    await call;
  } catch (err) {
    const e = err as { status?: number; response?: { data?: { error?: { status?: string; errors?: { reason?: string }[] } } } };
    const body = e.response?.data?.error;
    return `${e.status} ${body?.status} ${body?.errors?.[0]?.reason}`;
  }
  return 'accepted';
}

before(async () => {
  ca = makeTestCa('fake Cloud SQL Server CA');
  cluster = await startCluster({ tls: { ca, names: ['tuner-project:tuner-sql-1'] } });
  cloud = await startFakeCloudSql({ cluster, serverCa: ca.cert });
  sql = await clientWith(cloud.keyFile);
});

beforeEach(() => cloud.reset());

after(async () => {
  await cloud?.close();
  await cluster?.destroy();
  ca?.remove();
});

const ids = () => ({ project: cloud.project, instance: cloud.instanceName });

test('a patch replaces the whole list; its operation goes PENDING, RUNNING, DONE; a second patch meanwhile answers 409 operationInProgress', async () => {
  cloud.timing = { pendingMs: 300, runMs: 600 };
  const { data: instance } = await sql.instances.get(ids());
  assert.equal(instance.state, 'RUNNABLE');
  const version = instance.settings!.settingsVersion!;
  const { data: op } = await sql.instances.patch({
    ...ids(),
    requestBody: {
      settings: {
        settingsVersion: version,
        databaseFlags: [
          { name: 'work_mem', value: '8192' },
          { name: 'log_min_duration_statement', value: '250' },
        ],
      },
    },
  });
  assert.equal(op.status, 'PENDING');
  assert.equal(op.operationType, 'UPDATE');
  const busy = await refusal(sql.instances.patch({ ...ids(), requestBody: { settings: { databaseFlags: [] } } }));
  assert.equal(busy, '409 ABORTED operationInProgress');
  const seen = new Set<string>();
  for (;;) {
    const { data } = await sql.operations.get({ project: cloud.project, operation: op.name! });
    seen.add(data.status!);
    if (data.status === 'DONE') break;
    await sleep(50);
  }
  assert.deepEqual([...seen], ['PENDING', 'RUNNING', 'DONE']);
  const [row] = await cluster.sql<{ setting: string }>("SELECT setting FROM pg_settings WHERE name = 'work_mem'");
  assert.equal(row!.setting, '8192');

  // The next patch leaves work_mem out: back to its default.
  const { data: now } = await sql.instances.get(ids());
  assert.equal(now.settings!.settingsVersion, String(Number(version) + 1));
  const { data: op2 } = await sql.instances.patch({
    ...ids(),
    requestBody: {
      settings: { settingsVersion: now.settings!.settingsVersion, databaseFlags: [{ name: 'log_min_duration_statement', value: '250' }] },
    },
  });
  await cloud.idle();
  assert.equal((await sql.operations.get({ project: cloud.project, operation: op2.name! })).data.status, 'DONE');
  const [back] = await cluster.sql<{ setting: string }>("SELECT setting FROM pg_settings WHERE name = 'work_mem'");
  assert.equal(back!.setting, '4096');
  assert.deepEqual((await sql.instances.get(ids())).data.settings!.databaseFlags, [{ name: 'log_min_duration_statement', value: '250' }]);
});

test('a stale settingsVersion answers 412; a flag or value Cloud SQL does not allow answers 400 and changes nothing', async () => {
  assert.equal(
    await refusal(sql.instances.patch({ ...ids(), requestBody: { settings: { settingsVersion: '999', databaseFlags: [] } } })),
    '412 FAILED_PRECONDITION conditionNotMet',
  );
  const version = (await sql.instances.get(ids())).data.settings!.settingsVersion!;
  for (const flag of [
    { name: 'fsync', value: 'off' },
    { name: 'work_mem', value: '12' },
    { name: 'shared_buffers', value: String((8 * 2 ** 30) / 8192) },
  ])
    assert.equal(
      await refusal(sql.instances.patch({ ...ids(), requestBody: { settings: { settingsVersion: version, databaseFlags: [flag] } } })),
      '400 INVALID_ARGUMENT invalidFlagValue',
      flag.name,
    );
  assert.equal((await sql.instances.get(ids())).data.settings!.settingsVersion, version);
  assert.equal(cloud.operations.length, 0);
});

test('a key the service account does not hold is refused 401; a permission the role lacks 403 PERMISSION_DENIED; the metadata server needs its header', async () => {
  const stranger = JSON.parse(readFileSync(cloud.keyFile, 'utf8')) as Record<string, string>;
  stranger['private_key'] = generateKeyPairSync('rsa', { modulusLength: 2048 })
    .privateKey.export({ type: 'pkcs8', format: 'pem' })
    .toString();
  const file = `${cloud.keyFile}.stranger.json`;
  writeFileSync(file, JSON.stringify(stranger));
  const other = await clientWith(file);
  assert.equal(await refusal(other.instances.get(ids())), '401 UNAUTHENTICATED authError');

  cloud.useRole(['cloudsql.instances.get']);
  assert.equal(
    await refusal(sql.instances.patch({ ...ids(), requestBody: { settings: { databaseFlags: [] } } })),
    '403 PERMISSION_DENIED notAuthorized',
  );

  const plain = await fetch(`http://${cloud.metadataHost}/computeMetadata/v1/instance/service-accounts/default/token`);
  assert.equal(plain.status, 403);
  const flavored = await fetch(`http://${cloud.metadataHost}/computeMetadata/v1/instance/service-accounts/default/token`, {
    headers: { 'Metadata-Flavor': 'Google' },
  });
  assert.equal(flavored.status, 200);
  assert.equal(flavored.headers.get('metadata-flavor'), 'Google');
});

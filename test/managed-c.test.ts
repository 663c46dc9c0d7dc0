// The real tuner-agent process against a fake Cloud C (test/fakes/cloud-sql: the Cloud SQL Admin
// API v1, Cloud Monitoring, Resource Manager's testIamPermissions and the metadata server, over
// loopback HTTP) whose database flags land on a real throwaway PostgreSQL cluster. The agent calls
// it through Google's own clients (@googleapis/sqladmin, google-auth-library). The cluster accepts
// TLS only, with a certificate that names the instance (<project>:<instance>) and not the host, as
// Cloud SQL's do: the agent verifies the chain against the instance's server CA (verify-ca,
// postgresql.extra_ca_file).
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, beforeEach, test } from 'node:test';
import { loadConfig } from '../src/agent/config/load.ts';
import { connectDb, type Db } from '../src/agent/database/db.ts';
import { createLogger } from '../src/agent/base/log.ts';
import { agentConnectionContext } from '../src/agent/process/db-tls.ts';
import { catalogSettings } from '../src/agent/sending/system.ts';
import { createManagedCTarget } from '../src/agent/targets/managed-c/target.ts';
import { ManagedCApi } from '../src/agent/targets/managed-c/api.ts';
import { sizeOfTier } from '../src/agent/targets/managed-c/machine.ts';
import { mergeFlags } from '../src/agent/targets/managed-c/write.ts';
import type { Target } from '../src/target/target.ts';
import { GiB, MiB } from '../src/knobs/units.ts';
import { AGENT_USER_PASSWORD_FOR_TESTS, startCluster, type Cluster } from '../src/lab/cluster.ts';
import { makeTestCa, type TestCa } from '../src/lab/tls.ts';
import { TargetMetricSchema } from '../src/protocol/v1.ts';
import { CUSTOMER_FLAGS, managedCSection, startFakeCloudSql, type FakeCloudSql, type RecordedRequest } from './fakes/cloud-sql/index.ts';
import { runAgent, startAgent, type AgentRun } from './helpers/agent-process.ts';
import { until } from './helpers/until.ts';

const ROLE = ['cloudsql.instances.get', 'cloudsql.instances.update', 'monitoring.timeSeries.list'];

let ca: TestCa;
let cluster: Cluster;
let cloud: FakeCloudSql;
const dirs: string[] = [];
const transcript: string[] = [];

type Credentials = 'key' | 'metadata';

function agentDir(options: { allowRestart?: boolean; extraCa?: boolean } = {}): string {
  const dir = mkdtempSync(join(tmpdir(), 'tuner-agent-c-'));
  dirs.push(dir);
  const lines = [
    'postgresql:',
    `  connection_url: ${cluster.agentUrl}`,
    ...(options.extraCa === false ? [] : [`  extra_ca_file: ${ca.certFile}`]),
    `  allow_restart: ${options.allowRestart ?? false}`,
    ...managedCSection(cloud),
    'tuner:',
    '  debug: true',
  ];
  writeFileSync(join(dir, 'agent.yaml'), `${lines.join('\n')}\n`);
  return dir;
}

function credentialsEnv(credentials: Credentials): NodeJS.ProcessEnv {
  const base = { NO_PROXY: '127.0.0.1,localhost', HOME: dirs[0] ?? tmpdir() };
  return credentials === 'key'
    ? { ...base, GOOGLE_APPLICATION_CREDENTIALS: cloud.keyFile }
    : { ...base, GCE_METADATA_HOST: cloud.metadataHost };
}

async function agent(dir: string, args: string[], credentials: Credentials = 'key'): Promise<AgentRun> {
  const result = await runAgent(['--managed-c', ...args], { cwd: dir, env: credentialsEnv(credentials) });
  transcript.push(result.stdout, result.stderr);
  return result;
}

async function setting(name: string): Promise<string> {
  const [row] = await cluster.sql<{ setting: string }>('SELECT setting FROM pg_settings WHERE name = $1', [name]);
  return row!.setting;
}

const patches = () => cloud.requests.filter((r) => r.method === 'PATCH');
const apiCalls = () => cloud.requests.filter((r) => !r.path.startsWith('/computeMetadata/'));
const show = (requests: RecordedRequest[]) => requests.map((r) => `${r.method} ${r.path} ${r.status}`).join('\n');
const flagsOf = (r: RecordedRequest) =>
  (JSON.parse(r.body!) as { settings: { databaseFlags: { name: string; value: string }[] } }).settings.databaseFlags;

before(async () => {
  ca = makeTestCa('fake Cloud SQL Server CA');
  cluster = await startCluster({ tls: { ca, names: ['tuner-project:tuner-sql-1'] } });
  cloud = await startFakeCloudSql({ cluster, serverCa: ca.cert });
});

beforeEach(async () => {
  await cloud.reset();
  await cloud.customerPatch(CUSTOMER_FLAGS);
  cloud.requests.length = 0;
});

after(async () => {
  await cloud?.close();
  await cluster?.destroy();
  ca?.remove();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
  const all = transcript.join('\n');
  assert.ok(!all.includes(AGENT_USER_PASSWORD_FOR_TESTS), 'the database password never appears');
  assert.ok(!all.includes('PRIVATE KEY'), "the service account's key never appears");
});

test('--help lists --managed-c; permissions --managed-c prints a role gcloud iam roles create --file takes, the steps on stderr', async () => {
  const empty = mkdtempSync(join(tmpdir(), 'tuner-agent-c-'));
  dirs.push(empty);
  const help = await runAgent(['--help'], { cwd: empty });
  assert.match(help.stdout + help.stderr, /--managed-c\s+a Cloud C managed PostgreSQL instance/);
  const run = await runAgent(['permissions', '--managed-c'], { cwd: empty });
  assert.equal(run.code, 0, run.stderr);
  const role = JSON.parse(run.stdout) as Record<string, unknown>;
  assert.deepEqual(Object.keys(role).sort(), ['description', 'includedPermissions', 'stage', 'title']);
  assert.deepEqual(role['includedPermissions'], ROLE);
  assert.equal(role['stage'], 'GA');
  assert.ok(
    run.stderr.split('\n').every((l) => l === '' || l.startsWith('#')),
    run.stderr,
  );
  assert.match(run.stderr, /gcloud iam roles create tunerAgent --project=<PROJECT> --file=tuner-agent-role\.json/);
  assert.match(
    run.stderr,
    /gcloud projects add-iam-policy-binding <PROJECT> --member=serviceAccount:tuner-agent@<PROJECT>\.iam\.gserviceaccount\.com --role=projects\/<PROJECT>\/roles\/tunerAgent/,
  );
});

test('--check passes with a service account key (self-signed JWT) and with the metadata server; TLS verified against the server CA', async () => {
  const dir = agentDir();
  const run = await agent(dir, ['--check']);
  assert.equal(run.code, 0, run.stdout + run.stderr);
  assert.match(
    run.stdout,
    /PASS {2}connection encryption: encrypted .*sslmode=verify-ca \(the default for --managed-c\); the server's certificate was verified against Cloud SQL's server CA \(postgresql\.extra_ca_file; not Node's store\) and \S+ca\.pem; its host name was not checked/,
  );
  assert.match(run.stdout, new RegExp(`PASS {2}Cloud C credentials \\(Application Default Credentials\\): ${cloud.serviceAccount}`));
  for (const p of ROLE) assert.match(run.stdout, new RegExp(`PASS {2}permission ${p.replaceAll('.', '\\.')}`));
  assert.match(
    run.stdout,
    /PASS {2}instance readable \(cloudsql\.instances\.get\): tuner-project:tuner-sql-1: POSTGRES_15, tier db-custom-2-7680/,
  );
  assert.match(run.stdout, /PASS {2}instance is RUNNABLE/);
  assert.match(run.stdout, /PASS {2}machine size: 7\.5 GiB RAM and 2 vCPUs \(tier db-custom-2-7680\)/);
  assert.match(
    run.stdout,
    /PASS {2}the instance's own flags, which the agent keeps as they are: log_min_duration_statement=250, cloudsql\.iam_authentication=on/,
  );
  assert.match(run.stdout, /PASS {2}postgresql\.extra_ca_file holds the instance's server CA/);
  assert.match(run.stdout, /PASS {2}Cloud Monitoring readable \(monitoring\.timeSeries\.list\)/);
  assert.ok(
    apiCalls().length >= 3 && apiCalls().every((r) => r.caller === `key ${cloud.serviceAccount}` && r.status === 200),
    show(apiCalls()),
  );

  // Google's own clients: the Admin API's generated client, Monitoring's GAPIC client over REST.
  assert.match(apiCalls().find((r) => r.path.endsWith('/instances/tuner-sql-1'))?.apiClient ?? '', /^gdcl\//);
  assert.match(apiCalls().find((r) => r.path.endsWith('/timeSeries'))?.apiClient ?? '', /gapic\/[\d.]+ .*rest\//);
  for (const path of [
    '/v1/projects/tuner-project:testIamPermissions',
    '/v1/projects/tuner-project/instances/tuner-sql-1',
    '/v3/projects/tuner-project/timeSeries',
  ])
    assert.ok(
      apiCalls().some((r) => r.path === path),
      path,
    );

  cloud.requests.length = 0;
  const md = await agent(dir, ['--check'], 'metadata');
  assert.equal(md.code, 0, md.stdout + md.stderr);
  assert.ok(
    cloud.requests.some((r) => r.path === '/computeMetadata/v1/instance/service-accounts/default/token'),
    show(cloud.requests),
  );
  assert.ok(
    apiCalls().every((r) => r.caller === `metadata ${cloud.serviceAccount}`),
    show(apiCalls()),
  );
});

test("without the instance's server CA the connection is refused, never trusted on Node's public roots", async () => {
  const run = await agent(agentDir({ extraCa: false }), ['--check']);
  assert.notEqual(run.code, 0, run.stdout + run.stderr);
  assert.match(run.stdout + run.stderr, /download the instance's server CA with gcloud sql instances describe/);
  assert.doesNotMatch(run.stdout, /PASS {2}connection encryption/);
});

test('a role without cloudsql.instances.update: --check names it; a change is refused with 403 PERMISSION_DENIED and changes nothing', async () => {
  cloud.useRole(['cloudsql.instances.get', 'monitoring.timeSeries.list']);
  const dir = agentDir();
  const check = await agent(dir, ['--check']);
  assert.equal(check.code, 3, check.stdout);
  assert.match(check.stdout, /FAIL {2}permission cloudsql\.instances\.update: not held/);
  assert.match(check.stdout, /fix: add cloudsql\.instances\.update to the custom role/);
  const before = await setting('work_mem');
  const apply = await agent(dir, ['--apply', 'work_mem=8MB']);
  assert.equal(apply.code, 1, apply.stdout + apply.stderr);
  assert.match(
    apply.stderr,
    /403 PERMISSION_DENIED: The client is not authorized to make this request\.; this call needs cloudsql\.instances\.update/,
  );
  assert.equal(await setting('work_mem'), before);
  assert.deepEqual(cloud.instance.flags, CUSTOMER_FLAGS);
});

test("a customer's flags survive a trial and its revert: the whole list is read, merged and written back", async () => {
  const dir = agentDir();
  const before = await setting('work_mem');
  const applied = await agent(dir, ['--apply', 'work_mem=8MB', '--apply', 'random_page_cost=1.1']);
  assert.equal(applied.code, 0, applied.stdout + applied.stderr);
  assert.match(applied.stdout, /applied and read back from pg_settings: work_mem = 8192, random_page_cost = 1\.1/);
  assert.deepEqual(cloud.instance.flags, [
    ...CUSTOMER_FLAGS,
    { name: 'work_mem', value: '8192' },
    { name: 'random_page_cost', value: '1.1' },
  ]);
  assert.equal(await setting('log_min_duration_statement'), '250', "the customer's flag is still applied");
  // One PATCH with the whole list and the settings version it was read with.
  const [patch] = patches();
  assert.equal(patches().length, 1, show(patches()));
  assert.deepEqual(flagsOf(patch!), cloud.instance.flags);
  assert.equal(
    (JSON.parse(patch!.body!) as { settings: { settingsVersion: string } }).settings.settingsVersion,
    String(cloud.instance.settingsVersion - 1),
  );

  const reverted = await agent(dir, ['--revert']);
  assert.equal(reverted.code, 0, reverted.stdout + reverted.stderr);
  assert.deepEqual(cloud.instance.flags, CUSTOMER_FLAGS, 'exactly the list found');
  assert.equal(await setting('work_mem'), before);
  assert.equal(await setting('log_min_duration_statement'), '250');
});

test('a concurrent edit is neither lost nor overwritten: during the write (stale settings version, read again) and during the trial', async () => {
  const dir = agentDir();
  const theirs = { name: 'log_checkpoints', value: 'on' };
  cloud.beforeNextPatch(() => cloud.customerPatch([...CUSTOMER_FLAGS, theirs]));
  const applied = await agent(dir, ['--apply', 'work_mem=8MB']);
  assert.equal(applied.code, 0, applied.stdout + applied.stderr);
  assert.match(applied.stderr, /the instance's settings changed since they were read \(settings version \d+\): reading them again/);
  assert.deepEqual(
    patches().map((r) => r.status),
    [412, 200],
  );
  assert.deepEqual(cloud.instance.flags, [...CUSTOMER_FLAGS, theirs, { name: 'work_mem', value: '8192' }]);

  // During the trial someone changes their flag and adds another one.
  const during = [
    { name: 'log_min_duration_statement', value: '500' },
    CUSTOMER_FLAGS[1]!,
    theirs,
    { name: 'work_mem', value: '8192' },
    { name: 'commit_siblings', value: '7' },
  ];
  await cloud.customerPatch(during);
  const reverted = await agent(dir, ['--revert']);
  assert.equal(reverted.code, 0, reverted.stdout + reverted.stderr);
  assert.deepEqual(cloud.instance.flags, [
    { name: 'log_min_duration_statement', value: '500' },
    CUSTOMER_FLAGS[1]!,
    theirs,
    { name: 'commit_siblings', value: '7' },
  ]);
  assert.equal(await setting('log_min_duration_statement'), '500');
});

test('reload-only mode never writes a flag that restarts the instance; restart mode writes it and waits for the restart', async () => {
  const refused = await agent(agentDir(), ['--apply', 'shared_buffers=256MB']);
  assert.notEqual(refused.code, 0, refused.stdout + refused.stderr);
  assert.match(refused.stderr, /shared_buffers/);
  assert.deepEqual(patches(), [], show(patches()));
  assert.equal(cloud.instance.restarts, 0);

  const dir = agentDir({ allowRestart: true });
  const before = await setting('shared_buffers');
  const applied = await agent(dir, ['--apply', 'shared_buffers=256MB']);
  assert.equal(applied.code, 0, applied.stdout + applied.stderr);
  assert.match(
    applied.stderr,
    /Cloud SQL restarts the instance tuner-sql-1 \(and its replicas\) to apply shared_buffers: waiting for the restart/,
  );
  assert.equal(cloud.instance.restarts, 1);
  assert.equal(await setting('shared_buffers'), '32768');
  const reverted = await agent(dir, ['--revert']);
  assert.equal(reverted.code, 0, reverted.stdout + reverted.stderr);
  assert.equal(await setting('shared_buffers'), before);
  assert.deepEqual(cloud.instance.flags, CUSTOMER_FLAGS);
});

test('a failed operation is reported, and the flags found are put back', async () => {
  const before = await setting('work_mem');
  cloud.failNextOperation({ afterApplying: true });
  const run = await agent(agentDir(), ['--apply', 'work_mem=12MB']);
  assert.equal(run.code, 1, run.stdout + run.stderr);
  assert.match(
    run.stderr,
    /the Cloud SQL operation [\w-]+ \(UPDATE\) failed: INTERNAL_ERROR: .*An internal error has occurred.*; the flags found before were put back/,
  );
  assert.deepEqual(cloud.instance.flags, CUSTOMER_FLAGS);
  assert.equal(await setting('work_mem'), before);
  assert.equal(
    cloud.operations.filter((o) => o.operationType === 'UPDATE').length,
    2,
    'the failed update, then the one that put the flags back',
  );
});

test('the agent killed mid-operation: the next start waits the operation out and returns the exact list found', async () => {
  const dir = agentDir();
  const before = await setting('work_mem');
  cloud.timing = { pendingMs: 100, runMs: 3_000 };
  const running = startAgent(['--managed-c', '--apply', 'work_mem=24MB'], { cwd: dir, env: credentialsEnv('key') });
  await until('the update operation running', () => Promise.resolve(cloud.operations.some((o) => o.status === 'RUNNING')));
  running.child.kill('SIGKILL');
  await running.exited;
  transcript.push(running.output());
  cloud.timing = { pendingMs: 100, runMs: 200 };

  const recovered = await agent(dir, ['--revert']);
  assert.equal(recovered.code, 0, recovered.stdout + recovered.stderr);
  // Once every operation is over (the killed agent's too), the instance holds what was found.
  await cloud.idle();
  assert.deepEqual(cloud.instance.flags, CUSTOMER_FLAGS, 'exactly the list found');
  assert.equal(await setting('work_mem'), before);
  assert.match(recovered.stderr, /waiting for the operation [\w-]+ \(UPDATE, RUNNING\) to end first/);
});

test('quotas (429 RESOURCE_EXHAUSTED) and a busy instance (409 operationInProgress) are waited out with backoff', async () => {
  cloud.throttle(2);
  const run = await agent(agentDir(), ['--apply', 'work_mem=16MB']);
  assert.equal(run.code, 0, run.stdout + run.stderr);
  assert.match(run.stderr, /429 RESOURCE_EXHAUSTED: Quota exceeded .*; trying again in 0\.5 s \(attempt 2 of 8\)/);
  assert.equal(await setting('work_mem'), '16384');

  // Someone else's operation holds the instance when the agent writes.
  cloud.timing = { pendingMs: 100, runMs: 1_500 };
  cloud.beforeNextPatch(() =>
    withKey(async (api) => {
      const instance = await api.getInstance();
      await api.patchFlags(
        [...(instance.settings.databaseFlags ?? []), { name: 'log_checkpoints', value: 'on' }],
        instance.settings.settingsVersion,
      );
    }),
  );
  const busy = await agent(agentDir(), ['--apply', 'work_mem=20MB']);
  assert.equal(busy.code, 0, busy.stdout + busy.stderr);
  assert.ok(
    patches().some((r) => r.status === 409),
    show(patches()),
  );
  assert.match(busy.stderr, /409 ABORTED: Operation failed because another operation was already in progress/);
  assert.ok(
    cloud.instance.flags.some((f) => f.name === 'log_checkpoints'),
    "the other writer's flag is kept",
  );
  assert.equal(await setting('work_mem'), '20480');
});

/** Google's client in this process, as another writer (or the agent's API) with the key. */
async function withKey(run: (api: ManagedCApi) => Promise<void>): Promise<void> {
  const saved = process.env['GOOGLE_APPLICATION_CREDENTIALS'];
  process.env['GOOGLE_APPLICATION_CREDENTIALS'] = cloud.keyFile;
  try {
    await run(
      new ManagedCApi(
        { project: cloud.project, instance: cloud.instanceName, sqladminEndpoint: cloud.url },
        createLogger({ write: () => undefined }),
      ),
    );
  } finally {
    if (saved === undefined) delete process.env['GOOGLE_APPLICATION_CREDENTIALS'];
    else process.env['GOOGLE_APPLICATION_CREDENTIALS'] = saved;
  }
}

/** The Cloud C target in this process, against the fake; closed after `run`. */
async function inProcess(run: (target: Target, db: Db) => Promise<void>): Promise<void> {
  const saved = process.env['GOOGLE_APPLICATION_CREDENTIALS'];
  process.env['GOOGLE_APPLICATION_CREDENTIALS'] = cloud.keyFile;
  const { config } = loadConfig({ cwd: agentDir(), env: {}, target: 'managed-c', needsService: false });
  const db = await connectDb(cluster.agentUrl, { connection: await agentConnectionContext('managed-c', ca.certFile) });
  const target = await createManagedCTarget({ db, config, log: createLogger({ write: () => undefined }) });
  try {
    await run(target, db);
  } finally {
    await target.close();
    await db.close();
    if (saved === undefined) delete process.env['GOOGLE_APPLICATION_CREDENTIALS'];
    else process.env['GOOGLE_APPLICATION_CREDENTIALS'] = saved;
  }
}

test("in process: machine from the tier, overrides, Cloud Monitoring's metrics with canonical names, restart flags unwritable in reload-only mode", async () => {
  await inProcess(async (target, db) => {
    const { machine } = await target.machine();
    assert.deepEqual(machine, { vcpus: 2, memoryBytes: 7680 * MiB, storage: 'ssd', storageBytes: 100 * GiB });
    assert.deepEqual(await target.readOverrides(['work_mem', 'log_min_duration_statement']), {
      work_mem: { set: false },
      log_min_duration_statement: { set: true, value: '250' },
    });
    assert.equal(await target.applyBlockedReason(), null);
    const metrics = await target.metrics();
    for (const m of metrics) TargetMetricSchema.parse(m);
    const byName = new Map(metrics.map((m) => [m.name, m.value]));
    assert.equal(byName.get('cpu_percent'), 25);
    assert.equal(byName.get('memory_available_bytes'), Math.round(7680 * MiB * 0.5));
    assert.ok((byName.get('cloud-monitoring:postgresql/num_backends') ?? 0) >= 1);
    for (const name of ['disk/read_ops_count', 'disk/write_ops_count', 'memory/utilization'])
      assert.ok(byName.has(`cloud-monitoring:${name}`), name);
    const settings = await catalogSettings(db, target);
    assert.match(settings.find((s) => s.name === 'shared_buffers')?.unwritable ?? '', /Cloud SQL restarts the instance/);
  });
});

test("in process: a value outside Cloud SQL's range for this machine is refused before anything is written, and Cloud SQL's own refusal is reported, not retried", async () => {
  await inProcess(async (target) => {
    // effective_cache_size is limited by the instance's memory on Cloud SQL (70 % of 7.5 GiB here).
    await assert.rejects(
      target.writeOverrides({ effective_cache_size: { set: true, value: String((7 * GiB) / 8192) } }, { allowRestart: false }),
      /effective_cache_size = 917504 is not a value Cloud SQL allows for it on this instance \(expected a number from 1 to 688128\)/,
    );
    // Behind the catalog, the write itself never sends a flag that restarts the instance in
    // reload-only mode.
    await assert.rejects(
      target.writeOverrides({ shared_buffers: { set: true, value: '32768' } }, { allowRestart: false }),
      /refused, nothing was written: shared_buffers makes Cloud SQL restart the instance, and restarts are not allowed \(reload-only mode\)/,
    );
    assert.deepEqual(patches(), []);
  });
  await withKey(async (api) => {
    const instance = await api.getInstance();
    await assert.rejects(
      api.patchFlags([{ name: 'fsync', value: 'off' }], instance.settings.settingsVersion),
      /400 INVALID_ARGUMENT: Invalid flag name: fsync\./,
    );
  });
  assert.deepEqual(
    patches().map((r) => r.status),
    [400],
    'one refusal, not retried',
  );
  assert.deepEqual(cloud.instance.flags, CUSTOMER_FLAGS);
});

test('tiers: custom, shared-core, Enterprise Plus and legacy sizes; the merge keeps every other flag in place', () => {
  assert.deepEqual(sizeOfTier('db-custom-4-15360'), { vcpus: 4, memoryBytes: 15 * GiB });
  assert.deepEqual(sizeOfTier('db-f1-micro'), { vcpus: 1, memoryBytes: 0.6 * GiB });
  assert.deepEqual(sizeOfTier('db-perf-optimized-N-8'), { vcpus: 8, memoryBytes: 64 * GiB });
  assert.deepEqual(sizeOfTier('db-n1-standard-2'), { vcpus: 2, memoryBytes: 7.5 * GiB });
  assert.equal(sizeOfTier('db-unknown-1'), undefined);
  assert.deepEqual(
    mergeFlags(
      [
        { name: 'a', value: '1' },
        { name: 'work_mem', value: '4096' },
        { name: 'b', value: '2' },
      ],
      { work_mem: { set: false }, jit: { set: true, value: 'off' } },
    ),
    [
      { name: 'a', value: '1' },
      { name: 'b', value: '2' },
      { name: 'jit', value: 'off' },
    ],
  );
});

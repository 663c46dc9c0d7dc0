// End to end on Cloud C: a tuning session with the real service (PGlite storage), the real
// tuner-agent (--managed-c) and the fake Cloud SQL (test/fakes/cloud-sql) whose flags land on a
// throwaway cluster under load. Every trial and every revert goes through the Admin API's
// whole-list patch: at the end the instance holds the customer's flags exactly as they were, and
// pg_settings its baseline.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, test } from 'node:test';
import { startCluster, type Cluster } from '../src/lab/cluster.ts';
import { makeTestCa, type TestCa } from '../src/lab/tls.ts';
import { startDriver, type RunningDriver } from '../src/lab/load-driver.ts';
import { WORKLOADS } from '../src/lab/workloads.ts';
import { CUSTOMER_FLAGS, managedCSection, startFakeCloudSql, type FakeCloudSql } from './fakes/cloud-sql/index.ts';
import { startAgent, type AgentProcess } from './helpers/agent-process.ts';
import { startAdminService, type AdminService } from './helpers/service-admin.ts';
import { assertSessionShape, getTuningSession, startTuningSession } from './sessions-agent.ts';
import { until } from './helpers/until.ts';

let ca: TestCa;
let cluster: Cluster;
let cloud: FakeCloudSql;
let lab: AdminService;
let agent: AgentProcess | undefined;
/** The load: the built-in driver over the superuser's Unix socket (the cluster takes TCP over TLS only). */
let load: RunningDriver | undefined;
let dir: string;

before(async () => {
  ca = makeTestCa('fake Cloud SQL Server CA');
  cluster = await startCluster({ tls: { ca, names: ['tuner-project:tuner-sql-1'] } });
  await WORKLOADS['select-1'].setup(cluster);
  cloud = await startFakeCloudSql({ cluster, serverCa: ca.cert });
  await cloud.customerPatch(CUSTOMER_FLAGS);
  lab = await startAdminService('pglite');
  dir = mkdtempSync(join(tmpdir(), 'tuner-e2e-c-'));
});

after(async () => {
  agent?.child.kill('SIGTERM');
  if (agent) await Promise.race([agent.exited, sleep(15_000)]);
  await load?.stop();
  await lab?.close();
  await cloud?.close();
  await cluster?.destroy();
  ca?.remove();
  rmSync(dir, { recursive: true, force: true });
});

test(
  "a tuning session on Cloud C: trials and reverts through whole-list patches, the customer's flags untouched",
  { timeout: 300_000 },
  async () => {
    const person = lab.admin;
    const created = await person.createDatabase('e2e-cloud-c', 'managed-c');
    const interval = await person.post(`/api/manage/databases/${created.databaseId}/report-interval`, { reportIntervalSeconds: 1 });
    assert.equal(interval.status, 200, JSON.stringify(interval.body));
    const yaml = [
      'postgresql:',
      `  connection_url: ${cluster.agentUrl}`,
      `  extra_ca_file: ${ca.certFile}`,
      ...managedCSection(cloud),
      'tuner:',
      `  server_url: ${lab.service.url}`,
      `  api_key: ${created.apiKey}`,
      `  database_id: ${created.databaseId}`,
      '',
    ];
    writeFileSync(join(dir, 'agent.yaml'), yaml.join('\n'));
    const baseline = await cluster.sql<{ name: string; setting: string }>(
      "SELECT name, setting FROM pg_settings WHERE name IN ('work_mem', 'random_page_cost', 'effective_cache_size', 'log_min_duration_statement')",
    );
    agent = startAgent(['--managed-c'], {
      cwd: dir,
      env: { GOOGLE_APPLICATION_CREDENTIALS: cloud.keyFile, NO_PROXY: '127.0.0.1,localhost' },
    });
    const workload = WORKLOADS['select-1'];
    load = await startDriver(workload.script, {
      connectionString: cluster.adminUrl,
      clients: 2,
      ...(workload.variables && { variables: workload.variables }),
    });
    await until(
      'a report with load in it',
      async () => {
        const answer = await person.get<{ report: { metrics: { derived: { calls: number } } | null } | null }>(
          `/api/manage/databases/${created.databaseId}/reports/latest`,
        );
        return (answer.body.report?.metrics?.derived.calls ?? 0) > 0;
      },
      60_000,
    ).catch(() => assert.fail(agent!.output().slice(-3000)));

    const started = await startTuningSession(person, created.databaseId, {
      iterations: 2,
      windowSeconds: 4,
      warmupSeconds: 1,
      seed: 20261128,
      abRoundsMin: 3,
      abRoundsMax: 4,
      requireApproval: false,
    });
    const ended = await until(
      'the session to end',
      async () => {
        const { session } = await getTuningSession(person, created.databaseId, started.id);
        return ['done', 'failed', 'stopped'].includes(session.state) ? session : null;
      },
      240_000,
      500,
    );
    const { iterations } = await getTuningSession(person, created.databaseId, started.id);
    assert.equal(ended.state, 'done', `${ended.message ?? ''}\n${agent.output().slice(-3000)}`);
    assertSessionShape(iterations, 2);
    // Every trial reached Cloud SQL as a whole-list patch that kept the customer's flags.
    const patches = cloud.requests.filter((r) => r.method === 'PATCH' && r.status === 200);
    // At least one: how many depends on the trials (one refused before anything is written, as a
    // flag outside Cloud SQL's range is, makes none; a full run here once saw a session of 2 trials make 1).
    // That the instance ends on the flags found, below, is what proves the revert.
    const summary = iterations.map((it) => `#${it.ordinal} ${it.kind} ${it.state} ${it.failure ?? ''}`).join('\n');
    const calls = cloud.requests.map((r) => `${r.method} ${r.path} ${r.status}`).join('\n');
    assert.ok(patches.length >= 1, `${patches.length} patches\n${summary}\n${calls.slice(-3000)}`);
    console.log(`${ended.state}: ${ended.message ?? ''}; ${iterations.length} windows, ${patches.length} whole-list patches`);
    for (const p of patches) {
      const flags = (JSON.parse(p.body!) as { settings: { databaseFlags: { name: string; value: string }[] } }).settings.databaseFlags;
      for (const c of CUSTOMER_FLAGS)
        assert.ok(
          flags.some((f) => f.name === c.name && f.value === c.value),
          `${c.name} in ${p.body!}`,
        );
    }
    await until(
      'the instance back on the flags found and pg_settings on its baseline',
      async () => {
        await cloud.idle();
        const now = await cluster.sql<{ name: string; setting: string }>('SELECT name, setting FROM pg_settings WHERE name = ANY($1)', [
          baseline.map((b) => b.name),
        ]);
        return (
          JSON.stringify(cloud.instance.flags) === JSON.stringify(CUSTOMER_FLAGS) &&
          baseline.every((b) => now.find((n) => n.name === b.name)?.setting === b.setting)
        );
      },
      30_000,
    ).catch(() => assert.fail(`flags ${JSON.stringify(cloud.instance.flags)}`));
  },
);

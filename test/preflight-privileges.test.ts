// Issue 28: the most common setup slip, an agent_user without pg_monitor. `--check` prints the
// FAIL line with the spec's fix and exits 3 (it used to crash on shared_preload_libraries, which
// only pg_read_all_settings may read); a run refuses to tune, tells the service why (the
// dashboard and the API show it, a session is refused), refuses an apply command, and keeps
// reporting what it can collect.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { connectDb } from '../src/agent/database/db.ts';
import { databaseChecks, tuningBlockedReason } from '../src/agent/process/preflight.ts';
import { startCluster, type Cluster } from '../src/lab/cluster.ts';
import { grantLocalAgent } from './helpers/agent-cluster.ts';
import { runAgent, startAgent } from './helpers/agent-process.ts';
import { until } from './helpers/until.ts';
import type { PersonClient, TestService } from './helpers/service.ts';
import { startAdminService, type AdminService } from './helpers/service-admin.ts';

let cluster: Cluster;
let lab: AdminService;
let service: TestService;
let person: PersonClient;
const dirs: string[] = [];

function agentDir(databaseId: string, apiKey: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'tuner-preflight-priv-'));
  dirs.push(dir);
  const yaml = [
    'postgresql:',
    `  connection_url: ${cluster.agentUrl}`,
    'tuner:',
    `  server_url: ${service.url}`,
    `  api_key: ${apiKey}`,
    `  database_id: ${databaseId}`,
  ];
  writeFileSync(join(dir, 'agent.yaml'), `${yaml.join('\n')}\n`);
  return dir;
}

async function workMem(): Promise<string> {
  const [row] = await cluster.sql<{ setting: string }>(`SELECT setting FROM pg_settings WHERE name = 'work_mem'`);
  return row!.setting;
}

before(async () => {
  cluster = await startCluster();
  // Every right the local target needs to apply, but not pg_monitor.
  await grantLocalAgent(cluster);
  await cluster.sql('REVOKE pg_monitor FROM agent_user');
  lab = await startAdminService('pglite');
  ({ service, admin: person } = lab);
});

after(async () => {
  await lab?.close();
  await cluster?.destroy();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

test('--check without pg_monitor: the FAIL line with the GRANT, every other line still printed, exit 3', async () => {
  const { databaseId, apiKey } = await person.createDatabase('no-monitor-check', 'local');
  const run = await runAgent(['--local', '--check'], { cwd: agentDir(databaseId, apiKey) });
  assert.equal(run.code, 3, run.stdout + run.stderr);
  assert.doesNotMatch(run.stderr, /must be superuser|pg_read_all_settings to examine/, 'no crash on shared_preload_libraries');
  assert.match(
    run.stdout,
    /FAIL {2}agent_user is a member of pg_monitor: not granted; missing pg_read_all_settings, pg_read_all_stats, pg_stat_scan_tables\n {8}fix: as the master user: GRANT pg_monitor TO agent_user;/,
  );
  // shared_preload_libraries cannot be read, and the line says so and why; the view still tells.
  assert.match(
    run.stdout,
    /PASS {2}pg_stat_statements is preloaded: shared_preload_libraries cannot be read by agent_user \(it needs pg_read_all_settings, a part of pg_monitor\), but the pg_stat_statements view answers, so it is loaded/,
  );
  assert.match(run.stdout, /PASS {2}pg_stat_statements exists in database "postgres"/);
  assert.match(run.stdout, /PASS {2}pg_stat_statements\.track is top or all/);
  assert.match(run.stdout, /PASS {2}apply rights: pg_reload_conf\(\)/, "the target's lines still run");
  assert.match(run.stdout, new RegExp(`PASS {2}API key accepted for database ${databaseId}`), "the service's lines still run");
  assert.match(run.stdout, /preflight: 1 of \d+ checks failed/);
});

test('--check without pg_monitor and without the extension: both FAIL, preloading is a WARN that says why it cannot be told', async () => {
  await cluster.sql('DROP EXTENSION pg_stat_statements');
  try {
    const { databaseId, apiKey } = await person.createDatabase('no-monitor-no-ext', 'local');
    const run = await runAgent(['--local', '--check'], { cwd: agentDir(databaseId, apiKey) });
    assert.equal(run.code, 3, run.stdout + run.stderr);
    assert.match(run.stdout, /FAIL {2}agent_user is a member of pg_monitor/);
    assert.match(
      run.stdout,
      /FAIL {2}pg_stat_statements exists in database "postgres": not created\n {8}fix: as the master user, connected to database "postgres": CREATE EXTENSION IF NOT EXISTS pg_stat_statements;/,
    );
    assert.match(
      run.stdout,
      /WARN {2}pg_stat_statements is preloaded: shared_preload_libraries cannot be read by agent_user \(it needs pg_read_all_settings, a part of pg_monitor\), so whether it is preloaded cannot be told\n {8}fix: as the master user: GRANT pg_monitor TO agent_user;/,
    );
    assert.match(run.stdout, /preflight: 2 of \d+ checks failed/);

    // The fix in the spec's words for each cloud: who may create the extension, and what comes first.
    const db = await connectDb(cluster.agentUrl);
    try {
      const fixOf = async (kind: 'managed-a' | 'managed-b-flex') =>
        (await databaseChecks(db, kind)).find((c) => c.name.startsWith('pg_stat_statements exists'))?.fix;
      assert.equal(
        await fixOf('managed-a'),
        'as the master user (it has rds_superuser, which creating the extension needs), connected to database "postgres": CREATE EXTENSION IF NOT EXISTS pg_stat_statements;',
      );
      assert.equal(
        await fixOf('managed-b-flex'),
        'add pg_stat_statements to the server parameter azure.extensions (the extension allow-list), then as the admin user, connected to database "postgres": CREATE EXTENSION IF NOT EXISTS pg_stat_statements;',
      );
    } finally {
      await db.close();
    }
  } finally {
    await cluster.sql('CREATE EXTENSION pg_stat_statements');
  }
});

test('a run without pg_monitor reports, tells the service why it will not tune, and refuses sessions and apply commands', async () => {
  const { databaseId, apiKey } = await person.createDatabase('no-monitor-run', 'local');
  assert.equal((await person.post(`/api/manage/databases/${databaseId}/report-interval`, { reportIntervalSeconds: 1 })).status, 200);
  const before = await workMem();
  const agent = startAgent(['--local'], { cwd: agentDir(databaseId, apiKey) });
  type AgentView = { connected: boolean; applyBlockedReason: string | null; preflight: { status: string; name: string }[] | null };
  try {
    const view = await until(
      'the agent connected',
      async () => {
        const { body } = await person.get<{ database: { agent: AgentView | null } }>(`/api/manage/databases/${databaseId}`);
        return body.database.agent?.connected ? body.database.agent : undefined;
      },
      60_000,
    ).catch((err: unknown) => {
      throw new Error(`${(err as Error).message}; the agent printed:\n${agent.output()}`);
    });
    assert.match(
      view.applyBlockedReason ?? '',
      /^the preflight failed: agent_user is a member of pg_monitor: not granted.*; fix: as the master user: GRANT pg_monitor TO agent_user;; then restart the agent$/,
    );
    assert.deepEqual(
      view.preflight?.map((p) => `${p.status} ${p.name}`),
      ['fail agent_user is a member of pg_monitor'],
    );
    assert.match(agent.output(), /no change will be applied \(reports go on\): the preflight failed: agent_user is a member of pg_monitor/);

    // Monitoring goes on: reports with metrics arrive.
    for (let i = 0; i < 20; i++) await cluster.sql('SELECT count(*) FROM pg_class');
    await until('a report with metrics', async () => {
      const { body } = await person.get<{ report: { metrics: unknown } | null }>(`/api/manage/databases/${databaseId}/reports/latest`);
      return body.report?.metrics ?? null;
    });

    // The service refuses a tuning session with the reason.
    const session = await person.post<{ error: { code: string; message: string } }>(
      `/api/manage/databases/${databaseId}/tuning-sessions`,
      {},
    );
    assert.equal(session.status, 409, JSON.stringify(session.body));
    assert.match(
      session.body.error.message,
      /cannot apply changes to this database: the preflight failed: .*GRANT pg_monitor TO agent_user;/,
    );

    // The dashboard shows it.
    const page = await person.get<string>(`/databases/${databaseId}`);
    assert.match(page.body, /<span class="badge bad">blocked<\/span> the preflight failed: agent_user is a member of pg_monitor/);
    assert.match(
      page.body,
      /<div class="notice warn" id="tuning-blocked" role="status"><strong>No tuning session can start<\/strong>: the agent cannot apply changes to this database: the preflight failed: agent_user is a member of pg_monitor/,
    );
    assert.doesNotMatch(page.body, /id="session-start"/, 'no start form');

    // A command sent anyway is refused by the agent itself, and nothing changes.
    const issued = await person.post<{ command: { id: string } }>(`/api/manage/databases/${databaseId}/commands`, {
      kind: 'apply',
      values: { work_mem: '8MB' },
      keep: true,
    });
    assert.equal(issued.status, 201);
    type CommandView = { id: string; state: string; outcome: { errors: string[]; effective: Record<string, string> } | null };
    const done = await until('the command to be acknowledged', async () => {
      const list = (await person.get<{ commands: CommandView[] }>(`/api/manage/databases/${databaseId}/commands`)).body.commands;
      return list.find((c) => c.id === issued.body.command.id && c.outcome) ?? null;
    });
    assert.equal(done.state, 'refused');
    assert.match(done.outcome!.errors.join('\n'), /tuning is blocked until the preflight passes, nothing was changed: .*GRANT pg_monitor/);
    assert.deepEqual(done.outcome!.effective, {});
    assert.equal(await workMem(), before, 'work_mem untouched');
  } finally {
    agent.child.kill('SIGTERM');
    assert.equal(await agent.exited, 0, agent.output());
  }
});

test('what blocks tuning: a FAIL line; not a warning, nor a group that could not be checked (the database restarting)', () => {
  const pass = { name: 'connect to PostgreSQL', ok: true, detail: 'PostgreSQL 15' };
  const warn = { name: 'journal', ok: false, severity: 'warning' as const, detail: 'unfinished' };
  const unchecked = { name: 'the database prerequisites', ok: false, detail: 'could not be checked: ECONNREFUSED', unchecked: true };
  assert.equal(tuningBlockedReason([pass, warn, unchecked]), null);
  const monitor = {
    name: 'agent_user is a member of pg_monitor',
    ok: false,
    detail: 'not granted',
    fix: 'GRANT pg_monitor TO agent_user;',
  };
  const rights = { name: 'apply rights: pg_reload_conf()', ok: false, detail: 'not granted' };
  assert.equal(
    tuningBlockedReason([pass, monitor, warn, rights]),
    'the preflight failed: agent_user is a member of pg_monitor: not granted; fix: GRANT pg_monitor TO agent_user; (and 1 more FAIL line(s): see tuner-agent --check); then restart the agent',
  );
  const long = tuningBlockedReason([{ ...monitor, detail: 'x'.repeat(600) }])!;
  assert.equal(long.length, 500, "cut to the protocol's length");
});

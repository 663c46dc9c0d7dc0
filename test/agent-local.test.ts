// The real tuner-agent process against a real throwaway cluster, as agent_user with only the
// least-privilege grants that `tuner-agent permissions --local` prints.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { JOURNAL_FILE_NAME } from '../src/agent/applying/journal.ts';
import { localGrantsSql } from '../src/agent/targets/local/permissions.ts';
import { AGENT_USER_PASSWORD_FOR_TESTS, startCluster, type Cluster } from '../src/lab/cluster.ts';
import { runAgent, type AgentRun } from './helpers/agent-process.ts';

let cluster: Cluster;
const dirs: string[] = [];
/** Every line any agent printed in this file, to look for secrets at the end. */
const transcript: string[] = [];

function agentDir(overrides: { url?: string; allowRestart?: boolean; restartCommand?: string; includeQueries?: boolean } = {}): string {
  const dir = mkdtempSync(join(tmpdir(), 'tuner-agent-'));
  dirs.push(dir);
  const lines = [
    'postgresql:',
    `  connection_url: ${overrides.url ?? cluster.agentUrl}`,
    `  include_queries: ${overrides.includeQueries ?? true}`,
    `  allow_restart: ${overrides.allowRestart ?? false}`,
    // No tuning service here (test/preflight.test.ts checks the service's part of --check).
    'tuner:',
    '  debug: true',
  ];
  if (overrides.restartCommand) lines.push('local:', `  restart_command: ${JSON.stringify(overrides.restartCommand)}`);
  writeFileSync(join(dir, 'agent.yaml'), `${lines.join('\n')}\n`);
  return dir;
}

async function agent(dir: string, ...args: string[]): Promise<AgentRun> {
  const result = await runAgent(args, { cwd: dir });
  transcript.push(result.stdout, result.stderr);
  return result;
}

async function setting(name: string): Promise<{ setting: string; pending_restart: boolean }> {
  const [row] = await cluster.sql<{ setting: string; pending_restart: boolean }>(
    'SELECT setting, pending_restart FROM pg_settings WHERE name = $1',
    [name],
  );
  return row!;
}

async function autoConf(name: string): Promise<string | undefined> {
  const rows = await cluster.sql<{ setting: string }>(
    `SELECT setting FROM pg_file_settings WHERE sourcefile LIKE '%postgresql.auto.conf' AND name = $1`,
    [name],
  );
  return rows.at(-1)?.setting;
}

before(async () => {
  cluster = await startCluster();
  for (const statement of localGrantsSql('agent_user')
    .split('\n')
    .filter((l) => l.startsWith('GRANT'))) {
    await cluster.sql(statement);
  }
  await cluster.sql('CREATE DATABASE nopgss');
});

after(async () => {
  await cluster?.destroy();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

test('--check passes for a least-privilege agent_user and names each prerequisite', async () => {
  const run = await agent(agentDir(), '--local', '--check');
  assert.equal(run.code, 0, run.stdout + run.stderr);
  assert.match(run.stdout, /PASS {2}agent_user is a member of pg_monitor/);
  assert.match(run.stdout, /PASS {2}pg_stat_statements exists in database "postgres"/);
  assert.match(run.stdout, /PASS {2}apply rights: ALTER SYSTEM on the tuned parameters/);
  assert.match(run.stdout, /WARN {2}tuning service configured: tuner\.server_url, tuner\.api_key and tuner\.database_id are not all set/);
  assert.match(run.stdout, /preflight: all \d+ checks passed/);
});

test('--check fails with the fix when pg_stat_statements is missing in the database of connection_url', async () => {
  const url = cluster.agentUrl.replace(/\/postgres$/, '/nopgss');
  const run = await agent(agentDir({ url }), '--local', '--check');
  assert.equal(run.code, 3);
  assert.match(
    run.stdout,
    /FAIL {2}pg_stat_statements exists in database "nopgss": not created\n\s+fix: .*CREATE EXTENSION IF NOT EXISTS pg_stat_statements;/,
  );
});

test('--check names the missing grants for a role without apply rights', async () => {
  await cluster.sql(`CREATE USER plain_monitor WITH PASSWORD 'plain-pw-55aa' IN ROLE pg_monitor`);
  const url = `postgresql://plain_monitor:plain-pw-55aa@${cluster.host}:${cluster.port}/postgres`;
  const run = await agent(agentDir({ url }), '--local', '--check');
  assert.equal(run.code, 3);
  assert.match(run.stdout, /FAIL {2}apply rights: ALTER SYSTEM on the tuned parameters: missing on .*work_mem/);
  assert.match(run.stdout, /fix: as a superuser: GRANT ALTER SYSTEM ON PARAMETER .*work_mem.* TO plain_monitor;/);
  assert.match(run.stdout, /FAIL {2}apply rights: pg_reload_conf\(\): not granted/);
});

test('apply → read back → revert restores every value exactly, "was not set" included', async () => {
  const dir = agentDir();
  // One parameter the operator had already set with ALTER SYSTEM, in their own spelling.
  await cluster.sql(`ALTER SYSTEM SET bgwriter_delay = '300ms'`);
  await cluster.sql('SELECT pg_reload_conf()');
  const before = {
    work_mem: await setting('work_mem'),
    random_page_cost: await setting('random_page_cost'),
    bgwriter_delay: await setting('bgwriter_delay'),
  };
  assert.equal(before.bgwriter_delay.setting, '300');

  const applied = await agent(
    dir,
    '--local',
    '--apply',
    'work_mem=8MB',
    '--apply',
    'random_page_cost=1.1',
    '--apply',
    'bgwriter_delay=50ms',
  );
  assert.equal(applied.code, 0, applied.stderr);
  assert.match(applied.stdout, /applied and read back from pg_settings: work_mem = 8192, random_page_cost = 1\.1, bgwriter_delay = 50/);
  assert.equal((await setting('work_mem')).setting, '8192');
  assert.equal((await setting('random_page_cost')).setting, '1.1');
  assert.equal((await setting('bgwriter_delay')).setting, '50');

  const reverted = await agent(dir, '--local', '--revert');
  assert.equal(reverted.code, 0, reverted.stderr);
  assert.equal((await setting('work_mem')).setting, before.work_mem.setting);
  assert.equal((await setting('random_page_cost')).setting, before.random_page_cost.setting);
  assert.equal((await setting('bgwriter_delay')).setting, '300');
  // Not only the values: postgresql.auto.conf is as it was found.
  assert.equal(await autoConf('work_mem'), undefined);
  assert.equal(await autoConf('random_page_cost'), undefined);
  assert.equal(await autoConf('bgwriter_delay'), '300ms');
  await cluster.sql('ALTER SYSTEM RESET bgwriter_delay');
  await cluster.sql('SELECT pg_reload_conf()');
});

test('a change writes only what differs from known-good: values the server runs already add no entry', async () => {
  const dir = agentDir();
  const workMem = (await setting('work_mem')).setting;
  const applied = await agent(
    dir,
    '--local',
    '--apply',
    `work_mem=${workMem}`,
    '--apply',
    'random_page_cost=2',
    '--apply',
    'commit_delay=0',
  );
  assert.equal(applied.code, 0, applied.stderr);
  assert.equal((await setting('random_page_cost')).setting, '2');
  assert.equal(await autoConf('random_page_cost'), '2');
  // Asked for at the values the server runs (its defaults): no ALTER SYSTEM entry for them.
  assert.equal(await autoConf('work_mem'), undefined);
  assert.equal(await autoConf('commit_delay'), undefined);
  const reverted = await agent(dir, '--local', '--revert');
  assert.equal(reverted.code, 0, reverted.stderr);
  assert.equal(await autoConf('random_page_cost'), undefined);
});

test('a forbidden or out-of-bounds value refuses the whole change and changes nothing', async () => {
  const dir = agentDir();
  const workMem = (await setting('work_mem')).setting;
  const cases: [string[], RegExp][] = [
    [['--apply', 'work_mem=16MB', '--apply', 'fsync=off'], /fsync/],
    [['--apply', 'work_mem=16MB', '--apply', 'synchronous_commit=off'], /synchronous_commit/],
    [['--apply', 'work_mem=900GB'], /work_mem/],
    [['--apply', 'work_mem=16MB', '--apply', 'shared_buffers=256MB'], /shared_buffers/],
    [['--apply', 'work_mem=lots'], /work_mem/],
    [['--apply', 'not_a_parameter=1'], /not_a_parameter/],
  ];
  for (const [args, mention] of cases) {
    const run = await agent(dir, '--local', ...args);
    assert.equal(run.code, 4, `${args.join(' ')}: ${run.stderr}`);
    assert.match(run.stderr, /refused, nothing was changed/);
    assert.match(run.stderr, mention);
    assert.equal((await setting('work_mem')).setting, workMem, args.join(' '));
    assert.equal(await autoConf('work_mem'), undefined, args.join(' '));
  }
  assert.equal(existsSync(join(dir, JOURNAL_FILE_NAME)), false, 'a refused change writes no journal');
});

test('SIGKILL during an apply, then a new start: the database is back at known-good', async () => {
  const marker = join(tmpdir(), `tuner-restart-${process.pid}`);
  // The restart command signals that it started, then hangs: the agent is killed inside it.
  const dir = agentDir({ allowRestart: true, restartCommand: `touch ${marker}; sleep 60; ${cluster.restartCommand}` });
  const sharedBuffers = await setting('shared_buffers');
  const child = spawn(
    process.execPath,
    [join(import.meta.dirname, '..', 'bin', 'tuner-agent.js'), '--local', '--apply', 'shared_buffers=256MB'],
    {
      cwd: dir,
      detached: true,
      stdio: 'ignore',
    },
  );
  const deadline = Date.now() + 30_000;
  while (!existsSync(marker)) {
    assert.ok(Date.now() < deadline, 'the agent never reached its restart');
    await new Promise((r) => setTimeout(r, 50));
  }
  process.kill(-child.pid!, 'SIGKILL');
  rmSync(marker, { force: true });
  // The crash left the new value in postgresql.auto.conf, waiting for a restart.
  assert.equal(await autoConf('shared_buffers'), '32768');
  assert.equal((await setting('shared_buffers')).pending_restart, true);
  const journal = JSON.parse(readFileSync(join(dir, JOURNAL_FILE_NAME), 'utf8')) as { inFlight: unknown };
  assert.notEqual(journal.inFlight, null);

  // A new start with a harmless command recovers first.
  writeFileSync(join(dir, 'agent.yaml'), readFileSync(join(dir, 'agent.yaml'), 'utf8').replace(/local:\n.*\n/, ''));
  const again = await agent(dir, '--local', '--revert');
  assert.equal(again.code, 0, again.stderr);
  assert.match(again.stderr, /an unfinished change .* was found/);
  assert.equal(await autoConf('shared_buffers'), undefined);
  const now = await setting('shared_buffers');
  assert.equal(now.setting, sharedBuffers.setting);
  assert.equal(now.pending_restart, false);
});

test('restart mode: a restart-context change is applied through the restart command and reverted', async () => {
  const dir = agentDir({ allowRestart: true, restartCommand: cluster.restartCommand });
  const original = (await setting('shared_buffers')).setting;
  const applied = await agent(dir, '--local', '--apply', 'shared_buffers=192MB');
  assert.equal(applied.code, 0, applied.stderr);
  assert.match(applied.stdout, /\(after a restart\): shared_buffers = 24576/);
  assert.equal((await setting('shared_buffers')).setting, '24576');
  const reverted = await agent(dir, '--local', '--revert');
  assert.equal(reverted.code, 0, reverted.stderr);
  assert.equal((await setting('shared_buffers')).setting, original);
  assert.equal(await autoConf('shared_buffers'), undefined);
});

test('--once prints one JSON report; include_queries: false keeps every query text inside', async () => {
  await cluster.sql('CREATE TABLE IF NOT EXISTS once_probe_tbl (id int)');
  const withText = await agent(agentDir(), '--local', '--once', '--interval', '1');
  assert.equal(withText.code, 0, withText.stderr);
  const report = JSON.parse(withText.stdout) as Record<string, unknown>;
  assert.ok(report['metrics'], 'the report has metrics');
  assert.ok(report['system'], 'the report describes the system');

  const dir = agentDir({ includeQueries: false });
  // The probe queries run until the agent is done, so that some fall between its two snapshots
  // however long the agent takes to start on a loaded machine.
  let done = false;
  const pending = agent(dir, '--local', '--once', '--interval', '2').finally(() => (done = true));
  while (!done) await cluster.sql('SELECT count(*) FROM once_probe_tbl');
  const withoutText = await pending;
  assert.equal(withoutText.code, 0, withoutText.stderr);
  assert.ok(!withoutText.stdout.includes('once_probe_tbl'), 'a query text left the agent');
  assert.ok(withoutText.stdout.includes('"calls"'), 'statements are still reported');
});

test('a wrong password: exit 1, a clear line, and the password nowhere (--check makes it a FAIL line: test/preflight.test.ts)', async () => {
  const url = cluster.agentUrl.replace(AGENT_USER_PASSWORD_FOR_TESTS, 'wrong-Password-991');
  const run = await agent(agentDir({ url }), '--local', '--once', '--interval', '1');
  assert.equal(run.code, 1);
  assert.match(
    run.stderr,
    /cannot connect to PostgreSQL at 127\.0\.0\.1:\d+, database "postgres", as agent_user: password authentication failed/,
  );
  assert.ok(!run.stderr.includes('wrong-Password-991'));
});

test('usage errors exit 2 with a clear line', async () => {
  const dir = agentDir();
  const cases: [string[], RegExp][] = [
    [['--check'], /choose a target/],
    [['--local', '--managed-a'], /choose one target, not --local and --managed-a/],
    [['--local', '--bogus'], /Unknown option '--bogus'/],
    [['--local', '--apply', 'work_mem'], /expected NAME=VALUE/],
    [['--local', '--once', '--interval', '0'], /--interval 0: expected a number of seconds from 1 to 3600/],
    [['--local', '--check', '--once'], /choose one command/],
  ];
  for (const [args, message] of cases) {
    const run = await agent(dir, ...args);
    assert.equal(run.code, 2, args.join(' '));
    assert.match(run.stderr, message);
  }
  const help = await agent(dir, '--help');
  assert.equal(help.code, 0);
  assert.match(help.stdout, /Exit codes: 0 ok, 1 runtime failure, 2 usage or configuration error, 3 preflight failed/);
  const version = await agent(dir, '--version');
  assert.match(version.stdout, /^tuner-agent \d+\.\d+\.\d+\n$/);
});

test('no secret appears in anything the agent printed in this file', () => {
  const all = transcript.join('\n');
  assert.ok(all.length > 1000, 'the transcript holds the runs above');
  for (const secret of [AGENT_USER_PASSWORD_FOR_TESTS, 'plain-pw-55aa', 'wrong-Password-991']) {
    assert.ok(!all.includes(secret), `a secret leaked: ${secret.slice(0, 3)}…`);
  }
});

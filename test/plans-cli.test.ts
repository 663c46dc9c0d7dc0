// Issue 44 through the real tuner-agent process: `tuner-agent plans --local [--set NAME=VALUE]`
// on a cluster running a NOT IN report, postgresql.include_plans and its --check line, and no
// secret or literal in what it prints.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { AGENT_QUERY_MARKER } from '../src/agent/database/db.ts';
import { startCluster, type Cluster } from '../src/lab/cluster.ts';
import { runAgent, type AgentRun } from './helpers/agent-process.ts';
import { createReportWorkload, NOT_IN_REPORT, runAsApp } from './helpers/plans-workload.ts';

let cluster: Cluster;
const dirs: string[] = [];
const transcript: string[] = [];
const SECRET = 'hunter2-plans-7d1e';

function agentDir(lines: string[] = []): string {
  const dir = mkdtempSync(join(tmpdir(), 'tuner-plans-'));
  dirs.push(dir);
  writeFileSync(join(dir, 'agent.yaml'), ['postgresql:', `  connection_url: ${cluster.agentUrl}`, ...lines, ''].join('\n'));
  return dir;
}

async function agent(dir: string, args: string[], env: NodeJS.ProcessEnv = {}): Promise<AgentRun> {
  const run = await runAgent(args, { cwd: dir, env });
  transcript.push(run.stdout, run.stderr);
  return run;
}

interface Shown {
  queryId: string;
  text?: string;
  current?: { fingerprint: { subplans: { plain: number; hashed: number } }; tree: string[] };
  candidate?: { fingerprint: { subplans: { plain: number; hashed: number } }; tree: string[] };
  changed?: boolean;
  changes?: string[];
  notPlanned?: string;
}

function report(run: AgentRun): Shown {
  assert.equal(run.code, 0, run.stdout + run.stderr);
  const parsed = JSON.parse(run.stdout) as { statements: Shown[] };
  const found = parsed.statements.find((s) => s.text?.includes('report_excluded'));
  assert.ok(found, run.stdout);
  return found;
}

/** The application's own entry of the report (its user's): what the collector measures. */
const reportCalls = async () => {
  const [row] = await cluster.sql<{ calls: string }>(
    `SELECT sum(calls)::text AS calls FROM pg_stat_statements
      WHERE query LIKE '%NOT IN (SELECT id FROM report_excluded)%' AND userid = 'postgres'::regrole`,
  );
  return row?.calls;
};

before(async () => {
  cluster = await startCluster();
  await createReportWorkload(cluster);
  await cluster.sql('REVOKE pg_read_all_data FROM agent_user');
  await cluster.sql('SELECT pg_stat_statements_reset()');
  await runAsApp(cluster, [
    [NOT_IN_REPORT, [1]],
    [NOT_IN_REPORT, [2]],
  ]);
  // A text pg_stat_statements keeps with its comment: the comment's secret must not come out. It
  // sleeps as long as the report took, so that each carries about half the time and both are in
  // the top (80 % of the time): a fixed sleep carried it alone when the report ran fast.
  const [reportTime] = await cluster.sql<{ ms: number }>(
    `SELECT sum(total_exec_time)::float8 AS ms FROM pg_stat_statements WHERE query LIKE '%NOT IN (SELECT id FROM report_excluded)%'`,
  );
  await runAsApp(cluster, [[`SELECT pg_sleep($1) /* password: ${SECRET} */`, [Math.max(0.001, reportTime!.ms / 1000)]]]);
});

after(async () => {
  await cluster?.destroy();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

test('--check says, with include_plans, which top statements the agent cannot plan and the grant; without it, nothing', async () => {
  const without = await agent(agentDir(), ['--local', '--check']);
  assert.doesNotMatch(without.stdout, /planner probe/);

  const denied = await agent(agentDir(), ['--local', '--check'], { AGENT_POSTGRESQL_INCLUDE_PLANS: 'true' });
  assert.equal(denied.code, 3, denied.stdout);
  assert.match(
    denied.stdout,
    /FAIL {2}the planner probe plans the top statements \(include_plans\): .*not planned for want of privileges: queryid -?\d+ \(SELECT count\(\*\) FROM report_rows WHERE region = \$1 AND id NOT IN/,
  );
  assert.match(denied.stdout, /fix: as the master user: GRANT pg_read_all_data TO agent_user;/);

  await cluster.sql('GRANT pg_read_all_data TO agent_user');
  const granted = await agent(agentDir(['  include_plans: true']), ['--local', '--check']);
  assert.match(granted.stdout, /PASS {2}the planner probe plans the top statements \(include_plans\): \d+ of \d+ planned \(prepare\)/);
});

test('plans --local --set work_mem=64MB shows the NOT IN report becoming a hashed subplan; without --set, the current plan, and nothing changed', async () => {
  await cluster.sql('GRANT pg_read_all_data TO agent_user');
  const callsBefore = await reportCalls();
  const dir = agentDir();

  const withSet = report(await agent(dir, ['plans', '--local', '--set', 'work_mem=64MB']));
  assert.equal(withSet.changed, true);
  assert.deepEqual(withSet.current?.fingerprint.subplans, { plain: 1, hashed: 0 });
  assert.deepEqual(withSet.candidate?.fingerprint.subplans, { plain: 0, hashed: 1 });
  assert.ok(
    withSet.candidate?.tree.some((line) => /-> SubPlan \d+ \(hashed\): Seq Scan on report_excluded/.test(line)),
    withSet.candidate?.tree.join('\n'),
  );
  assert.ok(withSet.changes?.includes(withSet.changes.find((c) => c.startsWith('+ SubPlan'))!));

  const plain = report(await agent(dir, ['plans', '--local']));
  assert.equal(plain.candidate, undefined);
  assert.equal(plain.changed, undefined);
  assert.deepEqual(plain.current?.fingerprint.subplans, { plain: 1, hashed: 0 }, 'the --set run changed nothing on the server');

  // Planned, never run: the application's calls did not move. pg_stat_statements counts each
  // EXPLAIN under the agent's user, in entries whose text carries the agent's marker, which the
  // collector leaves out; the server's work_mem is its own.
  assert.equal(await reportCalls(), callsBefore);
  const probes = await cluster.sql<{ query: string }>(
    `SELECT query FROM pg_stat_statements WHERE userid = 'agent_user'::regrole AND query LIKE '%report_excluded%'`,
  );
  assert.ok(probes.length > 0, 'the EXPLAINs are in pg_stat_statements, so the check above can fail');
  for (const { query } of probes) assert.ok(query.includes(AGENT_QUERY_MARKER), query);
  const [setting] = await cluster.sql<{ setting: string; source: string }>(
    `SELECT setting, source FROM pg_settings WHERE name = 'work_mem'`,
  );
  assert.deepEqual(setting, { setting: '4096', source: 'default' });
});

test('plans prints no secret and no literal: texts redacted as reports are, what leaves the host parses', async () => {
  const run = await agent(agentDir(), ['plans', '--local', '--set', 'work_mem=64MB', '--set', 'shared_buffers=1GB']);
  assert.equal(run.code, 0, run.stderr);
  assert.ok(!run.stdout.includes(SECRET), run.stdout);
  const parsed = JSON.parse(run.stdout) as { statements: Shown[]; notPlannableSettings: { name: string }[] };
  assert.ok(
    parsed.statements.some((s) => s.text === 'SELECT pg_sleep($1) /* */'),
    JSON.stringify(parsed.statements.map((s) => s.text)),
  );
  assert.deepEqual(
    parsed.notPlannableSettings.map((s) => s.name),
    ['shared_buffers'],
  );
  // The trees name nodes, relations and costs only: no filter, condition or output list.
  assert.doesNotMatch(run.stdout, /"(Filter|Index Cond|Output)"/);
  for (const text of transcript) assert.ok(!text.includes(SECRET));
});

test('--set goes with plans only, and takes NAME=VALUE', async () => {
  const dir = agentDir();
  const stray = await agent(dir, ['--local', '--check', '--set', 'work_mem=64MB']);
  assert.equal(stray.code, 2);
  assert.match(stray.stderr, /--set goes with plans only/);
  const malformed = await agent(dir, ['plans', '--local', '--set', 'work_mem']);
  assert.equal(malformed.code, 2);
  assert.match(malformed.stderr, /--set work_mem: expected NAME=VALUE/);
});

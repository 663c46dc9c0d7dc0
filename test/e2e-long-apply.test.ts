// An apply or a revert that takes longer than three report intervals (issue #40): the real
// tuner-agent (--local, restart mode) whose restart command waits until the test lets it go, a
// service whose leases last 3 report intervals of 1 s. While the apply or the guardrail's revert
// waits the agent keeps reporting, so its lease lives and the service sees it (before the fix it
// went silent, the lease lapsed, and the agent had to start again once it was done), and a
// command handed over meanwhile is carried out once it is.
import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, test } from 'node:test';
import pg from 'pg';
import type { Cluster } from '../src/lab/cluster.ts';
import { startAgentCluster } from './helpers/agent-cluster.ts';
import { startAgent, type AgentProcess } from './helpers/agent-process.ts';
import { startAdminService, type AdminService } from './helpers/service-admin.ts';
import { timeoutFor, until } from './helpers/until.ts';

let cluster: Cluster;
let lab: AdminService;
/** The agent of the case running; each case stops it (back to known-good) before the next. */
let agent: AgentProcess | undefined;
const dirs: string[] = [];

before(async () => {
  cluster = await startAgentCluster();
  // PostgreSQL storage: the guardrail case gives a command a delivery deadline in SQL.
  lab = await startAdminService('postgres', { env: { TUNER_LEASE_MIN_SECONDS: '1' } });
});
after(async () => {
  for (const d of dirs) rmSync(join(d, 'hold'), { force: true });
  await stopAgent();
  await lab?.close();
  await cluster?.destroy();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

async function stopAgent(): Promise<void> {
  if (!agent) return;
  agent.child.kill('SIGTERM');
  await Promise.race([agent.exited, sleep(15_000)]);
  agent = undefined;
}

interface CommandView {
  id: string;
  state: string;
  outcome: unknown;
}

interface AgentView {
  startedAt: string;
  lastReportAt: string | null;
}

/**
 * A database reporting every second, and the real agent on the test's cluster in restart mode,
 * whose restart command waits while the file `hold` exists (and says so with `waiting`).
 * `yaml`: more lines of agent.yaml.
 */
async function heldRestartAgent(name: string, yaml: string[] = []) {
  const person = lab.admin;
  const { databaseId, apiKey } = await person.createDatabase(name, 'local');
  assert.equal((await person.post(`/api/manage/databases/${databaseId}/report-interval`, { reportIntervalSeconds: 1 })).status, 200);
  const dir = mkdtempSync(join(tmpdir(), `tuner-${name}-`));
  dirs.push(dir);
  const hold = join(dir, 'hold');
  const waiting = join(dir, 'waiting');
  const restartCommand = `if [ -e ${hold} ]; then touch ${waiting}; while [ -e ${hold} ]; do sleep 0.1; done; fi; ${cluster.restartCommand}`;
  writeFileSync(
    join(dir, 'agent.yaml'),
    [
      'postgresql:',
      `  connection_url: ${cluster.agentUrl}`,
      '  allow_restart: true',
      'local:',
      `  restart_command: ${JSON.stringify(restartCommand)}`,
      ...yaml,
      'tuner:',
      `  server_url: ${lab.service.url}`,
      `  api_key: ${apiKey}`,
      `  database_id: ${databaseId}`,
      '',
    ].join('\n'),
  );
  const started = startAgent(['--local'], { cwd: dir });
  agent = started;
  const agentView = async () =>
    (await person.get<{ database: { agent: AgentView | null } }>(`/api/manage/databases/${databaseId}`)).body.database.agent;
  const first = await until('the first report', async () => ((await agentView())?.lastReportAt ? await agentView() : null), 30_000);
  return {
    databaseId,
    agent: started,
    first,
    hold: () => writeFileSync(hold, ''),
    release: () => rmSync(hold, { force: true }),
    waiting: () => until('the restart command to be waiting', () => Promise.resolve(existsSync(waiting)), 30_000),
    /** Collects each report's time; true once `n` distinct reports were seen. */
    reports: (seen: Set<string>, n: number) => async () => {
      const view = await agentView();
      if (view?.lastReportAt) seen.add(view.lastReportAt);
      return seen.size >= n;
    },
    agentView,
    issue: async (body: Record<string, unknown>) => {
      const issued = await person.post<{ command: { id: string } }>(`/api/manage/databases/${databaseId}/commands`, body);
      assert.equal(issued.status, 201, JSON.stringify(issued.body));
      return issued.body.command.id;
    },
    outcome: (id: string, timeoutMs: number) =>
      until(
        `command ${id} acknowledged`,
        async () =>
          (await person.get<{ commands: CommandView[] }>(`/api/manage/databases/${databaseId}/commands`)).body.commands.find(
            (c) => c.id === id && c.outcome,
          ) ?? null,
        timeoutMs,
      ),
  };
}

test(
  'the agent keeps reporting, and keeps its lease, while an apply waits longer than three report intervals',
  { timeout: timeoutFor([30_000, 30_000, 30_000, 60_000]) },
  async () => {
    const a = await heldRestartAgent('long-apply');
    a.hold();
    const id = await a.issue({ kind: 'apply', values: { shared_buffers: '192MB' }, allowRestart: true, keep: false });
    await a.waiting();
    // Four reports while the apply waits (the lease lasts three): each one is a new lastReportAt.
    try {
      await until('four reports while the apply waits', a.reports(new Set(), 5), 30_000, 100);
    } finally {
      a.release();
    }
    const done = await a.outcome(id, 60_000);
    assert.equal(done.state, 'applied', JSON.stringify(done.outcome));
    assert.equal((await a.agentView())?.startedAt, a.first.startedAt, 'the same lease all along: the agent never had to start again');
    assert.doesNotMatch(a.agent.output(), /asks for a new start/);
    // Back to known-good before the next case's agent.
    await stopAgent();
  },
);

test(
  "a guardrail's revert that waits longer than three report intervals: the agent keeps reporting, keeps its lease, and carries out a command handed over meanwhile",
  { timeout: timeoutFor([30_000, 60_000, 30_000, 30_000, 60_000, 30_000]) },
  async () => {
    const sharedBuffers = async () =>
      (await cluster.sql<{ v: string }>(`SELECT current_setting('shared_buffers') AS v`).catch(() => []))[0]?.v;
    const found = await sharedBuffers();
    // Stricter than the default, so that a few connections breach it.
    const a = await heldRestartAgent('long-revert', ['guardrails:', '  connection_share_percent: 20']);
    const clients: pg.Client[] = [];
    try {
      await a.issue({ kind: 'apply', values: { shared_buffers: '160MB' }, allowRestart: true, keep: false });
      await until('the trial applied', () => Promise.resolve(/\(apply\): applied/.test(a.agent.output())), 60_000);

      // The trial breaches the guardrail (30 connections of max_connections 100), and its revert's
      // restart waits until the test lets it go.
      a.hold();
      for (let i = 0; i < 30; i++) {
        const client = new pg.Client({ connectionString: cluster.adminUrl });
        client.on('error', () => undefined);
        await client.connect();
        clients.push(client);
      }
      await a.waiting();
      assert.match(a.agent.output(), /guardrail: connections at \d+ % of max_connections.*reverting trial/);
      for (const client of clients.splice(0)) await client.end().catch(() => undefined);

      // A command handed over while the revert waits, with a delivery deadline as a session's
      // trials have: the service does not send it again once the deadline passed, so an agent
      // that only drops it while busy leaves it (and its session) waiting for the ack timeout.
      const next = await a.issue({ kind: 'apply', values: { random_page_cost: 1.3 }, keep: false });
      const storage = new pg.Client({ connectionString: lab.store.databaseUrl });
      await storage.connect();
      const seen = new Set<string>();
      try {
        await storage.query(`UPDATE commands SET deliver_by = now() + interval '3 seconds' WHERE id = $1`, [next]);
        const reported = a.reports(seen, 5);
        await until(
          'four reports while the revert waits, and the next command handed over and past its deadline',
          async () => {
            const { rows } = await storage.query<{ sent: boolean }>(
              `SELECT status = 'sent' AND deliver_by < now() AS sent FROM commands WHERE id = $1`,
              [next],
            );
            return (await reported()) && rows[0]?.sent;
          },
          30_000,
          100,
        );
      } finally {
        a.release();
        await storage.end();
      }
      await until('the trial reverted', async () => (await sharedBuffers()) === found, 60_000);
      const carriedOut = await a.outcome(next, 30_000);
      assert.equal(carriedOut.state, 'applied', JSON.stringify(carriedOut.outcome));
      assert.equal((await a.agentView())?.startedAt, a.first.startedAt, 'the same lease all along: the agent never had to start again');
      assert.doesNotMatch(a.agent.output(), /asks for a new start/);
    } finally {
      for (const client of clients) await client.end().catch(() => undefined);
      a.release();
      await stopAgent();
    }
  },
);

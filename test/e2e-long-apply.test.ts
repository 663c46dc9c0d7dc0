// An apply that takes longer than three report intervals (issue #40): the real tuner-agent
// (--local, restart mode) whose restart command waits until the test lets it go, a service whose
// leases last 3 report intervals of 1 s. While the apply waits the agent keeps reporting, so its
// lease lives and the service sees it; before the fix it went silent, the lease lapsed, and the
// agent had to start again once the apply was done.
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
let agent: AgentProcess | undefined;
let dir: string;

before(async () => {
  cluster = await startAgentCluster();
  // PostgreSQL storage: the guardrail case gives a command a delivery deadline in SQL.
  lab = await startAdminService('postgres', { env: { TUNER_LEASE_MIN_SECONDS: '1' } });
  dir = mkdtempSync(join(tmpdir(), 'tuner-long-apply-'));
});
after(async () => {
  writeFileSync(join(dir, 'go'), '');
  agent?.child.kill('SIGTERM');
  if (agent) await Promise.race([agent.exited, sleep(15_000)]);
  await lab?.close();
  await cluster?.destroy();
  rmSync(dir, { recursive: true, force: true });
});

interface CommandView {
  id: string;
  state: string;
  outcome: unknown;
}

const commandsOf = async (person: AdminService['admin'], databaseId: string) =>
  (await person.get<{ commands: CommandView[] }>(`/api/manage/databases/${databaseId}/commands`)).body.commands;

interface AgentView {
  startedAt: string;
  lastReportAt: string | null;
}

test(
  'the agent keeps reporting, and keeps its lease, while an apply waits longer than three report intervals',
  { timeout: timeoutFor([30_000, 30_000, 30_000, 60_000]) },
  async () => {
    const person = lab.admin;
    const { databaseId, apiKey } = await person.createDatabase('long-apply', 'local');
    assert.equal((await person.post(`/api/manage/databases/${databaseId}/report-interval`, { reportIntervalSeconds: 1 })).status, 200);
    const waiting = join(dir, 'waiting');
    const go = join(dir, 'go');
    const restartCommand = `touch ${waiting}; while [ ! -e ${go} ]; do sleep 0.1; done; ${cluster.restartCommand}`;
    writeFileSync(
      join(dir, 'agent.yaml'),
      [
        'postgresql:',
        `  connection_url: ${cluster.agentUrl}`,
        '  allow_restart: true',
        'local:',
        `  restart_command: ${JSON.stringify(restartCommand)}`,
        'tuner:',
        `  server_url: ${lab.service.url}`,
        `  api_key: ${apiKey}`,
        `  database_id: ${databaseId}`,
        '',
      ].join('\n'),
    );
    agent = startAgent(['--local'], { cwd: dir });
    const agentView = async () =>
      (await person.get<{ database: { agent: AgentView | null } }>(`/api/manage/databases/${databaseId}`)).body.database.agent;
    const first = await until('the first report', async () => ((await agentView())?.lastReportAt ? await agentView() : null), 30_000);

    const issued = await person.post<{ command: { id: string } }>(`/api/manage/databases/${databaseId}/commands`, {
      kind: 'apply',
      values: { shared_buffers: '192MB' },
      allowRestart: true,
      keep: false,
    });
    assert.equal(issued.status, 201, JSON.stringify(issued.body));
    await until('the restart command to be waiting', () => Promise.resolve(existsSync(waiting)), 30_000);

    // Four reports while the apply waits (the lease lasts three): each one is a new lastReportAt.
    const seen = new Set<string>();
    try {
      await until(
        'four reports while the apply waits',
        async () => {
          const view = await agentView();
          if (view?.lastReportAt) seen.add(view.lastReportAt);
          return seen.size >= 5;
        },
        30_000,
        100,
      );
    } finally {
      writeFileSync(go, '');
    }
    const done = await until(
      'the apply acknowledged',
      async () => (await commandsOf(person, databaseId)).find((c) => c.id === issued.body.command.id && c.outcome) ?? null,
      60_000,
    );
    assert.equal(done.state, 'applied', JSON.stringify(done.outcome));
    const now = await agentView();
    assert.equal(now?.startedAt, first.startedAt, 'the same lease all along: the agent never had to start again');
    assert.doesNotMatch(agent.output(), /asks for a new start/);
  },
);

test(
  "a guardrail's revert that waits longer than three report intervals: the agent keeps reporting, and keeps its lease",
  { timeout: timeoutFor([30_000, 30_000, 60_000, 30_000, 60_000]) },
  async () => {
    // One agent on the cluster at a time: the first case's returns it to known-good as it stops.
    if (agent) {
      agent.child.kill('SIGTERM');
      await agent.exited;
      agent = undefined;
    }
    const sharedBuffers = async () =>
      (await cluster.sql<{ v: string }>(`SELECT current_setting('shared_buffers') AS v`).catch(() => []))[0]?.v;
    const found = await sharedBuffers();
    const person = lab.admin;
    const { databaseId, apiKey } = await person.createDatabase('long-revert', 'local');
    assert.equal((await person.post(`/api/manage/databases/${databaseId}/report-interval`, { reportIntervalSeconds: 1 })).status, 200);
    const own = mkdtempSync(join(tmpdir(), 'tuner-long-revert-'));
    // Restarts go through at once, except while `hold` exists.
    const hold = join(own, 'hold');
    const waiting = join(own, 'waiting');
    const restartCommand = `if [ -e ${hold} ]; then touch ${waiting}; while [ -e ${hold} ]; do sleep 0.1; done; fi; ${cluster.restartCommand}`;
    writeFileSync(
      join(own, 'agent.yaml'),
      [
        'postgresql:',
        `  connection_url: ${cluster.agentUrl}`,
        '  allow_restart: true',
        'local:',
        `  restart_command: ${JSON.stringify(restartCommand)}`,
        // Stricter than the default, so that a few connections breach it.
        'guardrails:',
        '  connection_share_percent: 20',
        'tuner:',
        `  server_url: ${lab.service.url}`,
        `  api_key: ${apiKey}`,
        `  database_id: ${databaseId}`,
        '',
      ].join('\n'),
    );
    const reverting = startAgent(['--local'], { cwd: own });
    const clients: pg.Client[] = [];
    try {
      const agentView = async () =>
        (await person.get<{ database: { agent: AgentView | null } }>(`/api/manage/databases/${databaseId}`)).body.database.agent;
      const first = await until('the first report', async () => ((await agentView())?.lastReportAt ? await agentView() : null), 30_000);
      const issued = await person.post<{ command: { id: string } }>(`/api/manage/databases/${databaseId}/commands`, {
        kind: 'apply',
        values: { shared_buffers: '160MB' },
        allowRestart: true,
        keep: false,
      });
      assert.equal(issued.status, 201, JSON.stringify(issued.body));
      await until('the trial applied', () => Promise.resolve(/\(apply\): applied/.test(reverting.output())), 60_000);

      // The trial breaches the guardrail (30 connections of max_connections 100), and its revert's
      // restart waits until the test lets it go.
      writeFileSync(hold, '');
      for (let i = 0; i < 30; i++) {
        const client = new pg.Client({ connectionString: cluster.adminUrl });
        client.on('error', () => undefined);
        await client.connect();
        clients.push(client);
      }
      await until('the revert waiting for its restart', () => Promise.resolve(existsSync(waiting)), 30_000);
      assert.match(reverting.output(), /guardrail: connections at \d+ % of max_connections.*reverting trial/);
      for (const client of clients.splice(0)) await client.end().catch(() => undefined);

      const seen = new Set<string>();
      // A command handed over while the revert waits, with a delivery deadline as a session's
      // trials have: the service does not send it again once the deadline passed, so an agent
      // that only drops it while busy leaves it (and its session) waiting for the ack timeout.
      const next = await person.post<{ command: { id: string } }>(`/api/manage/databases/${databaseId}/commands`, {
        kind: 'apply',
        values: { random_page_cost: 1.3 },
        keep: false,
      });
      assert.equal(next.status, 201, JSON.stringify(next.body));
      const storage = new pg.Client({ connectionString: lab.store.databaseUrl });
      await storage.connect();
      try {
        await storage.query(`UPDATE commands SET deliver_by = now() + interval '3 seconds' WHERE id = $1`, [next.body.command.id]);
        await until(
          'four reports while the revert waits, and the next command handed over and past its deadline',
          async () => {
            const view = await agentView();
            if (view?.lastReportAt) seen.add(view.lastReportAt);
            const { rows } = await storage.query<{ sent: boolean }>(
              `SELECT status = 'sent' AND deliver_by < now() AS sent FROM commands WHERE id = $1`,
              [next.body.command.id],
            );
            return seen.size >= 5 && rows[0]?.sent;
          },
          30_000,
          100,
        );
      } finally {
        rmSync(hold, { force: true });
        await storage.end();
      }
      await until('the trial reverted', async () => (await sharedBuffers()) === found, 60_000);
      const carriedOut = await until(
        'the command handed over during the revert, carried out after it',
        async () => (await commandsOf(person, databaseId)).find((c) => c.id === next.body.command.id && c.outcome) ?? null,
        30_000,
      );
      assert.equal(carriedOut.state, 'applied', JSON.stringify(carriedOut.outcome));
      const now = await agentView();
      assert.equal(now?.startedAt, first.startedAt, 'the same lease all along: the agent never had to start again');
      assert.doesNotMatch(reverting.output(), /asks for a new start/);
    } finally {
      for (const client of clients) await client.end().catch(() => undefined);
      rmSync(hold, { force: true });
      reverting.child.kill('SIGTERM');
      await Promise.race([reverting.exited, sleep(15_000)]);
      rmSync(own, { recursive: true, force: true });
    }
  },
);

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
  lab = await startAdminService('pglite', { env: { TUNER_LEASE_MIN_SECONDS: '1' } });
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
      async () => {
        const list = (
          await person.get<{ commands: Array<{ id: string; state: string; outcome: unknown }> }>(
            `/api/manage/databases/${databaseId}/commands`,
          )
        ).body.commands;
        return list.find((c) => c.id === issued.body.command.id && c.outcome) ?? null;
      },
      60_000,
    );
    assert.equal(done.state, 'applied', JSON.stringify(done.outcome));
    const now = await agentView();
    assert.equal(now?.startedAt, first.startedAt, 'the same lease all along: the agent never had to start again');
    assert.doesNotMatch(agent.output(), /asks for a new start/);
  },
);

// Metrics end to end: the real tuner-agent --local process with tuner.metrics_listen, reporting to
// the real tuning service with TUNER_METRICS_TOKEN, on a throwaway cluster. Both /metrics are
// scraped as Prometheus would and parsed as the exposition format; their counters move with the
// reports and with an apply and a revert issued through the service. SIGTERM stops the agent
// cleanly (what systemd and `docker stop` send). A wrong --metrics-listen is refused.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { AGENT_VERSION } from '../src/agent/base/version.ts';
import { freePort, type Cluster } from '../src/lab/cluster.ts';
import { startAgentCluster, writeLocalAgentConfig } from './helpers/agent-cluster.ts';
import { runAgent, startAgent, type AgentProcess } from './helpers/agent-process.ts';
import { scrape, type Exposition } from './helpers/prometheus.ts';
import type { PersonClient, TestService } from './helpers/service.ts';
import { startAdminService, type AdminService } from './helpers/service-admin.ts';
import { until } from './helpers/until.ts';

const TOKEN = 'metrics-token-for-tests-0123456789';

interface CommandView {
  id: string;
  outcome: { status: string } | null;
}

describe('metrics of the agent and the service, end to end', () => {
  let cluster: Cluster;
  let lab: AdminService;
  let service: TestService;
  let person: PersonClient;
  let databaseId: string;
  let dir: string;
  let agent: AgentProcess | undefined;
  let agentMetricsUrl: string;

  before(async () => {
    cluster = await startAgentCluster();
    lab = await startAdminService('pglite', { env: { TUNER_METRICS_TOKEN: TOKEN } });
    ({ service, admin: person } = lab);
    const created = await person.createDatabase('metrics-e2e', 'local');
    databaseId = created.databaseId;
    assert.equal((await person.post(`/api/manage/databases/${databaseId}/report-interval`, { reportIntervalSeconds: 1 })).status, 200);
    const metricsPort = await freePort();
    agentMetricsUrl = `http://127.0.0.1:${metricsPort}/metrics`;
    dir = mkdtempSync(join(tmpdir(), 'tuner-metrics-e2e-'));
    writeLocalAgentConfig(dir, {
      cluster,
      serverUrl: service.url,
      apiKey: created.apiKey,
      databaseId,
      metricsListen: `127.0.0.1:${metricsPort}`,
    });
  });

  after(async () => {
    agent?.child.kill('SIGKILL');
    await lab?.close();
    await cluster?.destroy();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const serviceMetrics = () => scrape(`${service.url}/metrics`, TOKEN);
  const agentMetrics = () => scrape(agentMetricsUrl).catch(() => null);
  const issue = async (body: unknown): Promise<string> => {
    const issued = await person.post<{ command: CommandView }>(`/api/manage/databases/${databaseId}/commands`, body);
    assert.equal(issued.status, 201);
    const id = issued.body.command.id;
    await until(`command ${id} to be acknowledged`, async () => {
      const list = (await person.get<{ commands: CommandView[] }>(`/api/manage/databases/${databaseId}/commands`)).body.commands;
      return list.find((c) => c.id === id)?.outcome?.status === 'applied';
    });
    return id;
  };

  test('the counters move with reports, an apply and a revert; SIGTERM stops the agent cleanly', async () => {
    agent = startAgent(['--local'], { cwd: dir });
    const reporting: Exposition = await until(
      'the agent to serve metrics and deliver two reports',
      async () => {
        const m = await agentMetrics();
        return m && m.value('tuner_agent_reports_delivered_total') >= 2 ? m : null;
      },
      60_000,
    );
    assert.match(agent.output(), /Prometheus metrics on http:\/\/127\.0\.0\.1:\d+\/metrics/);
    assert.equal(reporting.types.get('tuner_agent_collection_duration_seconds'), 'histogram');
    assert.ok(reporting.value('tuner_agent_collection_duration_seconds_count') >= 1);
    assert.ok(reporting.value('tuner_agent_last_report_timestamp_seconds') > Date.now() / 1000 - 600);
    assert.equal(reporting.value('tuner_agent_reports_dropped_total'), 0);
    assert.equal(reporting.value('tuner_agent_parameters_changed'), 0);
    assert.equal(reporting.value('tuner_agent_info', { version: AGENT_VERSION, target: 'local' }), 1);

    const seen = await serviceMetrics();
    assert.equal(seen.value('tuner_service_agents_connected'), 1);
    assert.ok(seen.value('tuner_service_reports_total', { outcome: 'accepted' }) >= 2);

    await issue({ kind: 'apply', values: { work_mem: '8MB' }, keep: true });
    const applied = await until('the apply to show in the agent metrics', async () => {
      const m = await agentMetrics();
      return m && m.value('tuner_agent_applies_total', { outcome: 'applied' }) === 1 ? m : null;
    });
    assert.equal(applied.value('tuner_agent_parameters_changed'), 1, 'work_mem differs from the baseline');
    assert.equal(applied.value('tuner_agent_parameters_unaccepted'), 0, 'the change was kept');

    await issue({ kind: 'revert', to: 'baseline' });
    const reverted = await until('the revert to show in the agent metrics', async () => {
      const m = await agentMetrics();
      return m && m.value('tuner_agent_reverts_total', { cause: 'command', outcome: 'applied' }) === 1 ? m : null;
    });
    assert.equal(reverted.value('tuner_agent_parameters_changed'), 0, 'back at the baseline');
    assert.equal(reverted.value('tuner_agent_guardrail_breaches_total'), 0);

    const after = await serviceMetrics();
    assert.equal(after.value('tuner_service_commands_total', { kind: 'apply', outcome: 'applied' }), 1);
    assert.equal(after.value('tuner_service_commands_total', { kind: 'revert', outcome: 'applied' }), 1);
    assert.ok(
      after.value('tuner_service_reports_total', { outcome: 'accepted' }) >
        seen.value('tuner_service_reports_total', { outcome: 'accepted' }),
    );
    assert.ok(
      after.value('tuner_service_report_duration_seconds_count') >= after.value('tuner_service_reports_total', { outcome: 'accepted' }),
    );

    agent.child.kill('SIGTERM');
    assert.equal(await agent.exited, 0, agent.output());
    assert.match(agent.output(), /SIGTERM: stopping/);
    assert.equal((await serviceMetrics()).value('tuner_service_agents_connected'), 0, 'the lease was released');
    assert.equal(await agentMetrics(), null, 'the metrics listener went with the agent');
  });

  test('a wrong --metrics-listen is refused with what is expected (exit 2); an address in use exits 1', async () => {
    const run = await runAgent(['--local', '--metrics-listen', 'localhost'], { cwd: dir, timeoutMs: 60_000 });
    assert.equal(run.code, 2, run.stderr);
    assert.match(run.stderr, /--metrics-listen: expected HOST:PORT, e\.g\. 127\.0\.0\.1:9187/);

    const taken = createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    try {
      const port = (taken.address() as AddressInfo).port;
      const busy = await runAgent(['--local', '--metrics-listen', `127.0.0.1:${port}`], { cwd: dir, timeoutMs: 60_000 });
      assert.equal(busy.code, 1, busy.stderr);
      assert.match(busy.stderr, new RegExp(`--metrics-listen: cannot listen on 127\\.0\\.0\\.1:${port}: .*EADDRINUSE`));
    } finally {
      await new Promise((resolve) => taken.close(resolve));
    }
  });
});

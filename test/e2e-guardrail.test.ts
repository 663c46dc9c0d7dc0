// The agent keeps the database safe on its own: a trial that wrecks query runtime is reverted to
// known-good by the real tuner-agent process's guardrails while the tuning service is down, and
// the agent tells the service once it is back. (That the optimizer then keeps away from the failed
// region is shown in sessions.test.ts.)
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { freePort, type Cluster } from '../src/lab/cluster.ts';
import { startAgentCluster, writeLocalAgentConfig } from './helpers/agent-cluster.ts';
import { AGENT_BIN } from './helpers/agent-process.ts';
import { startAdminService, type AdminService } from './helpers/service-admin.ts';
import {
  WRECKING_TRIAL,
  createWreckableTable,
  startRangeWorkload,
  untilRevertedWithin,
  type RangeWorkload,
} from './helpers/wrecking-trial.ts';
import { until } from './helpers/until.ts';
import { scrape } from './helpers/prometheus.ts';

interface CommandView {
  id: string;
  state: string;
}
interface EventView {
  code: string;
  message: string;
  commandId: string | null;
}

let cluster: Cluster;
let lab: AdminService | undefined;
let workload: RangeWorkload | undefined;
let agent: ReturnType<typeof spawn> | undefined;
let dir: string;

before(async () => {
  cluster = await startAgentCluster();
  await createWreckableTable(cluster);
  dir = mkdtempSync(join(tmpdir(), 'tuner-e2e-guard-'));
});

after(async () => {
  agent?.kill('SIGKILL');
  await workload?.stop();
  await lab?.close();
  await cluster?.destroy();
  rmSync(dir, { recursive: true, force: true });
});

test(
  'a wrecking trial is reverted by the agent alone while the service is down, and reported when it is back',
  { timeout: 300_000 },
  async () => {
    lab = await startAdminService();
    let person = lab.admin;
    const { databaseId, apiKey } = await person.createDatabase('guarded', 'local');
    assert.equal((await person.post(`/api/manage/databases/${databaseId}/report-interval`, { reportIntervalSeconds: 1 })).status, 200);
    const metricsUrl = `http://127.0.0.1:${await freePort()}/metrics`;
    writeLocalAgentConfig(dir, { cluster, serverUrl: lab.service.url, apiKey, databaseId, metricsListen: new URL(metricsUrl).host });

    // The workload runs before the agent starts, so that its first window is the known-good one.
    workload = await startRangeWorkload(cluster);
    let output = '';
    agent = spawn(process.execPath, [AGENT_BIN, '--local'], {
      cwd: dir,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { PATH: process.env['PATH'] ?? '' },
    });
    agent.stdout?.on('data', (d: Buffer) => (output += d.toString()));
    agent.stderr?.on('data', (d: Buffer) => (output += d.toString()));
    type Latest = { report: { seq: number; metrics: { derived: { calls: number } } | null } | null };
    await until('three reports with the workload in them', async () => {
      const report = (await person.get<Latest>(`/api/manage/databases/${databaseId}/reports/latest`)).body.report;
      return report?.metrics && report.metrics.derived.calls > 0 && report.seq >= 3;
    });

    const issued = await person.post<{ command: CommandView }>(`/api/manage/databases/${databaseId}/commands`, {
      kind: 'apply',
      values: WRECKING_TRIAL,
      keep: false,
    });
    assert.equal(issued.status, 201);
    const setting = async (name: string) =>
      (await cluster.sql<{ setting: string }>('SELECT setting FROM pg_settings WHERE name = $1', [name]))[0]?.setting;
    await until('the trial to be applied', async () => (await setting('random_page_cost')) === '10', 15_000);

    // The service goes away; only the agent is left to notice that queries got slow.
    await lab.stop();
    const appliedAt = Date.now();
    // Judging takes a window of 20 calls: as long as the workload keeps running, they come.
    await untilRevertedWithin(
      workload,
      100,
      async () => (await setting('random_page_cost')) === '4' && (await setting('seq_page_cost')) === '1',
    ).catch((err: unknown) => {
      throw new Error(`${(err as Error).message}; the agent printed:\n${output}`);
    });
    const revertedAfterMs = Date.now() - appliedAt;
    console.log(`reverted by the agent ${(revertedAfterMs / 1000).toFixed(1)} s after the service stopped`);
    assert.match(output, /guardrail: .*query runtime .* is \d+\.\d× the known-good.*reverting trial/);
    // The agent's own metrics say it too, while the service is away (docs/metrics.md). The revert
    // is counted once restore() has read the server back, which can be after the test saw the
    // settings change: wait for the count, whatever its outcome, then check the outcome.
    const reverts = (m: Awaited<ReturnType<typeof scrape>>) =>
      (['applied', 'refused', 'failed'] as const).reduce((sum, outcome) => {
        try {
          return sum + m.value('tuner_agent_reverts_total', { cause: 'guardrail', outcome });
        } catch {
          return sum; // no series for that outcome yet; the assertions below name the one expected
        }
      }, 0);
    const metrics = await until('reports to queue up in the agent, and the revert to be counted', async () => {
      const m = await scrape(metricsUrl);
      return m.value('tuner_agent_reports_queued') >= 1 && reverts(m) >= 1 ? m : null;
    });
    assert.equal(metrics.value('tuner_agent_guardrail_breaches_total'), 1);
    assert.equal(metrics.value('tuner_agent_reverts_total', { cause: 'guardrail', outcome: 'applied' }), 1);
    assert.equal(metrics.value('tuner_agent_applies_total', { outcome: 'applied' }), 1);
    assert.equal(metrics.value('tuner_agent_parameters_unaccepted'), 0, 'back at known-good');

    // Back up: the agent's queued reports carry the breach, tied to the trial's command.
    await lab.start();
    person = lab.admin;
    const breach = await until(
      'the guardrail event to reach the service',
      async () => {
        const { events } = (await person.get<{ events: EventView[] }>(`/api/manage/databases/${databaseId}/events`)).body;
        return events.find((e) => e.code === 'guardrail_breach');
      },
      30_000,
    );
    assert.equal(breach.commandId, issued.body.command.id);
    assert.match(breach.message, /returned to known-good: applied/);
    assert.ok(!output.includes(apiKey), 'the API key never appears in what the agent printed');
  },
);

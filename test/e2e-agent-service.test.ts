// End to end: the real tuning service (each storage) + the real `tuner-agent --local` process (and
// the single-file binary, when built) + a throwaway cluster. Setup over HTTP → agent.yaml →
// reports → a command issued through the service is applied, read back and acknowledged; a second
// agent is refused; a wrong API key exits with a clear message; the service restarted mid-run →
// the agent resumes; SIGTERM releases the lease.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { Cluster } from '../src/lab/cluster.ts';
import { startAgentCluster, writeLocalAgentConfig } from './helpers/agent-cluster.ts';
import { AGENT_BINARY, agentCommand, agentPath, runAgent } from './helpers/agent-process.ts';
import { TEST_BINARY } from './helpers/agent-binary.ts';
import { STORAGE_KINDS } from './helpers/service.ts';
import { startAdminService, type AdminService } from './helpers/service-admin.ts';
import { until } from './helpers/until.ts';

interface DatabaseView {
  agent: { connected: boolean; hostname: string; lastReportAt: string | null; releasedAt: string | null } | null;
}
interface CommandView {
  id: string;
  state: string;
  outcome: { status: string; effective: Record<string, string>; errors: string[] } | null;
}
interface LatestReport {
  report: {
    seq: number;
    receivedAt: string;
    metrics: { derived: { calls: number } } | null;
    settings: { name: string; setting: string }[];
  } | null;
}

/** A running agent process; its output is kept for the assertions and the secret check. */
function startAgentProcess(cwd: string, binary: string | null): { child: ChildProcess; output: () => string; exited: Promise<number> } {
  const [file, args] = agentCommand(['--local'], binary);
  const child = spawn(file, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'], env: { PATH: agentPath(binary) } });
  let text = '';
  child.stdout.on('data', (d: Buffer) => (text += d.toString()));
  child.stderr.on('data', (d: Buffer) => (text += d.toString()));
  const exited = new Promise<number>((resolve) => child.on('close', (code) => resolve(code ?? 1)));
  return { child, output: () => text, exited };
}

/** Each storage with the agent as the run chose it (bin/tuner-agent.js, or TUNER_AGENT_BIN), and
 * the single-file binary once more when there is one (CI builds it), with no Node on its PATH. */
const RUNS = [
  ...STORAGE_KINDS.map((kind) => ({ kind, binary: AGENT_BINARY })),
  ...(TEST_BINARY && TEST_BINARY !== AGENT_BINARY ? [{ kind: 'pglite' as const, binary: TEST_BINARY }] : []),
];

for (const { kind, binary } of RUNS) {
  describe(`agent and service end to end (${kind} storage${binary ? ', single-file binary' : ''})`, () => {
    let cluster: Cluster;
    let lab: AdminService;
    let databaseId: string;
    let apiKey: string;
    const dirs: string[] = [];
    const transcripts: string[] = [];
    let agent: ReturnType<typeof startAgentProcess> | undefined;

    const agentDir = (key: string): string => {
      const dir = mkdtempSync(join(tmpdir(), 'tuner-e2e-'));
      dirs.push(dir);
      return writeLocalAgentConfig(dir, { cluster, serverUrl: lab.service.url, apiKey: key, databaseId, includeQueries: true });
    };
    const database = async () => (await lab.admin.get<{ database: DatabaseView }>(`/api/manage/databases/${databaseId}`)).body.database;
    const latest = async () => (await lab.admin.get<LatestReport>(`/api/manage/databases/${databaseId}/reports/latest`)).body.report;

    before(async () => {
      cluster = await startAgentCluster();
      lab = await startAdminService(kind);
      ({ databaseId, apiKey } = await lab.admin.createDatabase('e2e', 'local'));
      const interval = await lab.admin.post(`/api/manage/databases/${databaseId}/report-interval`, { reportIntervalSeconds: 1 });
      assert.equal(interval.status, 200);
    });

    after(async () => {
      agent?.child.kill('SIGKILL');
      await lab?.close();
      await cluster?.destroy();
      for (const d of dirs) rmSync(d, { recursive: true, force: true });
    });

    test('the agent reports, and a command issued through the service is applied, read back and acknowledged', async () => {
      agent = startAgentProcess(agentDir(apiKey), binary);
      await until('the agent to connect', async () => (await database()).agent?.connected);
      for (let i = 0; i < 50; i++) await cluster.sql('SELECT count(*) FROM pg_class');
      const report = await until('a report with metrics', async () => {
        const r = await latest();
        return r?.metrics && r.metrics.derived.calls > 0 ? r : null;
      });
      assert.ok(
        report.settings.some((s) => s.name === 'work_mem'),
        'the report carries the catalog settings',
      );

      const issued = await lab.admin.post<{ command: CommandView }>(`/api/manage/databases/${databaseId}/commands`, {
        kind: 'apply',
        values: { work_mem: '8MB' },
        keep: true,
      });
      assert.equal(issued.status, 201);
      const done = await until('the command to be acknowledged', async () => {
        const list = (await lab.admin.get<{ commands: CommandView[] }>(`/api/manage/databases/${databaseId}/commands`)).body.commands;
        const c = list.find((x) => x.id === issued.body.command.id);
        return c?.outcome ? c : null;
      });
      assert.equal(done.state, 'applied', JSON.stringify(done.outcome));
      assert.equal(done.outcome?.effective['work_mem'], '8192');
      const [row] = await cluster.sql<{ setting: string }>(`SELECT setting FROM pg_settings WHERE name = 'work_mem'`);
      assert.equal(row?.setting, '8192');

      // A command the agent's own checks refuse is acknowledged as refused, with nothing changed.
      const unsafe = await lab.admin.post<{ command: CommandView }>(`/api/manage/databases/${databaseId}/commands`, {
        kind: 'apply',
        values: { work_mem: '900GB' },
      });
      const refused = await until('the unsafe command to be acknowledged', async () => {
        const list = (await lab.admin.get<{ commands: CommandView[] }>(`/api/manage/databases/${databaseId}/commands`)).body.commands;
        return list.find((x) => x.id === unsafe.body.command.id && x.outcome) ?? null;
      });
      assert.equal(refused.state, 'refused');
      assert.match(refused.outcome!.errors.join('\n'), /work_mem/);
    });

    test('a second agent for the same database is refused, naming the holder', async () => {
      const second = await runAgent(['--local'], { cwd: agentDir(apiKey), timeoutMs: 60_000, binary });
      transcripts.push(second.stdout, second.stderr);
      assert.equal(second.code, 6, second.stderr);
      assert.match(second.stderr, /another agent already reports for this database: .*pid \d+/);
    });

    test('a wrong API key exits with a clear message', async () => {
      const wrong = await runAgent(['--local'], { cwd: agentDir('tk_wrong_key_0123456789abcdef0123'), timeoutMs: 60_000, binary });
      transcripts.push(wrong.stdout, wrong.stderr);
      assert.equal(wrong.code, 5, wrong.stderr);
      assert.match(wrong.stderr, /rejected the API key .*check tuner\.api_key/);
      assert.ok(!wrong.stderr.includes('tk_wrong_key_0123456789abcdef0123'));
    });

    test('the service restarted mid-run: the agent keeps collecting and resumes', async () => {
      await until('a report', latest);
      assert.ok(agent);
      const running = agent;
      const outageLines = () => running.output().match(/report\(s\) queued, collecting goes on/g)?.length ?? 0;
      const seenBefore = outageLines();
      await lab.stop();
      // The agent's word that it found the service down and keeps its reports for later.
      await until('the agent to see the outage', () => Promise.resolve(outageLines() > seenBefore), 60_000);
      await lab.start();
      // Nothing is stored while the service is down: the latest report now is the last one before
      // the outage (which may have arrived after the test first looked).
      const before = await until('the last report before the outage', latest);
      const resumed = await until(
        'a report after the restart',
        async () => {
          const r = await latest();
          return r && Date.parse(r.receivedAt) > Date.parse(before.receivedAt) ? r : null;
        },
        60_000,
      );
      assert.ok(resumed.metrics, 'metrics flow again');
      // The agent says so once the service has answered, which can be after the report is stored.
      await until('the agent to say the service is reachable again', () =>
        Promise.resolve(/the tuning service is reachable again/.test(running.output())),
      );
      assert.equal((await database()).agent?.connected, true);
    });

    test('SIGTERM: the agent releases its lease and exits 0, its secrets never printed', async () => {
      assert.ok(agent);
      agent.child.kill('SIGTERM');
      const code = await agent.exited;
      transcripts.push(agent.output());
      assert.equal(code, 0, agent.output());
      assert.match(agent.output(), /stopped/);
      const view = await database();
      assert.equal(view.agent?.connected, false);
      assert.ok(view.agent?.releasedAt, 'the lease was released');
      agent = undefined;
      const all = transcripts.join('\n');
      assert.ok(!all.includes(apiKey), 'the API key leaked');
      assert.ok(!all.includes('agent-pw-7f3a9c1e'), 'the database password leaked');
    });
  });
}

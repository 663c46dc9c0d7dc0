// End to end: tuning sessions with the real tuner-agent (--local), the real service on PGlite
// storage, and a throwaway cluster under pgbench, windows of a few seconds and reports every
// second. Two workloads from src/lab/workloads.ts, one session each:
//   select-1  no parameter can make it faster: the session ends "no significant improvement",
//             keeps nothing, and the database is back on its baseline;
//   work-mem  a NOT IN report that work_mem above ~5 MB makes several times faster: the session
//             verifies its best in A/B rounds, recommends it with an interval that excludes no
//             gain at all, and after approval the configuration is in pg_settings.
// No speed is asserted: only what the session concludes and does.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import type { Cluster } from '../src/lab/cluster.ts';
import { startAgentCluster, writeLocalAgentConfig } from './helpers/agent-cluster.ts';
import { WORKLOADS, startLoad, type RunningLoad, type Workload } from '../src/lab/workloads.ts';
import { AGENT_BIN } from './helpers/agent-process.ts';
import type { PersonClient } from './helpers/service.ts';
import { startAdminService, type AdminService } from './helpers/service-admin.ts';
import { FULL_SETTINGS, assertSessionShape, getTuningSession, startTuningSession, type SessionJson } from './sessions-agent.ts';
import { until } from './helpers/until.ts';

function spawnLogged(
  command: string,
  args: string[],
  options: { cwd: string; env: NodeJS.ProcessEnv },
): { child: ChildProcess; output: () => string; exited: Promise<number> } {
  const child = spawn(command, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'] });
  let text = '';
  child.stdout?.on('data', (d: Buffer) => (text += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (text += d.toString()));
  const exited = new Promise<number>((resolve) => child.on('close', (code) => resolve(code ?? 1)));
  return { child, output: () => text, exited };
}

describe('tuning sessions end to end (real tuner-agent, throwaway cluster, PGlite storage)', () => {
  let cluster: Cluster;
  let lab: AdminService;
  let person: PersonClient;
  let databaseId: string;
  let agent: ReturnType<typeof spawnLogged> | undefined;
  let load: RunningLoad | undefined;
  let dir: string;
  const began = Date.now();

  const settings = async (names: string[]) =>
    new Map(
      (await cluster.sql<{ name: string; setting: string }>('SELECT name, setting FROM pg_settings WHERE name = ANY($1)', [names])).map(
        (r) => [r.name, r.setting],
      ),
    );

  /** Runs `workload` and waits for a report that has it in it. */
  const runLoad = async (workload: Workload) => {
    await load?.stop();
    load = await startLoad(cluster, workload, { dir, clients: 2 });
    const since = Date.now();
    await until(
      `a report with the ${workload.name} workload in it`,
      async () => {
        const latest = (
          await person.get<{ report: { receivedAt: string; metrics: { derived: { calls: number } } | null } | null }>(
            `/api/manage/databases/${databaseId}/reports/latest`,
          )
        ).body.report;
        return latest?.metrics && Date.parse(latest.receivedAt) > since + 1500 && latest.metrics.derived.calls > 0;
      },
      60_000,
    );
  };

  const runSession = async (body: Record<string, unknown>, ends: readonly string[]) => {
    const started = await startTuningSession(person, databaseId, body);
    const ended = await until(
      'the session to end its search and verification',
      async () => {
        const { session } = await getTuningSession(person, databaseId, started.id);
        return [...ends, 'failed', 'stopped'].includes(session.state) ? session : null;
      },
      240_000,
      500,
    );
    const { iterations } = await getTuningSession(person, databaseId, started.id);
    console.log(`${ended.state}: ${ended.message ?? ''}`);
    for (const it of iterations)
      console.log(
        `  #${it.ordinal} ${it.phase} ${it.kind}${it.round ? ` ${it.round}` : ''} ${it.state} objective ${it.objective?.toFixed(3) ?? '–'} ${it.failure ?? ''}`,
      );
    assert.notEqual(ended.state, 'failed', `${ended.message ?? ''}\n${agent?.output().slice(-3000) ?? ''}`);
    return { id: started.id, session: ended, iterations };
  };

  before(async () => {
    cluster = await startAgentCluster();
    for (const workload of [WORKLOADS['select-1'], WORKLOADS['work-mem']]) await workload.setup(cluster);
    lab = await startAdminService('pglite');
    person = lab.admin;
    const created = await person.createDatabase('e2e-session', 'local');
    databaseId = created.databaseId;
    assert.equal((await person.post(`/api/manage/databases/${databaseId}/report-interval`, { reportIntervalSeconds: 1 })).status, 200);
    dir = mkdtempSync(join(tmpdir(), 'tuner-e2e-session-'));
    writeLocalAgentConfig(dir, { cluster, serverUrl: lab.service.url, apiKey: created.apiKey, databaseId });
    agent = spawnLogged(process.execPath, [AGENT_BIN, '--local'], { cwd: dir, env: { PATH: process.env['PATH'] ?? '' } });
    console.log(`setup: ${((Date.now() - began) / 1000).toFixed(1)} s`);
  });

  after(async () => {
    await load?.stop();
    if (agent) {
      agent.child.kill('SIGTERM');
      await Promise.race([agent.exited, sleep(15_000)]);
    }
    await lab?.close();
    await cluster?.destroy();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  test('SELECT 1: no significant improvement, nothing kept, the database back on its baseline', { timeout: 300_000 }, async () => {
    await runLoad(WORKLOADS['select-1']);
    const { session, iterations } = await runSession(
      { iterations: 2, windowSeconds: 4, warmupSeconds: 1, seed: 20261122, abRoundsMin: 3, abRoundsMax: 4, requireApproval: false },
      ['done'],
    );
    assert.equal(session.state, 'done');
    assert.match(session.message ?? '', /^no significant improvement: /);
    assert.equal(session.best, null);
    if (session.verification) {
      assert.equal(session.verification.decision, 'no_significant_improvement');
      assert.ok(session.verification.runtime && session.verification.runtime.high > 0.95, session.verification.summary ?? '');
    }
    assertSessionShape(iterations, 2);
    const commands = (
      await person.get<{ commands: Array<{ command: { kind: string; keep?: boolean } }> }>(
        `/api/manage/databases/${databaseId}/commands?limit=100`,
      )
    ).body.commands;
    assert.ok(!commands.some((c) => c.command.kind === 'apply' && c.command.keep), 'nothing kept');
    const baseline = new Map(FULL_SETTINGS.map((s) => [s.name, s.setting]));
    await until(
      'the database back on its baseline',
      async () => {
        const now = await settings(['work_mem', 'random_page_cost', 'effective_cache_size']);
        return [...now].every(([name, value]) => value === baseline.get(name));
      },
      30_000,
    );
  });

  test(
    'work_mem: the diagnosis is verified as a step before the search ends, approved and kept, and the search goes on from it',
    { timeout: 300_000 },
    async () => {
      await runLoad(WORKLOADS['work-mem']);
      const planned = 3;
      const { id, session, iterations } = await runSession(
        { iterations: planned, windowSeconds: 6, warmupSeconds: 1, seed: 20261122, abRoundsMin: 3, abRoundsMax: 5 },
        ['awaiting_approval', 'done'],
      );
      assert.equal(session.state, 'awaiting_approval', session.message ?? '');
      const v = session.verification!;
      assert.equal(v.decision, 'recommend');
      assert.ok(v.runtime!.high < 0.95, `the whole interval is a gain of at least the minimum effect: ${v.summary}`);
      const [step] = session.steps;
      assert.ok(step && step.outcome === 'awaiting_approval', JSON.stringify(session.steps));
      const measured = iterations.filter((it) => it.phase === 'search' && it.kind !== 'baseline' && it.state === 'ok').length;
      assert.ok(measured < planned, `verified after ${measured} of ${planned} trials, before the search ended`);
      assert.match(
        session.message ?? '',
        /^step 1 \(iteration \d+\) is verified: runtime −\d+(\.\d)? % \(95 % CI −\d+(\.\d)? % to −\d+(\.\d)? %\)/,
      );
      assert.ok(Number(session.best!.config['work_mem']) > 5 * 1024, `work_mem ${session.best!.config['work_mem']} kB`);
      console.log(`first verified gain after ${1 + iterations.filter((it) => it.state === 'ok').length} windows: ${step.summary ?? ''}`);

      const approved = await person.post<{ session: SessionJson }>(`/api/manage/databases/${databaseId}/tuning-sessions/${id}/approve`);
      assert.equal(approved.status, 200, JSON.stringify(approved.body));
      // The search goes on from the step; a later recommendation is approved too.
      const done = await until(
        'the session to end after the kept step',
        async () => {
          const { session: now } = await getTuningSession(person, databaseId, id);
          if (now.state === 'awaiting_approval' && now.steps.length === 1 && now.steps[0]!.outcome === 'kept')
            await person.post(`/api/manage/databases/${databaseId}/tuning-sessions/${id}/approve`);
          return now.state === 'done' || now.state === 'failed' ? now : null;
        },
        240_000,
        500,
      );
      assert.equal(done.state, 'done', done.message ?? '');
      assert.equal(done.steps[0]!.outcome, 'kept');
      assert.match(done.message ?? '', /verified step kept \(step 1 \(iteration \d+\): runtime −/);
      const { iterations: all } = await getTuningSession(person, databaseId, id);
      assertSessionShape(all, planned);
      const best = done.best!;
      // The session may end on the kept step with a revert to it in flight (the last trial was on
      // the database): the agent carries it out at its next report.
      const differences = async () => {
        const now = await settings(Object.keys(best.config));
        return Object.entries(best.config).flatMap(([name, value]) => {
          const actual = now.get(name);
          const same = typeof value === 'number' ? Math.abs(Number(actual) - value) <= 1e-6 * Math.max(1, value) : actual === value;
          return same ? [] : [`${name}: pg_settings ${actual}, best ${value}`];
        });
      };
      await until('the database on the kept configuration', async () => (await differences()).length === 0, 30_000).catch(async () =>
        assert.fail((await differences()).join('; ')),
      );
      console.log(`whole test: ${((Date.now() - began) / 1000).toFixed(1)} s`);
    },
  );
});

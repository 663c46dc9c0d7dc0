// End to end: a short tuning session with the real tuner-agent (--local), the real service on
// PGlite storage, and a throwaway cluster under a small pgbench workload (hash aggregates, whose
// speed depends on work_mem). Three iterations of 1 s warm-up + 4 s window, reports every second:
// baseline → trials applied by the agent through ALTER SYSTEM and read back → awaiting approval →
// approve → the best configuration is in pg_settings; or, when nothing beat the baseline in so short
// a run, the database is back on its baseline.
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import { localGrantsSql } from '../src/agent/targets/local.ts';
import { ENGINE_LIMITS } from '../src/service/sessions/engine.ts';
import { freePort, startCluster, type Cluster } from '../src/lab/cluster.ts';
import { AGENT_BIN } from './helpers/agent-process.ts';
import { ADMIN_PASSWORD, PersonClient, createServiceStore, startTestService, type ServiceStore, type TestService } from './helpers/service.ts';
import { FULL_SETTINGS, getSession, startSession, type SessionJson } from './sessions-agent.ts';
import { until } from './helpers/until.ts';

const WORKLOAD = `SELECT count(*) FROM (SELECT v, count(*) FROM tuner_e2e GROUP BY v) s;
SELECT count(*) FROM tuner_e2e WHERE id % 97 = 0;
`;


function spawnLogged(command: string, args: string[], options: { cwd: string; env: NodeJS.ProcessEnv }): { child: ChildProcess; output: () => string; exited: Promise<number> } {
  const child = spawn(command, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'] });
  let text = '';
  child.stdout?.on('data', (d: Buffer) => (text += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (text += d.toString()));
  const exited = new Promise<number>((resolve) => child.on('close', (code) => resolve(code ?? 1)));
  return { child, output: () => text, exited };
}

describe('a tuning session end to end (real tuner-agent, throwaway cluster, PGlite storage)', () => {
  let cluster: Cluster;
  let store: ServiceStore;
  let service: TestService;
  let person: PersonClient;
  let databaseId: string;
  let agent: ReturnType<typeof spawnLogged> | undefined;
  let load: ReturnType<typeof spawnLogged> | undefined;
  const dirs: string[] = [];
  const began = Date.now();

  before(async () => {
    cluster = await startCluster();
    for (const sql of localGrantsSql('agent_user').split('\n').filter((l) => l.startsWith('GRANT'))) await cluster.sql(sql);
    await cluster.sql(`CREATE TABLE tuner_e2e AS SELECT g AS id, md5(g::text) AS v FROM generate_series(1, 200000) g`);
    await cluster.sql('ANALYZE tuner_e2e');
    store = await createServiceStore('pglite');
    const port = await freePort();
    service = await startTestService(store, {}, `127.0.0.1:${port}`);
    person = await PersonClient.login(service.url, 'admin', ADMIN_PASSWORD);
    const created = await person.createDatabase('e2e-session', 'local');
    databaseId = created.databaseId;
    assert.equal((await person.post(`/api/manage/databases/${databaseId}/report-interval`, { reportIntervalSeconds: 1 })).status, 200);

    const dir = mkdtempSync(join(tmpdir(), 'tuner-e2e-session-'));
    dirs.push(dir);
    writeFileSync(join(dir, 'agent.yaml'), [
      'postgresql:',
      `  connection_url: ${cluster.agentUrl}`,
      'tuner:',
      `  server_url: http://127.0.0.1:${port}`,
      `  api_key: ${created.apiKey}`,
      `  database_id: ${databaseId}`,
      '',
    ].join('\n'));
    writeFileSync(join(dir, 'workload.sql'), WORKLOAD);
    load = spawnLogged(join(cluster.binDir, 'pgbench'), ['-n', '-T', '120', '-c', '2', '-j', '1', '-f', join(dir, 'workload.sql'), '-h', cluster.host, '-p', String(cluster.port), '-U', 'postgres', 'postgres'], { cwd: dir, env: { PATH: process.env['PATH'] ?? '' } });
    agent = spawnLogged(process.execPath, [AGENT_BIN, '--local'], { cwd: dir, env: { PATH: process.env['PATH'] ?? '' } });
    await until('a report with the workload in it', async () => {
      const latest = (await person.get<{ report: { metrics: { derived: { calls: number } } | null } | null }>(`/api/manage/databases/${databaseId}/reports/latest`)).body.report;
      return latest?.metrics && latest.metrics.derived.calls > 0;
    }, 30_000);
    console.log(`setup: ${((Date.now() - began) / 1000).toFixed(1)} s`);
  });

  after(async () => {
    load?.child.kill('SIGTERM');
    if (agent) {
      agent.child.kill('SIGTERM');
      await Promise.race([agent.exited, sleep(15_000)]);
    }
    await service?.close();
    await store?.dispose();
    await cluster?.destroy();
    for (const d of dirs) rmSync(d, { recursive: true, force: true });
  });

  test('baseline, three trials applied and measured, then approval and the best configuration kept', { timeout: 90_000 }, async () => {
    const sessionStart = Date.now();
    const started = await startSession(person, databaseId, { iterations: 3, windowSeconds: 4, warmupSeconds: 1, seed: 20261122 });
    const ended = await until('the session to finish its iterations', async () => {
      const { session } = await getSession(person, databaseId, started.id);
      return ['awaiting_approval', 'done', 'failed', 'stopped'].includes(session.state) ? session : null;
    }, 70_000);
    const { iterations } = await getSession(person, databaseId, started.id);
    console.log(`session: ${((Date.now() - sessionStart) / 1000).toFixed(1)} s to ${ended.state}; ${ended.message ?? ''}`);
    for (const it of iterations) console.log(`  #${it.ordinal} ${it.kind} ${it.state} objective ${it.objective?.toFixed(3) ?? '–'} ${it.failure ?? ''}`);
    assert.notEqual(ended.state, 'failed', `${ended.message ?? ''}\n${agent?.output() ?? ''}`);
    // Three planned iterations, and up to two more that confirm a best measured only once.
    const measured = iterations.filter((it) => it.state === 'ok' || it.state === 'failed');
    assert.ok(measured.length >= 3 && measured.length <= 3 + ENGINE_LIMITS.confirmations, `${measured.length} iterations`);
    assert.ok(measured.slice(3).every((it) => it.kind === 'remeasure'));
    assert.ok(iterations.some((it) => it.state === 'ok'), 'the agent applied and the service measured at least one trial');
    assert.ok(ended.baseline.stats?.weightedRuntimeMs, 'the baseline was measured');

    const settings = async (names: string[]) =>
      new Map((await cluster.sql<{ name: string; setting: string }>('SELECT name, setting FROM pg_settings WHERE name = ANY($1)', [names])).map((r) => [r.name, r.setting]));

    if (ended.state === 'awaiting_approval') {
      const best = ended.best!;
      const approved = await person.post<{ session: SessionJson }>(`/api/manage/databases/${databaseId}/sessions/${started.id}/approve`);
      assert.equal(approved.status, 200, JSON.stringify(approved.body));
      const done = await until('the best configuration to be applied and kept', async () => {
        const { session } = await getSession(person, databaseId, started.id);
        return session.state === 'done' || session.state === 'failed' ? session : null;
      }, 20_000);
      assert.equal(done.state, 'done', done.message ?? '');
      const now = await settings(Object.keys(best.config));
      for (const [name, value] of Object.entries(best.config)) {
        const actual = now.get(name);
        if (typeof value === 'number') assert.ok(Math.abs(Number(actual) - value) <= 1e-6 * Math.max(1, value), `${name}: pg_settings ${actual}, best ${value}`);
        else assert.equal(actual, value, name);
      }
    } else {
      // Nothing beat the baseline: the last trial was reverted, the database is as it was.
      await until('the database back on its baseline', async () => {
        const now = await settings(['work_mem', 'random_page_cost']);
        const baseline = new Map(FULL_SETTINGS.map((s) => [s.name, s.setting]));
        return now.get('work_mem') === baseline.get('work_mem') && now.get('random_page_cost') === baseline.get('random_page_cost');
      }, 15_000);
    }
    console.log(`whole test: ${((Date.now() - began) / 1000).toFixed(1)} s`);
  });
});

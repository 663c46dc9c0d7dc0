// npm run demo: the whole product on one machine, with nothing to set up.
//   a throwaway PostgreSQL cluster under a pgbench load
//   → the tuning service on embedded storage → the real `tuner-agent --local` process
//   → a short tuning session: one line per iteration, then the result
//   → the dashboard stays up until Ctrl+C; the cluster and the data are removed at the end.
// `--short` (CI): a tiny session, and it exits when done.
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, openSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { randomBytes } from 'node:crypto';
import { localGrantsSql } from '../src/agent/targets/local.ts';
import { freePort, startCluster, type Cluster } from '../src/lab/cluster.ts';
import { pgbenchInit } from '../src/lab/pgbench.ts';
import { parseServiceArgs } from '../src/service/config.ts';
import { startService, type RunningService } from '../src/service/server.ts';

const { values: flags } = parseArgs({ options: { short: { type: 'boolean' }, iterations: { type: 'string' }, window: { type: 'string' } } });
const SHORT = flags.short === true;
const PLAN = {
  scale: SHORT ? 2 : 10,
  iterations: Number(flags.iterations ?? (SHORT ? 3 : 8)),
  windowSeconds: Number(flags.window ?? (SHORT ? 5 : 30)),
  warmupSeconds: SHORT ? 1 : 5,
  reportSeconds: SHORT ? 1 : 5,
};
const ROOT = join(import.meta.dirname, '..');

interface ChangeView { name: string; baseline: string; value: string }
interface IterationView { ordinal: number; kind: string; state: string; objective: number | null; bestSoFar: number | null; diff: ChangeView[]; failure: string | null }
interface SessionView { id: string; state: string; message: string | null; best: { objective: number; diff: ChangeView[] } | null; baseline: { stats: { tps: number; weightedRuntimeMs: number | null } | null } }

/** A person on the service's JSON API: a session cookie and the CSRF token. */
class Person {
  readonly base: string;
  cookie = '';
  csrf = '';
  constructor(base: string) {
    this.base = base;
  }
  async call<T>(method: 'GET' | 'POST', path: string, body?: unknown): Promise<T> {
    const response = await fetch(`${this.base}${path}`, {
      method,
      headers: { ...(body !== undefined && { 'content-type': 'application/json' }), ...(this.cookie && { cookie: this.cookie }), ...(this.csrf && { 'x-csrf-token': this.csrf }) },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });
    const cookie = response.headers.getSetCookie().find((c) => c.startsWith('tuner_session='));
    if (cookie) this.cookie = cookie.split(';')[0]!;
    const text = await response.text();
    if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${text.slice(0, 300)}`);
    return (text ? JSON.parse(text) : {}) as T;
  }
}

const say = (line: string) => process.stdout.write(`${line}\n`);
const changes = (diff: ChangeView[]) => (diff.length === 0 ? 'no change' : diff.map((c) => `${c.name} ${c.baseline}→${c.value}`).join(', '));
const until = async <T>(probe: () => Promise<T | null | undefined | false>, timeoutMs: number, what: string): Promise<T> => {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 1000));
  }
};

async function main(): Promise<void> {
  const work = mkdtempSync(join(tmpdir(), 'tuner-demo-'));
  let cluster: Cluster | undefined;
  let service: RunningService | undefined;
  const children: ChildProcess[] = [];
  let cleaned = false;
  const cleanup = async () => {
    if (cleaned) return;
    cleaned = true;
    for (const child of children) child.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 1500));
    await service?.close();
    await cluster?.destroy();
    rmSync(work, { recursive: true, force: true });
  };
  process.once('SIGINT', () => void cleanup().then(() => process.exit(0)));

  try {
    say(`== a throwaway PostgreSQL cluster with pgbench data (scale ${PLAN.scale})`);
    cluster = await startCluster({ durable: true });
    for (const sql of localGrantsSql('agent_user').split('\n').filter((l) => l.startsWith('GRANT'))) await cluster.sql(sql);
    await pgbenchInit(cluster, PLAN.scale);
    const conn = ['-h', cluster.host, '-p', String(cluster.port), '-U', 'postgres', 'postgres'];
    const load = spawn(join(cluster.binDir, 'pgbench'), ['-T', '86400', '-c', '4', '-j', '2', ...conn], { stdio: 'ignore' });
    children.push(load);

    say('== the tuning service, embedded storage');
    const password = randomBytes(9).toString('base64url');
    const port = await freePort();
    const request = parseServiceArgs(['--listen', `127.0.0.1:${port}`, '--data-dir', join(work, 'service-data')], { TUNER_ADMIN_PASSWORD: password, TUNER_LOG_LEVEL: 'warn' });
    if (request.kind !== 'run') throw new Error('the service did not accept its configuration');
    service = await startService(request.config, { announce: () => undefined, logStream: { write: () => undefined } });
    const person = new Person(service.url);
    person.csrf = (await person.call<{ csrfToken: string }>('POST', '/api/manage/login', { username: 'admin', password })).csrfToken;
    const created = await person.call<{ database: { id: string }; apiKey: string }>('POST', '/api/manage/databases', { name: 'demo', target: 'local' });
    const databaseId = created.database.id;
    say(`dashboard: ${service.url}/  (log in as admin, password ${password})`);

    say('== tuner-agent --local');
    const dir = mkdtempSync(join(work, 'agent-'));
    writeFileSync(
      join(dir, 'agent.yaml'),
      `postgresql:\n  connection_url: ${cluster.agentUrl}\n  include_queries: true\ntuner:\n  server_url: ${service.url}\n  api_key: ${created.apiKey}\n  database_id: ${databaseId}\n`,
    );
    const agentLog = join(work, 'agent.log');
    const agent = spawn(process.execPath, [join(ROOT, 'bin', 'tuner-agent.js'), '--local'], { cwd: dir, stdio: ['ignore', openSync(agentLog, 'a'), openSync(agentLog, 'a')] });
    children.push(agent);
    // Short windows need frequent reports: a window is measured from the reports inside it.
    await person.call('POST', `/api/manage/databases/${databaseId}/report-interval`, { reportIntervalSeconds: PLAN.reportSeconds });
    await until(async () => (await person.call<{ database: { agent: { connected: boolean } | null } }>('GET', `/api/manage/databases/${databaseId}`)).database.agent?.connected, 60_000, 'the agent to connect');
    say(`agent connected (its log: ${agentLog})`);
    // A session starts from the agent's reports: wait for one that has the workload in it.
    type Latest = { report: { metrics: { derived: { calls: number } } | null } | null };
    await until(async () => ((await person.call<Latest>('GET', `/api/manage/databases/${databaseId}/reports/latest`)).report?.metrics?.derived.calls ?? 0) > 0, 60_000, 'a report with the workload in it');

    say(`== a tuning session: ${PLAN.iterations} iterations × (${PLAN.warmupSeconds} s warm-up + ${PLAN.windowSeconds} s window), reload-only`);
    const started = await person.call<{ session: SessionView }>('POST', `/api/manage/databases/${databaseId}/sessions`, {
      iterations: PLAN.iterations,
      windowSeconds: PLAN.windowSeconds,
      warmupSeconds: PLAN.warmupSeconds,
      requireApproval: false,
      seed: 7,
    });
    const sessionPath = `/api/manage/databases/${databaseId}/sessions/${started.session.id}`;
    const printed = new Set<number>();
    let baselineShown = false;
    const final = await until(async () => {
      const { session, iterations } = await person.call<{ session: SessionView; iterations: IterationView[] }>('GET', sessionPath);
      const stats = session.baseline.stats;
      if (stats && !baselineShown) {
        baselineShown = true;
        say(`baseline: weighted query runtime ${stats.weightedRuntimeMs?.toFixed(3) ?? '—'} ms, ${stats.tps.toFixed(0)} transactions/s`);
      }
      for (const it of iterations) {
        if (printed.has(it.ordinal) || !['ok', 'failed', 'cancelled'].includes(it.state)) continue;
        printed.add(it.ordinal);
        const result = it.state === 'ok' ? `objective ${it.objective?.toFixed(3)} × baseline` : `${it.state}: ${it.failure ?? ''}`;
        say(`#${String(it.ordinal).padStart(2)} ${it.kind.padEnd(9)} ${result}; best so far ${it.bestSoFar?.toFixed(3) ?? '—'}  [${changes(it.diff)}]`);
      }
      return ['done', 'stopped', 'reverted', 'failed'].includes(session.state) ? session : null;
    }, (PLAN.iterations + 2) * (PLAN.windowSeconds + PLAN.warmupSeconds + 30) * 1000, 'the session to end');

    say(`== result: session ${final.state}${final.message ? ` (${final.message})` : ''}`);
    if (final.best) {
      say(`best configuration: ${changes(final.best.diff)}`);
      say(`its query runtime: ${final.best.objective.toFixed(3)} × the baseline's (${((1 - final.best.objective) * 100).toFixed(1)} % faster), applied and kept as known-good`);
    }
    if (SHORT) return;
    say(`the dashboard stays up at ${service.url}/ (admin / ${password}); Ctrl+C ends the demo and removes everything`);
    await new Promise(() => undefined);
  } finally {
    await cleanup();
  }
}

await main();

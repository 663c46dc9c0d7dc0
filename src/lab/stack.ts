// The whole product on one machine, for the demo and the benchmarks: a throwaway cluster under a
// lab workload, the tuning service on embedded storage, a database entry, and the real
// `tuner-agent --local` process reporting to it; and a person on the service's JSON API.
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, openSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { localGrantsSql } from '../agent/targets/local/permissions.ts';
import { parseServiceArgs } from '../service/app/config.ts';
import { startService, type RunningService } from '../service/app/server.ts';
import { freePort, serverOsUser, startCluster, type Cluster } from './cluster.ts';
import { until } from './until.ts';
import { startLoad, type RunningLoad, type Workload } from './workloads.ts';

const AGENT_BIN = join(import.meta.dirname, '..', '..', 'bin', 'tuner-agent.js');

/** A person on the service's JSON API: a session cookie and the CSRF token. */
export class Person {
  readonly base: string;
  cookie = '';
  csrf = '';
  constructor(base: string) {
    this.base = base;
  }
  async call<T>(method: 'GET' | 'POST', path: string, body?: unknown): Promise<T> {
    const response = await fetch(`${this.base}${path}`, {
      method,
      headers: {
        ...(body !== undefined && { 'content-type': 'application/json' }),
        ...(this.cookie && { cookie: this.cookie }),
        ...(this.csrf && { 'x-csrf-token': this.csrf }),
      },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });
    const cookie = response.headers.getSetCookie().find((c) => c.startsWith('tuner_session='));
    if (cookie) this.cookie = cookie.split(';')[0]!;
    const text = await response.text();
    if (!response.ok) throw new Error(`${method} ${path}: ${response.status} ${text.slice(0, 300)}`);
    return (text ? JSON.parse(text) : {}) as T;
  }
}

export interface Stack {
  cluster: Cluster;
  service: RunningService;
  person: Person;
  databaseId: string;
  /** The admin's one-time password, for the dashboard. */
  password: string;
  agentLog: string;
  load: RunningLoad;
  /** Stops the agent, the load and the service, and removes the cluster. */
  close(): Promise<void>;
}

export interface StackOptions {
  workload: Workload;
  /** A directory of the caller's for the service's data, the agent's and the scripts. */
  work: string;
  clients: number;
  /** The agent reports this often (short windows need frequent reports). */
  reportSeconds: number;
  /** The agent asks the planner (postgresql.include_plans), its user granted pg_read_all_data. */
  includePlans?: boolean;
  /** Called at each step, for people watching. */
  say?: (line: string) => void;
  /** Stops the start (SIGTERM, Ctrl+C): a step that makes something (the cluster, the load, the
   * service, the agent) finishes first, then everything made so far is removed and the start
   * throws the signal's reason. */
  signal?: AbortSignal;
}

export async function startStack(options: StackOptions): Promise<Stack> {
  const say = options.say ?? (() => undefined);
  const { workload, work, signal } = options;
  const stopIfAsked = () => signal?.throwIfAborted();
  /** An in-process step (the service on PGlite takes seconds to start) raced with the stop: left
   * unfinished, it holds nothing outside this process, which exits after the stop. */
  const unlessStopped = <T>(step: Promise<T>): Promise<T> => {
    if (!signal) return step;
    step.catch(() => undefined);
    const stopped = new Promise<never>((_resolve, reject) => {
      if (signal.aborted) reject(signal.reason as Error);
      signal.addEventListener('abort', () => reject(signal.reason as Error), { once: true });
    });
    return Promise.race([step, stopped]);
  };
  const children: ChildProcess[] = [];
  let cluster: Cluster | undefined;
  let service: RunningService | undefined;
  let load: RunningLoad | undefined;
  const close = async () => {
    const exits = children
      .filter((child) => child.exitCode === null && child.signalCode === null)
      .map((child) => new Promise((r) => child.once('exit', r)));
    for (const child of children) child.kill('SIGTERM');
    await Promise.all(exits);
    await load?.stop();
    await service?.close();
    await cluster?.destroy();
  };
  try {
    say(`== a throwaway PostgreSQL cluster under the ${workload.name} workload: ${workload.description}`);
    cluster = await startCluster({ durable: true });
    stopIfAsked();
    // Before 15 only a superuser may run ALTER SYSTEM; from 15 on, the least-privilege grants.
    if (cluster.major < 15) await cluster.sql('ALTER ROLE agent_user SUPERUSER');
    else
      for (const sql of localGrantsSql('agent_user')
        .split('\n')
        .filter((l) => l.startsWith('GRANT')))
        await cluster.sql(sql);
    await workload.setup(cluster);
    // Planning a statement reads what it reads (docs/plans.md).
    if (options.includePlans) await cluster.sql('GRANT pg_read_all_data TO agent_user');
    stopIfAsked();
    load = await startLoad(cluster, workload, { dir: work, clients: options.clients });
    stopIfAsked();
    const osUser = serverOsUser();
    say(
      `   PostgreSQL ${cluster.major} (${cluster.binariesSource === 'embedded' ? 'the embedded build from node_modules' : cluster.binDir})` +
        `${osUser ? `, run as the OS user ${osUser} since we are root` : ''}, data in ${cluster.dataDir}; load from ${load.generator}`,
    );

    say('== the tuning service, embedded storage');
    const password = randomBytes(9).toString('base64url');
    const port = await freePort();
    const request = parseServiceArgs(['--listen', `127.0.0.1:${port}`, '--data-dir', join(work, 'service-data')], {
      TUNER_ADMIN_PASSWORD: password,
      TUNER_LOG_LEVEL: 'warn',
    });
    if (request.kind !== 'run') throw new Error('the service did not accept its configuration');
    service = await unlessStopped(startService(request.config, { announce: () => undefined, logStream: { write: () => undefined } }));
    const person = new Person(service.url);
    person.csrf = (await person.call<{ csrfToken: string }>('POST', '/api/manage/login', { username: 'admin', password })).csrfToken;
    const created = await person.call<{ database: { id: string }; apiKey: string }>('POST', '/api/manage/databases', {
      name: workload.name,
      target: 'local',
    });
    const databaseId = created.database.id;
    say(`dashboard: ${service.url}/  (log in as admin, password ${password})`);

    say('== tuner-agent --local');
    const dir = mkdtempSync(join(work, 'agent-'));
    writeFileSync(
      join(dir, 'agent.yaml'),
      `postgresql:\n  connection_url: ${cluster.agentUrl}\n  include_queries: true\n${options.includePlans ? '  include_plans: true\n' : ''}tuner:\n  server_url: ${service.url}\n  api_key: ${created.apiKey}\n  database_id: ${databaseId}\n`,
    );
    const agentLog = join(work, 'agent.log');
    children.push(
      spawn(process.execPath, [AGENT_BIN, '--local'], { cwd: dir, stdio: ['ignore', openSync(agentLog, 'a'), openSync(agentLog, 'a')] }),
    );
    await person.call('POST', `/api/manage/databases/${databaseId}/report-interval`, { reportIntervalSeconds: options.reportSeconds });
    await until(
      'the agent to connect',
      async () =>
        (await person.call<{ database: { agent: { connected: boolean } | null } }>('GET', `/api/manage/databases/${databaseId}`)).database
          .agent?.connected,
      60_000,
      1000,
      signal,
    );
    say(`agent connected (its log: ${agentLog})`);
    // A session starts from the agent's reports: wait for one that has the workload in it.
    type Latest = { report: { metrics: { derived: { calls: number } } | null } | null };
    await until(
      'a report with the workload in it',
      async () =>
        ((await person.call<Latest>('GET', `/api/manage/databases/${databaseId}/reports/latest`)).report?.metrics?.derived.calls ?? 0) > 0,
      60_000,
      1000,
      signal,
    );
    return { cluster, service, person, databaseId, password, agentLog, load, close };
  } catch (err) {
    await close();
    throw err;
  }
}

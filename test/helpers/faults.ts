// The fault suite's bench (test/faults-*.test.ts): a throwaway cluster with agent_user's
// least-privilege grants, the real tuning service, the real agent process pointed at both, and
// the check every case ends with: the database on its known-good configuration, in pg_settings
// and in postgresql.auto.conf.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Cluster } from '../../src/lab/cluster.ts';
import { startAgentCluster, writeLocalAgentConfig } from './agent-cluster.ts';
import { startAgent, type AgentProcess } from './agent-process.ts';
import type { PersonClient, ServiceStore, StorageKind, TestService } from './service.ts';
import { startAdminService } from './service-admin.ts';
import { until } from './until.ts';

/** What a fresh cluster runs with, and what every case must end on. */
export const KNOWN_GOOD = { random_page_cost: '4', seq_page_cost: '1' } as const;

export interface CommandView {
  id: string;
  state: string;
  outcome: { status: string; effective: Record<string, string>; errors: string[]; restored: boolean } | null;
}

export interface EventView {
  at: string;
  code: string;
  message: string;
  commandId: string | null;
}

/** What postgresql.auto.conf holds for `name`, read from the file itself, so that it can be read
 * while the postmaster is stopped. */
export function autoConfValue(cluster: Cluster, name: string): string | undefined {
  let value: string | undefined;
  for (const line of readFileSync(join(cluster.dataDir, 'postgresql.auto.conf'), 'utf8').split('\n')) {
    const m = /^\s*([a-z_][a-z0-9_.]*)\s*=\s*'((?:[^']|'')*)'/.exec(line);
    if (m?.[1] === name) value = m[2]!.replaceAll("''", "'");
  }
  return value;
}

export async function liveSetting(cluster: Cluster, name: string): Promise<string | undefined> {
  return (await cluster.sql<{ setting: string }>('SELECT setting FROM pg_settings WHERE name = $1', [name]))[0]?.setting;
}

/** Every known-good parameter live at its value and absent from postgresql.auto.conf, or what differs. */
export async function differencesFromKnownGood(cluster: Cluster): Promise<string[]> {
  const differences: string[] = [];
  for (const [name, value] of Object.entries(KNOWN_GOOD)) {
    const live = await liveSetting(cluster, name);
    if (live !== value) differences.push(`pg_settings ${name} = ${live}, expected ${value}`);
    const file = autoConfValue(cluster, name);
    if (file !== undefined) differences.push(`postgresql.auto.conf ${name} = '${file}', expected no entry`);
  }
  return differences;
}

/** Waits until the database is on its known-good configuration; the error says what differs. */
export async function untilKnownGood(cluster: Cluster, timeoutMs = 30_000): Promise<void> {
  let last: string[] = [];
  try {
    await until(
      'the known-good configuration',
      async () => {
        last = await differencesFromKnownGood(cluster);
        return last.length === 0;
      },
      timeoutMs,
    );
  } catch {
    throw new Error(`the database is not on its known-good configuration: ${last.join('; ')}`);
  }
}

/** The postmaster's pid, from postmaster.pid. */
export function postmasterPid(cluster: Cluster): number {
  return Number(readFileSync(join(cluster.dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
}

/** A SIGHUP (pg_reload_conf) waits at the postmaster: sent while it was stopped, delivered when
 * it continues. Read from the kernel's pending-signal masks in /proc (SIGHUP is signal 1). */
export function reloadPending(cluster: Cluster): boolean {
  const status = readFileSync(`/proc/${postmasterPid(cluster)}/status`, 'utf8');
  return [...status.matchAll(/^(?:SigPnd|ShdPnd):\s*([0-9a-f]+)$/gm)].some((m) => (BigInt(`0x${m[1]}`) & 1n) === 1n);
}

/** Runs `body` with the postmaster stopped (SIGSTOP): existing sessions go on, nothing new starts
 * and no reload happens. The postmaster always continues afterwards. */
export async function withPostmasterStopped<T>(cluster: Cluster, body: () => Promise<T>): Promise<T> {
  const pid = postmasterPid(cluster);
  process.kill(pid, 'SIGSTOP');
  try {
    return await body();
  } finally {
    process.kill(pid, 'SIGCONT');
  }
}

export interface FaultLab {
  cluster: Cluster;
  store: ServiceStore;
  /** The running service; undefined while it is stopped. */
  readonly service: TestService | undefined;
  /** The service's address, the same across its restarts. */
  listen: string;
  /** The admin, logged in to the running service. */
  readonly person: PersonClient;
  /** Each case starts on the known-good configuration with the service up, whatever the
   * previous case left behind, so that one failure does not fail the cases after it. */
  beginCase(): Promise<void>;
  stopService(): Promise<void>;
  /** Starts the service again on the same address and storage. */
  startService(): Promise<void>;
  /** A database entry of its own (report interval 1 s) and an agent directory configured for it. */
  database(name: string, options?: { serverUrl?: string }): Promise<LabDatabase>;
  dispose(): Promise<void>;
}

export interface LabDatabase {
  databaseId: string;
  apiKey: string;
  apiKeyId: string;
  dir: string;
  /** Starts the real agent (`--local`) in the database's directory. */
  startAgent(): AgentProcess;
  issue(command: Record<string, unknown>): Promise<string>;
  /** The command once the agent acknowledged it. */
  outcome(commandId: string, timeoutMs?: number): Promise<CommandView>;
  events(): Promise<EventView[]>;
  /** Waits until the service has a report with metrics received after `since`. */
  reportAfter(since: number, timeoutMs?: number): Promise<void>;
}

export async function startFaultLab(kind: StorageKind = 'pglite'): Promise<FaultLab> {
  const cluster = await startAgentCluster();
  const served = await startAdminService(kind);
  const { store, listen } = served;
  const dirs: string[] = [];
  const person = () => served.admin;
  const lab: FaultLab = {
    cluster,
    store,
    listen,
    get service() {
      return served.running ? served.service : undefined;
    },
    get person() {
      return served.admin;
    },
    async beginCase() {
      if (!served.running) await served.start();
      await cluster.sql('ALTER SYSTEM RESET ALL');
      await cluster.sql('SELECT pg_reload_conf()');
      await untilKnownGood(cluster, 10_000);
    },
    stopService: () => served.stop(),
    startService: () => served.start(),
    async database(name, options = {}) {
      const { databaseId, apiKey, apiKeyId } = await person().createDatabase(name, 'local');
      const interval = await person().post(`/api/manage/databases/${databaseId}/report-interval`, { reportIntervalSeconds: 1 });
      if (interval.status !== 200) throw new Error(`report interval: ${interval.status}`);
      const dir = mkdtempSync(join(tmpdir(), 'tuner-faults-'));
      dirs.push(dir);
      writeLocalAgentConfig(dir, { cluster, serverUrl: options.serverUrl ?? `http://${listen}`, apiKey, databaseId });
      const base = `/api/manage/databases/${databaseId}`;
      return {
        databaseId,
        apiKey,
        apiKeyId,
        dir,
        startAgent: () => startAgent(['--local'], { cwd: dir }),
        async issue(command) {
          const issued = await person().post<{ command: CommandView }>(`${base}/commands`, command);
          if (issued.status !== 201) throw new Error(`issuing a command: ${issued.status} ${JSON.stringify(issued.body)}`);
          return issued.body.command.id;
        },
        outcome: (commandId, timeoutMs = 30_000) =>
          until(
            `command ${commandId} to be acknowledged`,
            async () => {
              const list = (await person().get<{ commands: CommandView[] }>(`${base}/commands`)).body.commands;
              return list.find((c) => c.id === commandId && c.outcome);
            },
            timeoutMs,
          ),
        events: async () => (await person().get<{ events: EventView[] }>(`${base}/events?limit=500`)).body.events,
        async reportAfter(since, timeoutMs = 30_000) {
          await until(
            'a report with metrics',
            async () => {
              const latest = (await person().get<{ report: { receivedAt: string; metrics: unknown } | null }>(`${base}/reports/latest`))
                .body.report;
              return latest?.metrics && Date.parse(latest.receivedAt) > since;
            },
            timeoutMs,
          );
        },
      };
    },
    async dispose() {
      await served.close();
      await cluster.destroy();
      for (const d of dirs) rmSync(d, { recursive: true, force: true });
    },
  };
  return lab;
}

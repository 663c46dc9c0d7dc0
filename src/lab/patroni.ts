// A throwaway Patroni cluster for tests: one etcd (v3 API) and two Patroni members, a leader and
// a streaming replica, all on loopback ports that were free, in one temp directory, run as the
// `postgres` OS user when we are root (initdb refuses root). Patroni loops every 2 s, so a
// `PATCH /config` reaches the members within a few seconds. The REST API asks for basic auth on
// its unsafe endpoints (PATCH, POST), as a production cluster should.
// stop() leaves nothing running: the Patroni and etcd process groups are killed, each postmaster
// (Patroni starts it in a session of its own) is shut down immediately, and the directory goes.
// The same happens when the test process exits without calling stop().
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chownSync, existsSync, mkdirSync, mkdtempSync, openSync, closeSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { z } from 'zod';
import { AGENT_USER_PASSWORD_FOR_TESTS, freePort, serverOsUser } from './cluster.ts';
import { PatroniApi } from '../agent/targets/patroni/api.ts';
import { findPgBinaries } from './postgres-binaries.ts';

export const PATRONI_API_USER_FOR_TESTS = 'patroni';
export const PATRONI_API_PASSWORD_FOR_TESTS = 'patroni-pw-4b81d2';
const SUPERUSER_PASSWORD = 'postgres-pw-91ac3e';

/** Patroni's loop and leader key timing: loop_wait + 2 * retry_timeout <= ttl, as Patroni asks. */
export const LAB_LOOP_WAIT_S = 2;
const TTL_S = 15;
const RETRY_TIMEOUT_S = 5;

export interface PatroniLabMember {
  readonly name: string;
  readonly pgPort: number;
  readonly apiPort: number;
  /** http://127.0.0.1:<apiPort> */
  readonly apiUrl: string;
  readonly dataDir: string;
  /** `agent_user` (pg_monitor) connection URL to this member. */
  readonly agentUrl: string;
  /** Runs SQL as the superuser on this member over its Unix socket. */
  sql<T extends object = Record<string, unknown>>(text: string, params?: unknown[]): Promise<T[]>;
  /** Kills this member's Patroni (SIGKILL) and shuts its server down immediately. */
  kill(): Promise<void>;
}

export interface PatroniLab {
  readonly scope: string;
  readonly members: readonly PatroniLabMember[];
  /** The etcd client URL, http://127.0.0.1:<port>. */
  readonly etcdUrl: string;
  readonly apiUser: string;
  readonly apiPassword: string;
  /** Calls a member's REST API with the lab's credentials; the body is JSON. */
  api(member: PatroniLabMember, method: string, path: string, body?: unknown): Promise<{ status: number; body: unknown }>;
  /** The member that holds the leader key now (polls /cluster). */
  leader(): Promise<PatroniLabMember>;
  /** Waits until there is a running leader and every other member streams from it. */
  waitHealthy(timeoutMs?: number): Promise<void>;
  /** Stops etcd (SIGKILL), leaving its data, as an outage would; startEtcd() brings it back. */
  stopEtcd(): Promise<void>;
  startEtcd(): Promise<void>;
  stop(): Promise<void>;
}

export interface PatroniLabOptions {
  /** Members in all (one leader, the rest replicas); default 2. */
  members?: number;
  /** Parameters for the bootstrap dynamic configuration, beside the lab's own. */
  parameters?: Record<string, string | number>;
}

interface Running {
  child: ChildProcess;
}

const osUser = serverOsUser();

function ownedByServer(path: string): void {
  if (!osUser) return;
  const uid = Number(execFileSync('id', ['-u', osUser], { encoding: 'utf8' }).trim());
  const gid = Number(execFileSync('id', ['-g', osUser], { encoding: 'utf8' }).trim());
  chownSync(path, uid, gid);
}

/** Starts `cmd` as the server's OS user in a process group of its own, output to `logFile`. */
function startProcess(cmd: string, args: string[], logFile: string): Running {
  const [file, argv] = osUser ? ['runuser', ['-u', osUser, '--', cmd, ...args]] : [cmd, args];
  const fd = openSync(logFile, 'a');
  const child = spawn(file, argv, { detached: true, stdio: ['ignore', fd, fd] });
  closeSync(fd);
  // The test's own exit must not wait for these; the exit hook below kills them.
  child.unref();
  return { child };
}

function hasExited(child: ChildProcess): boolean {
  return child.exitCode !== null || child.signalCode !== null;
}

/** Polls rather than awaiting 'exit': the child is unref'd, and a timer keeps the loop alive. */
async function exited(running: Running, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!hasExited(running.child) && Date.now() < deadline) await sleep(50);
}

function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  if (child.pid === undefined || hasExited(child)) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    // already gone
  }
}

/** The postmaster's pid from its pid file, if the file is there. */
function postmasterPid(dataDir: string): number | undefined {
  try {
    const pid = Number(readFileSync(join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

function isAlive(pid: number): boolean {
  if (pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** SIGQUIT is PostgreSQL's immediate shutdown: the postmaster takes its backends down with it. */
async function shutDownPostmaster(dataDir: string): Promise<void> {
  const pid = postmasterPid(dataDir);
  if (pid === undefined || !isAlive(pid)) return;
  try {
    process.kill(pid, 'SIGQUIT');
  } catch {
    return;
  }
  const deadline = Date.now() + 10_000;
  while (isAlive(pid) && Date.now() < deadline) await sleep(50);
  if (isAlive(pid)) process.kill(pid, 'SIGKILL');
}

const ClusterSchema = z.object({ members: z.array(z.object({ name: z.string(), role: z.string(), state: z.string() })) });

/** The members of a GET /cluster answer; none when it is not one. */
function clusterMembers(body: unknown): Array<{ name: string; role: string; state: string }> {
  const parsed = ClusterSchema.safeParse(body);
  return parsed.success ? parsed.data.members : [];
}

export async function startPatroniLab(options: PatroniLabOptions = {}): Promise<PatroniLab> {
  const count = options.members ?? 2;
  const { binDir } = findPgBinaries(15);
  const root = mkdtempSync(join(tmpdir(), 'tuner-patroni-'));
  ownedByServer(root);
  const scope = `tuner-${root
    .slice(-6)
    .toLowerCase()
    .replace(/[^a-z0-9]/g, 'x')}`;
  const processes: Running[] = [];
  const dataDirs: string[] = [];
  let stopped = false;

  // Synchronous on purpose: it runs from process.on('exit'), where nothing asynchronous does.
  const killEverything = () => {
    for (const p of processes) killGroup(p.child, 'SIGKILL');
    for (const dir of dataDirs) {
      const pid = postmasterPid(dir);
      if (pid !== undefined && isAlive(pid)) {
        try {
          process.kill(pid, 'SIGQUIT');
        } catch {
          // gone
        }
      }
    }
  };
  const onExit = () => {
    killEverything();
    // The postmasters are still exiting and writing: wait for them (synchronously, this is an
    // exit handler) before the directory goes.
    const deadline = Date.now() + 10_000;
    const waiting = new Int32Array(new SharedArrayBuffer(4));
    while (dataDirs.some((d) => isAlive(postmasterPid(d) ?? 0)) && Date.now() < deadline) Atomics.wait(waiting, 0, 0, 50);
    rmSync(root, { recursive: true, force: true, maxRetries: 5 });
  };
  process.on('exit', onExit);

  // etcd
  const etcdClientPort = await freePort();
  const etcdPeerPort = await freePort();
  const etcdUrl = `http://127.0.0.1:${etcdClientPort}`;
  const etcdDir = join(root, 'etcd');
  mkdirSync(etcdDir, { mode: 0o700 });
  ownedByServer(etcdDir);
  let etcd: Running | undefined;
  const startEtcd = async () => {
    etcd = startProcess(
      'etcd',
      [
        '--name=lab',
        `--data-dir=${etcdDir}`,
        `--listen-client-urls=${etcdUrl}`,
        `--advertise-client-urls=${etcdUrl}`,
        `--listen-peer-urls=http://127.0.0.1:${etcdPeerPort}`,
        `--initial-advertise-peer-urls=http://127.0.0.1:${etcdPeerPort}`,
        `--initial-cluster=lab=http://127.0.0.1:${etcdPeerPort}`,
        '--log-level=warn',
      ],
      join(root, 'etcd.log'),
    );
    processes.push(etcd);
    await waitFor('etcd to answer', 30_000, async () => {
      const res = await fetch(`${etcdUrl}/health`).catch(() => null);
      return res?.ok === true;
    });
  };

  // The agent's own REST API client, with the lab's credentials.
  const client = new PatroniApi({ restApiUrls: [], username: PATRONI_API_USER_FOR_TESTS, password: PATRONI_API_PASSWORD_FOR_TESTS });
  const api = (member: PatroniLabMember, method: string, path: string, body?: unknown) => client.request(member.apiUrl, method, path, body);

  try {
    await startEtcd();

    const members: PatroniLabMember[] = [];
    const patronis = new Map<string, Running>();
    for (let i = 0; i < count; i++) {
      const name = `m${i}`;
      const dir = join(root, name);
      mkdirSync(dir, { mode: 0o700 });
      ownedByServer(dir);
      const dataDir = join(dir, 'data');
      dataDirs.push(dataDir);
      const pgPort = await freePort();
      const apiPort = await freePort();
      const config = {
        scope,
        namespace: '/tuner-lab/',
        name,
        restapi: {
          listen: `127.0.0.1:${apiPort}`,
          connect_address: `127.0.0.1:${apiPort}`,
          authentication: { username: PATRONI_API_USER_FOR_TESTS, password: PATRONI_API_PASSWORD_FOR_TESTS },
        },
        etcd3: { hosts: [`127.0.0.1:${etcdClientPort}`] },
        bootstrap: {
          dcs: {
            ttl: TTL_S,
            loop_wait: LAB_LOOP_WAIT_S,
            retry_timeout: RETRY_TIMEOUT_S,
            maximum_lag_on_failover: 1048576,
            postgresql: {
              use_pg_rewind: true,
              use_slots: true,
              parameters: {
                shared_preload_libraries: 'pg_stat_statements',
                'pg_stat_statements.track': 'all',
                password_encryption: 'scram-sha-256',
                // A throwaway cluster: durability buys nothing here, speed does.
                fsync: 'off',
                ...options.parameters,
              },
            },
          },
          initdb: [{ encoding: 'UTF8' }, { locale: 'C' }],
        },
        postgresql: {
          listen: `127.0.0.1:${pgPort}`,
          connect_address: `127.0.0.1:${pgPort}`,
          data_dir: dataDir,
          bin_dir: binDir,
          pgpass: join(dir, 'pgpass'),
          authentication: {
            superuser: { username: 'postgres', password: SUPERUSER_PASSWORD },
            replication: { username: 'replicator', password: SUPERUSER_PASSWORD },
          },
          // A replica's base backup asks for an immediate checkpoint rather than waiting for a
          // spread one (seconds on an idle leader).
          basebackup: [{ checkpoint: 'fast' }],
          // Local to each member: its socket directory.
          parameters: { unix_socket_directories: dir },
          pg_hba: [
            'local all all trust',
            'host all postgres 127.0.0.1/32 trust',
            'host replication replicator 127.0.0.1/32 trust',
            'host all all 127.0.0.1/32 scram-sha-256',
          ],
        },
        tags: { nofailover: false, noloadbalance: false, clonefrom: false },
      };
      const configFile = join(dir, 'patroni.yml');
      // JSON is YAML.
      writeFileSync(configFile, JSON.stringify(config, null, 2));
      ownedByServer(configFile);
      const sql = async <T extends object>(text: string, params: unknown[] = []): Promise<T[]> => {
        const client = new pg.Client({ host: dir, port: pgPort, user: 'postgres', database: 'postgres' });
        client.on('error', () => undefined);
        await client.connect();
        try {
          return (await client.query<T>(text, params)).rows;
        } finally {
          await client.end().catch(() => undefined);
        }
      };
      const member: PatroniLabMember = {
        name,
        pgPort,
        apiPort,
        apiUrl: `http://127.0.0.1:${apiPort}`,
        dataDir,
        agentUrl: `postgresql://agent_user:${AGENT_USER_PASSWORD_FOR_TESTS}@127.0.0.1:${pgPort}/postgres`,
        sql,
        async kill() {
          const running = patronis.get(name);
          if (running) {
            killGroup(running.child, 'SIGKILL');
            await exited(running);
          }
          await shutDownPostmaster(dataDir);
        },
      };
      members.push(member);
      // The first member bootstraps alone, so that it is the one that takes the leader key.
      const running = startProcess('patroni', [configFile], join(dir, 'patroni.log'));
      processes.push(running);
      patronis.set(name, running);
      if (i === 0) {
        await waitFor(`${name} to lead`, 90_000, async () => {
          const res = await api(member, 'GET', '/cluster').catch(() => null);
          return res !== null && clusterMembers(res.body).some((m) => m.name === name && m.role === 'leader' && m.state === 'running');
        });
        await sql('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
        await sql(`CREATE USER agent_user WITH PASSWORD '${AGENT_USER_PASSWORD_FOR_TESTS}'`);
        await sql('GRANT pg_monitor TO agent_user');
      }
    }

    const leader = async (): Promise<PatroniLabMember> => {
      for (const m of members) {
        const res = await api(m, 'GET', '/cluster').catch(() => null);
        if (!res) continue;
        const held = clusterMembers(res.body).find((x) => x.role === 'leader');
        const found = held && members.find((x) => x.name === held.name);
        if (found) return found;
      }
      throw new Error('no member reports a leader');
    };

    const waitHealthy = async (timeoutMs = 90_000) => {
      await waitFor('a running leader and streaming replicas', timeoutMs, async () => {
        const current = await leader().catch(() => null);
        if (!current) return false;
        const res = await api(current, 'GET', '/cluster').catch(() => null);
        const listed = res ? clusterMembers(res.body) : [];
        if (listed.length !== members.length || !listed.every((m) => m.state === 'running' || m.state === 'streaming')) return false;
        // Patroni 3.0 says "running" for a replica that is up; streaming is what the server says.
        const rows = await current
          .sql<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_replication WHERE state = 'streaming'`)
          .catch(() => [{ n: 0 }]);
        return rows[0]?.n === members.length - 1;
      });
    };
    await waitHealthy();

    const stopEtcd = async () => {
      if (!etcd) return;
      killGroup(etcd.child, 'SIGKILL');
      await exited(etcd);
      etcd = undefined;
    };

    return {
      scope,
      members,
      etcdUrl,
      apiUser: PATRONI_API_USER_FOR_TESTS,
      apiPassword: PATRONI_API_PASSWORD_FOR_TESTS,
      api,
      leader,
      waitHealthy,
      stopEtcd,
      startEtcd,
      async stop() {
        if (stopped) return;
        stopped = true;
        // Patroni first, so that it does not start a server we are stopping.
        for (const [, p] of patronis) killGroup(p.child, 'SIGKILL');
        await Promise.all([...patronis.values()].map((p) => exited(p)));
        await Promise.all(dataDirs.map(shutDownPostmaster));
        if (etcd) {
          killGroup(etcd.child, 'SIGKILL');
          await exited(etcd);
        }
        rmSync(root, { recursive: true, force: true });
        process.off('exit', onExit);
      },
    };
  } catch (err) {
    stopped = true;
    process.off('exit', onExit);
    killEverything();
    await Promise.all(processes.map((p) => exited(p)));
    await Promise.all(dataDirs.map(shutDownPostmaster));
    const logs = ['etcd.log', ...dataDirs.map((d) => join(d, '..', 'patroni.log').slice(root.length + 1))]
      .map((f) => join(root, f))
      .filter((f) => existsSync(f))
      .map((f) => `--- ${f}\n${readFileSync(f, 'utf8').slice(-3000)}`);
    rmSync(root, { recursive: true, force: true });
    throw new Error(`the Patroni lab did not start: ${(err as Error).message}\n${logs.join('\n')}`, { cause: err });
  }
}

async function waitFor(what: string, timeoutMs: number, probe: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await probe().catch(() => false)) return;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(250);
  }
}

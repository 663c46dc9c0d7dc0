// Throwaway PostgreSQL clusters for tests, benchmarks and the demo: initdb into a temp dir,
// a free port on 127.0.0.1, pg_stat_statements preloaded and created, an `agent_user` with
// pg_monitor. Whoever creates one owns it and may reload, restart and break it freely.
// With `tls`, the cluster accepts TCP connections over TLS only, as the managed clouds do.
import { execFile, execFileSync } from 'node:child_process';
import { appendFileSync, chmodSync, chownSync, copyFileSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { findPgBinaries, type BinariesSource } from './postgres-binaries.ts';
import { freePort } from './ports.ts';
import type { TestCa } from './tls.ts';

const run = promisify(execFile);

export { freePort };

export const AGENT_USER_PASSWORD_FOR_TESTS = 'agent-pw-7f3a9c1e';

export interface ClusterOptions {
  /** A PostgreSQL major (13-18) instead of the default binaries (src/lab/postgres-binaries.ts). */
  major?: number;
  /** Extra postgresql.conf lines, e.g. `max_connections = 50`. */
  extraConf?: string[];
  /** Create pg_stat_statements at this version instead of the default (e.g. '1.8'). */
  pgssVersion?: string;
  /** Leave out pg_stat_statements from shared_preload_libraries (to test the preflight). */
  noPreload?: boolean;
  /** Keep fsync on, as a real server has it: for benchmarks of WAL and checkpoint settings. */
  durable?: boolean;
  /**
   * Accept TCP connections over TLS only (`hostssl … scram-sha-256`, `hostnossl … reject`), with a
   * server certificate `ca` issues for `names` (default localhost and 127.0.0.1). The superuser
   * then connects over the cluster's Unix socket.
   */
  tls?: { ca: TestCa; names?: readonly string[] };
}

export interface Cluster {
  readonly port: number;
  readonly host: string;
  readonly dataDir: string;
  readonly binDir: string;
  /** The server's major version, and where its binaries came from. */
  readonly major: number;
  readonly binariesSource: BinariesSource;
  /** Superuser connection URL (trust auth over TCP on loopback; over the Unix socket with `tls`). */
  readonly adminUrl: string;
  /** `agent_user` (pg_monitor) connection URL with its password. */
  readonly agentUrl: string;
  /** The CA that issued the server's certificate, when the cluster accepts TLS only. */
  readonly ca: TestCa | undefined;
  /** Runs SQL as the superuser on database `postgres` (or `db`) and returns the rows. */
  sql<T extends object = Record<string, unknown>>(text: string, params?: unknown[], db?: string): Promise<T[]>;
  /** A pg_ctl command line that restarts this cluster, runnable by root or postgres. */
  readonly restartCommand: string;
  restart(): Promise<void>;
  stop(): Promise<void>;
  /** Stops the server if running and removes the data directory. */
  destroy(): Promise<void>;
}

/** Directory with initdb/pg_ctl: $PG_BIN, else Debian's newest, else an embedded build. */
export function findPgBinDir(): string {
  return findPgBinaries().binDir;
}

/**
 * initdb and pg_ctl refuse to run as root: as root, the server runs as `postgres` (Debian's
 * packages make it) or, on a machine without that user, as `nobody`. Otherwise as ourselves.
 */
export function serverOsUser(): string | undefined {
  if (process.getuid?.() !== 0) return undefined;
  try {
    idOf('-u', 'postgres');
    return 'postgres';
  } catch {
    return 'nobody';
  }
}

function asPostgres(cmd: string, args: string[]): [string, string[]] {
  const user = serverOsUser();
  return user ? ['runuser', ['-u', user, '--', cmd, ...args]] : [cmd, args];
}

async function runAsPostgres(cmd: string, args: string[]): Promise<void> {
  const [file, argv] = asPostgres(cmd, args);
  try {
    await run(file, argv, { timeout: 120_000 });
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new Error(`${cmd} ${args.join(' ')} failed: ${e.stderr?.trim() || e.message}`, { cause: err });
  }
}

function shellQuote(s: string): string {
  return `'${s.replaceAll("'", `'\\''`)}'`;
}

export async function startCluster(options: ClusterOptions = {}): Promise<Cluster> {
  const { binDir, major, source: binariesSource } = findPgBinaries(options.major);
  const dataDir = mkdtempSync(join(tmpdir(), 'tuner-pg-'));
  const osUser = serverOsUser();
  if (osUser) chownSync(dataDir, uidOf(osUser), gidOf(osUser));
  const pgCtl = join(binDir, 'pg_ctl');
  const logFile = join(dataDir, 'server.log');

  await runAsPostgres(join(binDir, 'initdb'), ['-D', dataDir, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--locale=C', '--no-sync']);
  const conf = [
    `listen_addresses = '127.0.0.1'`,
    `unix_socket_directories = '${dataDir}'`,
    options.noPreload ? '' : `shared_preload_libraries = 'pg_stat_statements'`,
    `pg_stat_statements.track = all`,
    // A throwaway cluster: durability buys nothing here, speed does (unless a benchmark asks).
    options.durable ? '' : `fsync = off`,
    `max_connections = 100`,
    // pg_hba.conf asks for scram-sha-256, which PostgreSQL 13 does not store by default (md5).
    `password_encryption = 'scram-sha-256'`,
    `logging_collector = off`,
    ...(options.tls ? serverCertificate(dataDir, options.tls) : []),
    ...(options.extraConf ?? []),
  ];
  appendFileSync(join(dataDir, 'postgresql.conf'), `\n# tuner throwaway cluster\n${conf.join('\n')}\n`);
  // The superuser needs no password on loopback (the tests' own setup); every other role, the
  // agent's included, authenticates for real, so a wrong password fails as it would in production.
  const hba = options.tls
    ? ['local all all trust', 'hostssl all all 127.0.0.1/32 scram-sha-256', 'hostnossl all all 127.0.0.1/32 reject']
    : ['local all all trust', 'host all postgres 127.0.0.1/32 trust', 'host all all 127.0.0.1/32 scram-sha-256'];
  writeFileSync(join(dataDir, 'pg_hba.conf'), [...hba, ''].join('\n'));

  const ctl = (args: string[]) => runAsPostgres(pgCtl, ['-D', dataDir, '-l', logFile, '-w', '-t', '60', ...args]);
  const port = await startOnFreePort(dataDir, logFile, () => ctl(['start']));

  const host = '127.0.0.1';
  const adminAt = (db: string) =>
    options.tls
      ? `postgresql://postgres@/${db}?host=${encodeURIComponent(dataDir)}&port=${port}`
      : `postgresql://postgres@${host}:${port}/${db}`;
  const adminUrl = adminAt('postgres');
  const agentUrl = `postgresql://agent_user:${AGENT_USER_PASSWORD_FOR_TESTS}@${host}:${port}/postgres`;

  const sql = async <T extends object>(text: string, params: unknown[] = [], db = 'postgres'): Promise<T[]> => {
    const client = new pg.Client({ connectionString: adminAt(db) });
    // A server that stops between the connect and the query (a restart a test makes) terminates
    // the idle connection, which the client reports as an 'error' event: without a listener that
    // is an uncaught exception. The query fails on its own (connection terminated), so nothing
    // is lost by listening.
    client.on('error', () => undefined);
    await client.connect();
    try {
      const result = await client.query<T>(text, params);
      return result.rows;
    } finally {
      await client.end();
    }
  };

  const pgssVersion = options.pgssVersion ? ` VERSION '${options.pgssVersion}'` : '';
  if (!options.noPreload) await sql(`CREATE EXTENSION pg_stat_statements${pgssVersion}`);
  await sql(`CREATE USER agent_user WITH PASSWORD '${AGENT_USER_PASSWORD_FOR_TESTS}'`);
  await sql('GRANT pg_monitor TO agent_user');

  const [ctlFile, ctlArgs] = asPostgres(pgCtl, ['-D', dataDir, '-l', logFile, '-w', '-t', '60', 'restart', '-m', 'fast']);
  let destroyed = false;
  return {
    port,
    host,
    dataDir,
    binDir,
    major,
    binariesSource,
    adminUrl,
    agentUrl,
    ca: options.tls?.ca,
    sql,
    restartCommand: [ctlFile, ...ctlArgs].map(shellQuote).join(' '),
    restart: () => ctl(['restart', '-m', 'fast']),
    stop: () => ctl(['stop', '-m', 'fast']),
    async destroy() {
      if (destroyed) return;
      destroyed = true;
      if (existsSync(join(dataDir, 'postmaster.pid'))) {
        await ctl(['stop', '-m', 'immediate']).catch(() => undefined);
      }
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** The server's certificate and key in the data directory (PostgreSQL wants its key private). */
function serverCertificate(dataDir: string, tls: NonNullable<ClusterOptions['tls']>): string[] {
  const issued = tls.ca.issue(tls.names ?? ['localhost', '127.0.0.1']);
  const certFile = join(dataDir, 'server.crt');
  const keyFile = join(dataDir, 'server.key');
  const caFile = join(dataDir, 'root.crt');
  copyFileSync(issued.certFile, certFile);
  copyFileSync(issued.keyFile, keyFile);
  copyFileSync(tls.ca.certFile, caFile);
  chmodSync(keyFile, 0o600);
  const osUser = serverOsUser();
  if (osUser) {
    for (const f of [certFile, keyFile, caFile]) chownSync(f, uidOf(osUser), gidOf(osUser));
  }
  // The CA also verifies client certificates, for pg_hba.conf lines with `cert` that a test adds.
  return ['ssl = on', `ssl_cert_file = '${certFile}'`, `ssl_key_file = '${keyFile}'`, `ssl_ca_file = '${caFile}'`];
}

/** Starts the server on a port that was free a moment ago; another process may take it first
 * (tests run in parallel), so a start that cannot bind tries again on another port. */
async function startOnFreePort(dataDir: string, logFile: string, start: () => Promise<void>): Promise<number> {
  for (let attempt = 1; ; attempt++) {
    const port = await freePort();
    // The last `port` line of postgresql.conf wins.
    appendFileSync(join(dataDir, 'postgresql.conf'), `port = ${port}\n`);
    const logBefore = existsSync(logFile) ? readFileSync(logFile, 'utf8').length : 0;
    try {
      await start();
      return port;
    } catch (err) {
      const log = existsSync(logFile) ? readFileSync(logFile, 'utf8').slice(logBefore) : '';
      if (attempt >= 5 || !/could not bind|Address already in use/i.test(log)) throw err;
    }
  }
}

function idOf(flag: '-u' | '-g', name: string): number {
  return Number(execFileSync('id', [flag, name], { encoding: 'utf8' }).trim());
}
const uidOf = (name: string) => idOf('-u', name);
const gidOf = (name: string) => idOf('-g', name);

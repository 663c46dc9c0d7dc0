// pgbench against a throwaway cluster, with its summary parsed: the load of the demo and of the
// tuning benchmark.
import { execFile } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { promisify } from 'node:util';
import type { Cluster } from './cluster.ts';

const run = promisify(execFile);

export interface PgbenchResult {
  tps: number;
  latencyMs: number;
  transactions: number;
  failed: number;
}

function connection(cluster: Cluster): string[] {
  return ['-h', cluster.host, '-p', String(cluster.port), '-U', 'postgres', 'postgres'];
}

/** pgbench beside the cluster's server, else Debian's of any version, else on PATH; undefined
 * when the machine has none (the embedded server builds ship none). */
export function findPgbench(cluster: Pick<Cluster, 'binDir'>): string | undefined {
  const debian = existsSync('/usr/lib/postgresql')
    ? readdirSync('/usr/lib/postgresql').map((v) => join('/usr/lib/postgresql', v, 'bin'))
    : [];
  const onPath = (process.env['PATH'] ?? '').split(delimiter).filter(Boolean);
  return [cluster.binDir, ...debian, ...onPath].map((dir) => join(dir, 'pgbench')).find((file) => existsSync(file));
}

function pgbenchOf(cluster: Cluster): string {
  const found = findPgbench(cluster);
  if (!found) throw new Error('pgbench is not installed (Debian package postgresql-contrib or postgresql-client): this benchmark needs it');
  return found;
}

export async function pgbenchInit(cluster: Cluster, scale: number): Promise<void> {
  await run(pgbenchOf(cluster), ['-i', '-q', '-s', String(scale), '--foreign-keys', ...connection(cluster)], { timeout: 600_000 });
}

/** Runs pgbench with `args` (for example `-T 10 -c 4 -j 2`, or `-f script.sql`) and parses its
 * summary; with `cpus` ("1", "2-3"), pinned to those CPUs (taskset), away from the server's. */
export async function pgbench(cluster: Cluster, args: string[], options: { cpus?: string } = {}): Promise<PgbenchResult> {
  const command = [pgbenchOf(cluster), ...args, ...connection(cluster)];
  const [file, ...rest] = options.cpus === undefined ? command : ['taskset', '-c', options.cpus, ...command];
  const { stdout } = await run(file!, rest, { timeout: 3_600_000, maxBuffer: 16 * 1024 * 1024 });
  const number = (pattern: RegExp) => {
    const m = pattern.exec(stdout);
    return m ? Number(m[1]) : NaN;
  };
  const result = {
    tps: number(/^tps = ([\d.]+)/m),
    latencyMs: number(/^latency average = ([\d.]+) ms/m),
    transactions: number(/^number of transactions actually processed: (\d+)/m),
    failed: number(/^number of failed transactions: (\d+)/m) || 0,
  };
  if (!Number.isFinite(result.tps)) throw new Error(`pgbench printed no tps line:\n${stdout.slice(-2000)}`);
  return result;
}

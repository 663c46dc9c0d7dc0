// The load-generating workloads the demo, the tests and the benchmarks share: each makes the
// tables it reads on a throwaway cluster and runs pgbench against it. One where no knob can
// matter, one where work_mem clearly does, and pgbench's own.
import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Cluster } from './cluster.ts';
import { pgbenchInit } from './pgbench.ts';

export interface Workload {
  name: string;
  /** One sentence for people: what it runs, and what should happen when it is tuned. */
  description: string;
  /** Creates and fills the tables it reads. */
  setup(cluster: Cluster): Promise<void>;
  /** pgbench's arguments (before the connection's); a script goes into `dir`. */
  pgbenchArgs(dir: string): string[];
}

/** A point lookup and `SELECT 1`: nothing on the allow-list makes them faster. */
const SELECT_1: Workload = {
  name: 'select-1',
  description: 'SELECT 1 and a point lookup on a small table: no parameter matters, the right answer is "no significant improvement"',
  async setup(cluster) {
    await cluster.sql('CREATE TABLE lab_points AS SELECT g AS id, md5(g::text) AS v FROM generate_series(1, 1000) g');
    await cluster.sql('ALTER TABLE lab_points ADD PRIMARY KEY (id)');
    await cluster.sql('ANALYZE lab_points');
  },
  pgbenchArgs(dir) {
    const script = join(dir, 'select-1.sql');
    writeFileSync(script, '\\set id random(1, 1000)\nSELECT 1;\nSELECT v FROM lab_points WHERE id = :id;\n');
    return ['-n', '-f', script];
  },
};

/**
 * A report query whose plan work_mem decides: `NOT IN (subquery)` is a hashed SubPlan only when
 * the subquery's hash table fits in work_mem × hash_mem_multiplier; at the default 4 MB it
 * (400-byte keys × 20,000 rows) does not, and every probe row rescans the subquery. From about
 * 5 MB up it is hashed: several times faster. (A sort that spills at 4 MB is hardly slower than
 * one in memory on a machine whose temporary files stay in the page cache, so it would not show
 * a clear effect.) Three cheap statements give each window enough calls.
 */
const WORK_MEM: Workload = {
  name: 'work-mem',
  description: 'a NOT IN (subquery) report that is hashed only with work_mem above about 5 MB, beside cheap lookups: raising work_mem is a clear gain',
  async setup(cluster) {
    await cluster.sql(`CREATE TABLE lab_keys AS SELECT rpad(g::text, 400, 'k') AS key FROM generate_series(1, 20000) g`);
    await cluster.sql(`CREATE TABLE lab_probes AS SELECT rpad(((g * 7919) % 40000)::text, 400, 'k') AS key FROM generate_series(1, 60) g`);
    await cluster.sql('CREATE TABLE lab_kv AS SELECT g AS id, md5(g::text) AS v FROM generate_series(1, 1000) g');
    await cluster.sql('ALTER TABLE lab_kv ADD PRIMARY KEY (id)');
    for (const table of ['lab_keys', 'lab_probes', 'lab_kv']) await cluster.sql(`ANALYZE ${table}`);
  },
  pgbenchArgs(dir) {
    const script = join(dir, 'work-mem.sql');
    writeFileSync(
      script,
      [
        '\\set id random(1, 1000)',
        'SELECT count(*) FROM lab_probes WHERE key NOT IN (SELECT key FROM lab_keys);',
        'SELECT v FROM lab_kv WHERE id = :id;',
        'SELECT v FROM lab_kv WHERE id = :id + 0;',
        'SELECT count(*) FROM lab_kv WHERE id < :id;',
        '',
      ].join('\n'),
    );
    return ['-n', '-f', script];
  },
};

/** pgbench's TPC-B-like transactions (scale 10): bound by commits, little for the knobs to win. */
const TPCB_LIKE: Workload = {
  name: 'tpcb-like',
  description: "pgbench's TPC-B-like transactions at scale 10: bound by commits, so tuning wins little",
  setup: (cluster) => pgbenchInit(cluster, 10),
  pgbenchArgs: () => [],
};

export const WORKLOADS = { 'select-1': SELECT_1, 'work-mem': WORK_MEM, 'tpcb-like': TPCB_LIKE } as const satisfies Record<string, Workload>;
export type WorkloadName = keyof typeof WORKLOADS;

export function workloadByName(name: string): Workload {
  const workload = (WORKLOADS as Record<string, Workload>)[name];
  if (!workload) throw new Error(`unknown workload ${name}: expected one of ${Object.keys(WORKLOADS).join(', ')}`);
  return workload;
}

export interface RunningLoad {
  child: ChildProcess;
  /** Stops pgbench and waits for it to exit. */
  stop(): Promise<void>;
}

/** Runs the workload under pgbench with `clients` clients for `seconds` (a long time by default), until stopped. */
export function startLoad(cluster: Cluster, workload: Workload, options: { dir: string; clients: number; seconds?: number }): RunningLoad {
  const args = [...workload.pgbenchArgs(options.dir), '-T', String(options.seconds ?? 86_400), '-c', String(options.clients), '-j', String(Math.min(options.clients, 2))];
  const child = spawn(join(cluster.binDir, 'pgbench'), [...args, '-h', cluster.host, '-p', String(cluster.port), '-U', 'postgres', 'postgres'], { stdio: 'ignore' });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return {
    child,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

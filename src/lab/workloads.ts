// The load-generating workloads the demo, the tests and the benchmarks share: each makes the
// tables it reads on a throwaway cluster and runs a pgbench script against it, under pgbench
// when the machine has it, else under the built-in driver (src/lab/load-driver.ts). One where no
// knob can matter (the control), one where work_mem clearly does, a TPC-B-like one as pgbench
// runs, a write-heavy one with many clients and checkpoint pressure, a read-heavy one whose
// working set is larger than the default shared_buffers, a report whose JIT compilation costs
// more than it saves, a join the default random_page_cost plans as a scan of everything, and a
// trade-off: that join beside a report the lower random_page_cost makes slower. docs/benchmarks.md
// says, for each, what makes the defaults wrong and which statistic shows it.
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Cluster } from './cluster.ts';
import { startDriver } from './load-driver.ts';
import { findPgbench } from './pgbench.ts';
import { TPCC_SCRIPT, tpccSetup } from './tpcc.ts';

export interface Workload {
  name: string;
  /** One sentence for people: what it runs, and what should happen when it is tuned. */
  description: string;
  /** Creates and fills the tables it reads. */
  setup(cluster: Cluster): Promise<void>;
  /** Clients that make its load (the benchmark's default). */
  clients: number;
  /** The mode whose knobs can find its headroom. */
  mode: 'reload-only' | 'restart';
  /** One transaction, in pgbench's script language (the subset the built-in driver runs too). */
  script: string;
  /** Variables the script reads (`-D name=value` to pgbench). */
  variables?: Record<string, number>;
  /** It writes enough WAL for checkpoints to fall within its measurement windows. */
  writes?: boolean;
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
  script: '\\set id random(1, 1000)\nSELECT 1;\nSELECT v FROM lab_points WHERE id = :id;\n',
  clients: 2,
  mode: 'reload-only',
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
  description:
    'a NOT IN (subquery) report that is hashed only with work_mem above about 5 MB, beside cheap lookups: raising work_mem is a clear gain',
  async setup(cluster) {
    await cluster.sql(`CREATE TABLE lab_keys AS SELECT rpad(g::text, 400, 'k') AS key FROM generate_series(1, 20000) g`);
    await cluster.sql(`CREATE TABLE lab_probes AS SELECT rpad(((g * 7919) % 40000)::text, 400, 'k') AS key FROM generate_series(1, 60) g`);
    await cluster.sql('CREATE TABLE lab_kv AS SELECT g AS id, md5(g::text) AS v FROM generate_series(1, 1000) g');
    await cluster.sql('ALTER TABLE lab_kv ADD PRIMARY KEY (id)');
    for (const table of ['lab_keys', 'lab_probes', 'lab_kv']) await cluster.sql(`ANALYZE ${table}`);
  },
  script: [
    '\\set id random(1, 1000)',
    'SELECT count(*) FROM lab_probes WHERE key NOT IN (SELECT key FROM lab_keys);',
    'SELECT v FROM lab_kv WHERE id = :id;',
    'SELECT v FROM lab_kv WHERE id = :id + 0;',
    'SELECT count(*) FROM lab_kv WHERE id < :id;',
    '',
  ].join('\n'),
  clients: 2,
  mode: 'reload-only',
};

const TPCB_SCALE = 10;

/** pgbench's four tables at `s` (100,000 accounts per unit), made in SQL so that no pgbench is needed. */
async function pgbenchTables(cluster: Cluster, s: number): Promise<void> {
  await cluster.sql('CREATE TABLE pgbench_branches (bid int PRIMARY KEY, bbalance int, filler char(88)) WITH (fillfactor = 100)');
  await cluster.sql('CREATE TABLE pgbench_tellers (tid int PRIMARY KEY, bid int, tbalance int, filler char(84)) WITH (fillfactor = 100)');
  await cluster.sql('CREATE TABLE pgbench_accounts (aid int PRIMARY KEY, bid int, abalance int, filler char(84)) WITH (fillfactor = 100)');
  await cluster.sql('CREATE TABLE pgbench_history (tid int, bid int, aid int, delta int, mtime timestamp, filler char(22))');
  await cluster.sql(`INSERT INTO pgbench_branches SELECT b, 0 FROM generate_series(1, ${s}) b`);
  await cluster.sql(`INSERT INTO pgbench_tellers SELECT t, (t - 1) / 10 + 1, 0 FROM generate_series(1, ${10 * s}) t`);
  await cluster.sql(`INSERT INTO pgbench_accounts SELECT a, (a - 1) / 100000 + 1, 0, '' FROM generate_series(1, ${100_000 * s}) a`);
  await cluster.sql('VACUUM ANALYZE');
}

const TPCB_SCRIPT = [
  '\\set aid random(1, 100000 * :scale)',
  '\\set bid random(1, 1 * :scale)',
  '\\set tid random(1, 10 * :scale)',
  '\\set delta random(-5000, 5000)',
  'BEGIN;',
  'UPDATE pgbench_accounts SET abalance = abalance + :delta WHERE aid = :aid;',
  'SELECT abalance FROM pgbench_accounts WHERE aid = :aid;',
  'UPDATE pgbench_tellers SET tbalance = tbalance + :delta WHERE tid = :tid;',
  'UPDATE pgbench_branches SET bbalance = bbalance + :delta WHERE bid = :bid;',
  'INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (:tid, :bid, :aid, :delta, CURRENT_TIMESTAMP);',
  'END;',
  '',
].join('\n');

/** TPC-B-like transactions (pgbench's tables at scale 10): bound by commits, little for the knobs
 * to win. */
const TPCB_LIKE: Workload = {
  name: 'tpcb-like',
  description: "TPC-B-like transactions on pgbench's tables at scale 10: bound by commits, so tuning wins little",
  setup: (cluster) => pgbenchTables(cluster, TPCB_SCALE),
  variables: { scale: TPCB_SCALE },
  script: TPCB_SCRIPT,
  clients: 4,
  mode: 'reload-only',
  writes: true,
};

/** Scale 100 (10 M accounts, about 1.5 GB with indexes): an update seldom finds its page already
 * written since the last checkpoint, so most write a full-page image. At scale 10 (16,000 account
 * pages, soon all written after each checkpoint) the WAL came to 521 MB per 5 minutes: no
 * checkpoint was ever requested. */
const WRITE_SCALE = 100;

/**
 * The same transactions from 16 clients over 10 M accounts: every commit waits for its own WAL
 * flush, and full-page images make WAL come fast enough (about 14 MB/s here) that max_wal_size
 * (1 GB) requests a checkpoint every 30-60 s, each followed by more full-page images. Shown by
 * pg_stat_bgwriter.checkpoints_req and pg_stat_wal.wal_fpi; max_wal_size, checkpoint_timeout and
 * commit_delay/commit_siblings (group commit, durability unchanged) are the knobs.
 */
const WRITE_HEAVY: Workload = {
  name: 'write-heavy',
  description:
    'TPC-B-like transactions over 10 M accounts from 16 clients: commit flushes and checkpoints forced by WAL volume, with full-page images after each',
  setup: (cluster) => pgbenchTables(cluster, WRITE_SCALE),
  variables: { scale: WRITE_SCALE },
  script: TPCB_SCRIPT,
  clients: 16,
  mode: 'reload-only',
  writes: true,
};

const READ_SCALE = 40;

/**
 * Point reads spread over pgbench_accounts at scale 40 (about 520 MB): four times the default
 * shared_buffers (128 MB), well within RAM, so most reads miss the buffer cache and are served by
 * the kernel's page cache through a system call and a copy. Shown by the hit ratio of
 * pg_stat_database (blks_hit against blks_read); shared_buffers, in restart mode, is the knob.
 */
const READ_HEAVY: Workload = {
  name: 'read-heavy',
  description: 'point reads over a table four times the default shared_buffers, within RAM: shared_buffers (a restart) is the gain',
  setup: (cluster) => pgbenchTables(cluster, READ_SCALE),
  variables: { scale: READ_SCALE },
  script: ['\\set aid random(1, 100000 * :scale)', 'SELECT abalance FROM pgbench_accounts WHERE aid = :aid;', ''].join('\n'),
  clients: 4,
  mode: 'restart',
};

/** The report's 40 computed columns: each a little arithmetic on the account's row. */
const REPORT_COLUMNS = Array.from(
  { length: 40 },
  (_, i) => `round(a.balance * ${1 + i / 100} + a.rate * ${i} - CASE WHEN a.tier = ${i % 3} THEN a.age_days ELSE 0 END, 2) AS e${i}`,
).join(', ');

/**
 * An account report as ORMs write them: 40 computed columns and two correlated subqueries over
 * the account's transactions, for one segment (10,000 accounts). The planner prices each of the
 * 20,000 index lookups as random disk reads (random_page_cost 4), so the plan costs about 925,000,
 * above jit_inline_above_cost and jit_optimize_above_cost (500,000), and each call inlines and
 * optimizes its expressions with LLVM: 0.4-1.3 s of compilation for a query that runs in about
 * 0.4 s without it, the data being in memory. Shown by the jit_*_time columns of
 * pg_stat_statements; `jit` off, a jit_above_cost above the plan's cost, or a random_page_cost that
 * prices the lookups as the memory reads they are, is the gain.
 */
const JIT: Workload = {
  name: 'jit',
  description:
    'an account report (40 computed columns, 2 correlated subqueries) whose plan cost makes JIT inline and optimize, costing more than the query',
  async setup(cluster) {
    await cluster.sql(
      `CREATE TABLE lab_accounts AS SELECT g AS id, g % 20 AS segment, 'account ' || g AS name, (g % 10000) / 7.0 AS balance, (g % 97) / 100.0 AS rate, g % 365 AS age_days, g % 3 AS tier FROM generate_series(1, 200000) g`,
    );
    await cluster.sql('ALTER TABLE lab_accounts ADD PRIMARY KEY (id)');
    await cluster.sql('CREATE INDEX ON lab_accounts (segment)');
    // Transactions in no order of account, as they arrive: each lookup reads scattered pages.
    await cluster.sql(
      `CREATE TABLE lab_transactions AS SELECT g AS id, 1 + (g::bigint * 7919) % 200000 AS account, (g % 5000) / 10.0 AS amount, now() - (g % 1000) * interval '1 hour' AS at FROM generate_series(1, 2000000) g`,
    );
    await cluster.sql('CREATE INDEX ON lab_transactions (account)');
    await cluster.sql('VACUUM ANALYZE');
  },
  script: [
    '\\set segment random(0, 19)',
    `SELECT a.id, a.name, ${REPORT_COLUMNS}, (SELECT sum(t.amount) FROM lab_transactions t WHERE t.account = a.id) AS total, (SELECT max(t.at) FROM lab_transactions t WHERE t.account = a.id) AS latest FROM lab_accounts a WHERE a.segment = :segment;`,
    '',
  ].join('\n'),
  clients: 2,
  mode: 'reload-only',
};

/** 20,000 customers in 100 regions, and 3 M orders (150 MB, a little more than the default
 * shared_buffers) in no order of customer, as they arrive: each customer's 150 lie on scattered
 * pages. index-join and trade-off read them. */
async function customersAndOrders(cluster: Cluster): Promise<void> {
  await cluster.sql(
    `CREATE TABLE lab_customers AS SELECT g AS id, g % 100 AS region, 'customer ' || g AS name FROM generate_series(1, 20000) g`,
  );
  await cluster.sql('ALTER TABLE lab_customers ADD PRIMARY KEY (id)');
  await cluster.sql('CREATE INDEX ON lab_customers (region)');
  await cluster.sql(
    `CREATE TABLE lab_orders AS SELECT g AS id, 1 + (g::bigint * 7919) % 20000 AS customer, (g % 5000) / 10.0 AS amount FROM generate_series(1, 3000000) g`,
  );
  await cluster.sql('CREATE INDEX ON lab_orders (customer)');
  await cluster.sql('VACUUM ANALYZE');
}

/** One region's customers joined to their orders (index-join's report, trade-off's gain). */
const REGION_REPORT =
  'SELECT c.region, count(*), sum(o.amount) FROM lab_customers c JOIN lab_orders o ON o.customer = c.id WHERE c.region = :region GROUP BY c.region';

/**
 * A report that joins one region's 200 customers to their orders, 30,000 rows among 3 M (150 MB,
 * in memory). At random_page_cost 4 the planner prices each of the 30,000 index lookups as a
 * random disk read, so it scans every order and hashes (in parallel where it may): a few hundred
 * milliseconds for what a nested loop of index lookups does in tens. From a random_page_cost
 * of about 2 (3 without parallel workers) the plan is the nested loop: pgtune's 1.1 for SSDs, as
 * on any machine whose data is cached. Shown by the statement's shared_blks_hit against the rows
 * it returns, and by its plan.
 */
const INDEX_JOIN: Workload = {
  name: 'index-join',
  description:
    "a report joining 200 customers to 30,000 of 3 M orders: at random_page_cost 4 the planner scans every order rather than look the customers' up",
  setup: customersAndOrders,
  script: ['\\set region random(0, 99)', `${REGION_REPORT};`, ''].join('\n'),
  clients: 2,
  mode: 'reload-only',
};

/** Customers a range report covers (×150 orders). */
const RANGE_CUSTOMERS = 1000;
/** Region reports a transaction. */
const REGION_REPORTS = 5;

/**
 * A built-in trade-off (issue #30: no hidden regressions): one setting, pgtune's random_page_cost
 * 1.1 for SSDs, makes one statement much faster and another, carrying a seventh of the time,
 * slower. Five of index-join's region reports a transaction, which 1.1 makes a nested loop of
 * index lookups, and one report per customer over a range of 1,000 customers (150,000 orders,
 * about 7 on each page they lie on), which the same setting makes slower: at 4 the planner reads
 * the range's pages once in a bitmap heap scan and hashes the groups (sorting the 1,000 after); at
 * 1.1 it walks the index on customer and groups as it goes, a heap fetch per order on scattered
 * pages of a table larger than shared_buffers, about half of them read from the page cache.
 * Measured on a throwaway cluster (PostgreSQL 15, 2 vCPUs shared with other work, load 10-15),
 * pgtune's planner settings (random_page_cost 1.1, effective_cache_size 17 GB, work_mem 30 MB)
 * against the defaults:
 * - one call at a time (EXPLAIN ANALYZE, TIMING OFF, 3 rounds): the range report 339-413 ms
 *   → 1,168-1,657 ms (×2.9-4.9 round by round), the region report 457-495 ms → 138-195 ms;
 * - under this load (pgbench, 2 clients, 10 s windows, 4 interleaved rounds): the range report
 *   360-488 ms → 1,024-1,344 ms a call (×2.6-3.1 round by round), 13-15 % of the defaults'
 *   time; the region report 547-627 ms → 190-277 ms (×0.35-0.44); a transaction 0.71 of the
 *   defaults' time.
 * The range is wide enough that its plan flips well inside 1.1 (at 250 customers it stays a
 * bitmap heap scan; at 500 it flips, ×2 slower), and narrow enough that the mix still gains.
 */
const TRADE_OFF: Workload = {
  name: 'trade-off',
  description:
    "index-join's report, faster at random_page_cost 1.1, beside a per-customer report over 150,000 orders that the same setting makes 2-3 times slower: the tuner must name the regression",
  setup: customersAndOrders,
  script: [
    ...Array.from({ length: REGION_REPORTS }, (_, i) => `\\set r${i} random(0, 99)`),
    `\\set first random(1, ${20_000 - RANGE_CUSTOMERS + 1})`,
    ...Array.from({ length: REGION_REPORTS }, (_, i) => `${REGION_REPORT.replace(':region', `:r${i}`)};`),
    `SELECT customer, count(*), max(amount) FROM lab_orders WHERE customer BETWEEN :first AND :first + ${RANGE_CUSTOMERS - 1} GROUP BY customer ORDER BY customer;`,
    '',
  ].join('\n'),
  clients: 2,
  mode: 'reload-only',
};

const TPCC_WAREHOUSES = 4;

/**
 * A TPC-C-like mix (src/lab/tpcc.ts) at 4 warehouses (about 400 MB) from 8 clients, as HammerDB's
 * TPROC-C runs it: short read-write transactions in stored procedures over a working set three
 * times the default shared_buffers, with commits to flush. Shown by the hit ratio and the WAL
 * statistics; shared_buffers (a restart) and the checkpoint settings are the knobs.
 */
const TPCC_LIKE: Workload = {
  name: 'tpcc-like',
  description:
    'a TPC-C-like mix (new-order, payment, order-status, delivery, stock-level) at 4 warehouses from 8 clients, as HammerDB runs it',
  setup: (cluster) => tpccSetup(cluster, TPCC_WAREHOUSES),
  variables: { warehouses: TPCC_WAREHOUSES },
  script: TPCC_SCRIPT,
  clients: 8,
  mode: 'restart',
  writes: true,
};

export const WORKLOADS = {
  'select-1': SELECT_1,
  'work-mem': WORK_MEM,
  'tpcb-like': TPCB_LIKE,
  'write-heavy': WRITE_HEAVY,
  'read-heavy': READ_HEAVY,
  jit: JIT,
  'tpcc-like': TPCC_LIKE,
  'index-join': INDEX_JOIN,
  'trade-off': TRADE_OFF,
} as const satisfies Record<string, Workload>;
export type WorkloadName = keyof typeof WORKLOADS;

export function workloadByName(name: string): Workload {
  const workload = (WORKLOADS as Record<string, Workload>)[name];
  if (!workload) throw new Error(`unknown workload ${name}: expected one of ${Object.keys(WORKLOADS).join(', ')}`);
  return workload;
}

export interface RunningLoad {
  /** What generates the load: pgbench, or the built-in driver on a machine without it. */
  readonly generator: 'pgbench' | 'built-in driver';
  /** Stops the load and waits for it to end. */
  stop(): Promise<void>;
}

export interface LoadOptions {
  /** pgbench writes the script here. */
  dir: string;
  clients: number;
  /** How long pgbench runs (a long time by default); the load also ends at stop(). */
  seconds?: number;
  /** Transactions per second over all clients (open loop); closed-loop without it. */
  rate?: number;
}

/** Runs the workload with `clients` clients until stopped: under pgbench when there is one. */
export async function startLoad(cluster: Cluster, workload: Workload, options: LoadOptions): Promise<RunningLoad> {
  const pgbench = findPgbench(cluster);
  if (pgbench === undefined) {
    const driver = await startDriver(workload.script, {
      connectionString: cluster.adminUrl,
      clients: options.clients,
      rate: options.rate,
      variables: workload.variables,
    });
    return { generator: 'built-in driver', stop: () => driver.stop() };
  }
  const script = join(options.dir, `${workload.name}.sql`);
  writeFileSync(script, workload.script);
  const args = [
    '-n',
    '-f',
    script,
    ...Object.entries(workload.variables ?? {}).flatMap(([name, value]) => ['-D', `${name}=${value}`]),
    ...(options.rate === undefined ? [] : ['--rate', String(options.rate)]),
    '-T',
    String(options.seconds ?? 86_400),
    '-c',
    String(options.clients),
    '-j',
    String(Math.min(options.clients, 2)),
  ];
  const child = spawn(pgbench, [...args, '-h', cluster.host, '-p', String(cluster.port), '-U', 'postgres', 'postgres'], {
    stdio: 'ignore',
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return {
    generator: 'pgbench',
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

// Throughput that does not lag (issue 31 part 5): the agent's statements/s, from pg_stat_statements
// calls between two snapshots, must agree with pgbench's own count of what it ran in the same
// run: a `SELECT 1` workload on a few clients for ten seconds, on a real throwaway cluster. No
// speed is asserted, only the agreement of two figures measured together.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { after, before, test } from 'node:test';
import { connectDb, type Db } from '../src/agent/database/db.ts';
import { buildMetricsReport, createCollector, diffSnapshots } from '../src/agent/collect/index.ts';
import { startCluster, type Cluster } from '../src/lab/cluster.ts';
import { statementsPerSecond } from '../src/measure/throughput.ts';
import { MetricsReportSchema } from '../src/protocol/report.ts';

const run = promisify(execFile);
const SECONDS = 10;
const CLIENTS = 4;
/** The script's statements per pgbench transaction. */
const STATEMENTS_PER_TRANSACTION = 1;

let cluster: Cluster;
let db: Db;
let dir: string;

before(async () => {
  cluster = await startCluster();
  db = await connectDb(cluster.agentUrl);
  dir = await mkdtemp(join(tmpdir(), 'tuner-select1-'));
});
after(async () => {
  await db?.close();
  await cluster?.destroy();
  if (dir) await rm(dir, { recursive: true, force: true });
});

/** pgbench's own figures from its summary. */
function pgbenchFigures(stdout: string): { transactions: number; tps: number } {
  const transactions = /number of transactions actually processed: (\d+)/.exec(stdout)?.[1];
  // "tps = 12345.678901 (without initial connection time)"; older pgbench prints "excluding".
  const tps = /tps = ([\d.]+) \((?:without|excluding)/.exec(stdout)?.[1];
  assert.ok(transactions && tps, `pgbench printed its summary:\n${stdout}`);
  return { transactions: Number(transactions), tps: Number(tps) };
}

test('SELECT 1 on a few clients: statements/s from pg_stat_statements within 10 % of pgbench tps × statements per transaction', async (t) => {
  const pgbench = join(cluster.binDir, 'pgbench');
  if (!existsSync(pgbench)) return t.skip(`no pgbench beside the server binaries (${cluster.binDir})`);
  const script = join(dir, 'select1.sql');
  await writeFile(script, 'SELECT 1;\n');
  const collector = createCollector(db, { includeQueries: true });

  const s1 = await collector.collect();
  const { stdout } = await run(pgbench, ['-n', '-f', script, '-c', String(CLIENTS), '-j', '2', '-T', String(SECONDS), cluster.adminUrl], {
    maxBuffer: 1 << 20,
  });
  const s2 = await collector.collect();

  const report = MetricsReportSchema.parse(JSON.parse(JSON.stringify(buildMetricsReport(diffSnapshots(s1, s2), { includeQueries: true }))));
  const ours = statementsPerSecond(report);
  assert.equal(report.derived.statementsPerSecond, ours, 'the agent sends the figure itself');
  const theirs = pgbenchFigures(stdout);
  const expected = theirs.tps * STATEMENTS_PER_TRANSACTION;
  t.diagnostic(
    `statements/s (pg_stat_statements) ${ours.toFixed(1)}; pgbench tps ${theirs.tps.toFixed(1)} × ${STATEMENTS_PER_TRANSACTION}; ` +
      `${report.derived.calls} top-level calls against pgbench's ${theirs.transactions} transactions; commits/s (pg_stat_database) ${report.derived.tps.toFixed(1)}`,
  );
  assert.ok(expected > 0, 'pgbench ran transactions');
  assert.ok(
    Math.abs(ours - expected) <= 0.1 * expected,
    `statements/s ${ours.toFixed(1)} is within 10 % of pgbench's ${expected.toFixed(1)} (${((100 * (ours - expected)) / expected).toFixed(1)} %)`,
  );
  // The count itself: every statement pgbench ran, and few others (its own connection set-up).
  assert.ok(report.derived.calls >= theirs.transactions * STATEMENTS_PER_TRANSACTION);
});

// Cost of one collection cycle at 5,000 distinct statements: database time (measured by the
// server: pg_stat_statements' own entries for the agent's statements), wall time, agent CPU, and
// the size of the report. Run: npx node bench/collect.ts
// Goals: ≤ 20 ms database time per steady-state cycle, ≤ 30 KB gzip per report.
// The redaction of statement texts (src/postgres/statement-redaction.ts) runs in the report
// builder, inside the agent CPU above; its own share is measured apart at the end, against its
// budget: ≤ 5 % of the agent's CPU per steady cycle.
import { gzipSync } from 'node:zlib';
import pg from 'pg';
import { AGENT_QUERY_MARKER, connectDb } from '../src/agent/database/db.ts';
import { buildMetricsReport, createCollector, diffSnapshots, type Snapshot, type SnapshotDelta } from '../src/agent/collect/index.ts';
import type { MetricsReport } from '../src/protocol/report.ts';
import { startCluster } from '../src/lab/cluster.ts';
import { redactStatementText } from '../src/postgres/statement-redaction.ts';

const TABLES = 100;
const LIST_LENGTHS = 50; // 100 tables × IN-lists of 1..50 values = 5,000 distinct queryids
const STEADY_CYCLES = 5;
const WORKLOAD_PER_INTERVAL = 2_000;
const GOAL_DB_MS = 20;
const GOAL_GZIP_KB = 30;
const GOAL_REDACTION_SHARE = 0.05;
const REDACTION_ROUNDS = 5;

function statement(table: number, length: number): string {
  return `SELECT count(*) FROM bench_t${table} WHERE id IN (${Array.from({ length }, (_, i) => i + 1).join(',')})`;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? Number.NaN;
};
const f = (x: number, digits = 1) => x.toFixed(digits);

const cluster = await startCluster({
  extraConf: ['pg_stat_statements.max = 10000', 'pg_stat_statements.track_planning = on'],
});
const admin = new pg.Client({ connectionString: cluster.adminUrl, application_name: 'bench-admin' });
try {
  await admin.connect();
  console.log(`setup: ${TABLES} tables, ${TABLES * LIST_LENGTHS} distinct statements`);
  for (let t = 1; t <= TABLES; t++) {
    await admin.query(`CREATE TABLE bench_t${t} (id int PRIMARY KEY, v int)`);
    await admin.query(`INSERT INTO bench_t${t} SELECT g, g FROM generate_series(1, 100) g`);
  }
  const all: string[] = [];
  for (let t = 1; t <= TABLES; t++) for (let n = 1; n <= LIST_LENGTHS; n++) all.push(statement(t, n));
  const runAll = async (statements: readonly string[]) => {
    for (const s of statements) await admin.query(s);
  };
  await runAll(all);

  /** Σ server time (planning + execution) of the agent's statements so far. */
  const agentDbTimeMs = async (): Promise<number> => {
    const r = await admin.query<{ ms: number }>(
      `SELECT COALESCE(sum(total_exec_time + total_plan_time), 0)::float8 AS ms
         FROM pg_stat_statements WHERE starts_with(query, $1)`,
      [AGENT_QUERY_MARKER],
    );
    return r.rows[0]?.ms ?? 0;
  };

  const db = await connectDb(cluster.agentUrl);
  const collector = createCollector(db, { includeQueries: true });
  interface Cycle {
    snapshot: Snapshot;
    dbMs: number;
    wallMs: number;
    cpuMs: number;
  }
  const cycle = async (
    prev: Snapshot | undefined,
  ): Promise<Cycle & { rawKB: number; gzipKB: number; gzipNoTextKB: number; top: number; other: number }> => {
    const dbBefore = await agentDbTimeMs();
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    const snapshot = await collector.collect();
    let sizes = { rawKB: 0, gzipKB: 0, gzipNoTextKB: 0, top: 0, other: 0 };
    let json = '';
    let report: MetricsReport | undefined;
    let delta: SnapshotDelta | undefined;
    if (prev) {
      delta = diffSnapshots(prev, snapshot);
      report = buildMetricsReport(delta, { includeQueries: true });
      json = JSON.stringify(report);
    }
    // Measuring the report's size is the bench's work, not the agent's: outside the timings.
    const wallMs = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    if (delta && report) {
      const noText = JSON.stringify(buildMetricsReport(delta, { includeQueries: false }));
      sizes = {
        rawKB: Buffer.byteLength(json) / 1024,
        gzipKB: gzipSync(json).length / 1024,
        gzipNoTextKB: gzipSync(noText).length / 1024,
        top: report.statements.top.length,
        other: report.statements.other.statements,
      };
    }
    const dbMs = (await agentDbTimeMs()) - dbBefore;
    return { snapshot, dbMs, wallMs, cpuMs: (cpu.user + cpu.system) / 1000, ...sizes };
  };

  const first = await cycle(undefined);
  console.log(
    `first cycle (texts of ${first.snapshot.statements.textsFetched} entries fetched): ` +
      `db ${f(first.dbMs)} ms, wall ${f(first.wallMs)} ms, agent CPU ${f(first.cpuMs)} ms, ${first.snapshot.cost.queries} queries, ` +
      `${first.snapshot.statements.entries.size} statements`,
  );
  // The agent's own first-round statements are new in the second cycle: warm up once more.
  let prev = (await cycle(first.snapshot)).snapshot;

  const steady: Awaited<ReturnType<typeof cycle>>[] = [];
  for (let i = 0; i < STEADY_CYCLES; i++) {
    // A workload between cycles, so that thousands of statements have non-zero deltas.
    const picks = Array.from({ length: WORKLOAD_PER_INTERVAL }, (_, k) => all[(k * 7919 + i * 104729) % all.length]!);
    await runAll(picks);
    const c = await cycle(prev);
    steady.push(c);
    prev = c.snapshot;
  }
  const last = steady.at(-1)!;
  const dbMs = median(steady.map((c) => c.dbMs));
  const gzipKB = Math.max(...steady.map((c) => c.gzipKB));
  console.log(
    `steady cycle (median of ${STEADY_CYCLES}; texts fetched: ${steady.map((c) => c.snapshot.statements.textsFetched).join('/')}; ` +
      `${last.snapshot.cost.queries} queries): db ${f(dbMs, 2)} ms, wall ${f(median(steady.map((c) => c.wallMs)), 2)} ms, ` +
      `agent CPU ${f(median(steady.map((c) => c.cpuMs)), 2)} ms`,
  );
  console.log(
    `report (${last.top} top rows + other row of ${last.other} statements): raw ${f(last.rawKB)} KB, ` +
      `gzip ${f(last.gzipKB)} KB with texts, ${f(last.gzipNoTextKB)} KB without`,
  );
  console.log(`db time / goal:   ${f(dbMs, 2)} / ${GOAL_DB_MS} ms = ${f(dbMs / GOAL_DB_MS, 2)}`);
  console.log(`gzip size / goal: ${f(gzipKB)} / ${GOAL_GZIP_KB} KB = ${f(gzipKB / GOAL_GZIP_KB, 2)}`);

  /** Median CPU time to redact `texts` once, in ms (CPU, not wall: the machine may be shared). */
  const redactionMs = (texts: readonly string[]) =>
    median(
      Array.from({ length: REDACTION_ROUNDS }, () => {
        const cpu0 = process.cpuUsage();
        for (const text of texts) redactStatementText(text);
        const cpu = process.cpuUsage(cpu0);
        return (cpu.user + cpu.system) / 1000;
      }),
    );
  const snapshotTexts = [...last.snapshot.statements.entries.values()].flatMap((e) => e.text ?? []);
  const topTexts = snapshotTexts.slice(0, last.top); // a report's worth of texts, as read
  // The same statements as typed (literals in place), and utility statements full of string literals.
  const typed = all.slice(0, topTexts.length);
  const utility = topTexts.map((_, i) => `ALTER ROLE r${i} PASSWORD 'pw-${i}' VALID UNTIL '2030-01-01' ${'/* note */ '.repeat(20)}`);
  const perCycleMs = redactionMs(topTexts);
  const agentCpuMs = median(steady.map((c) => c.cpuMs));
  console.log(
    `redaction of statement texts (median of ${REDACTION_ROUNDS}): a report's ${topTexts.length} texts ${f(perCycleMs, 3)} ms per cycle; ` +
      `all ${snapshotTexts.length} texts ${f(redactionMs(snapshotTexts), 2)} ms; ${typed.length} texts as typed ${f(redactionMs(typed), 3)} ms; ` +
      `${utility.length} utility texts with literals ${f(redactionMs(utility), 3)} ms`,
  );
  console.log(
    `redaction / agent CPU per steady cycle: ${f(perCycleMs, 3)} / ${f(agentCpuMs, 2)} ms = ${f((100 * perCycleMs) / agentCpuMs, 2)} % ` +
      `(budget ${100 * GOAL_REDACTION_SHARE} %)`,
  );
  const breakdown = await admin.query<{ query: string; calls: string; mean: number }>(
    `SELECT left(query, 70) AS query, calls::text, (total_exec_time + total_plan_time) / calls AS mean
       FROM pg_stat_statements WHERE starts_with(query, $1) ORDER BY 3 DESC LIMIT 8`,
    [AGENT_QUERY_MARKER],
  );
  console.log('agent statements by mean server time (all cycles):');
  for (const r of breakdown.rows) console.log(`  ${f(r.mean, 3).padStart(8)} ms × ${r.calls.padStart(3)}  ${r.query.replace(/\s+/g, ' ')}`);
  await db.close();
} finally {
  await admin.end().catch(() => undefined);
  await cluster.destroy();
}

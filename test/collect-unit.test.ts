// Collection logic without a server: SQL built from column lists of every pg_stat_statements
// version, deltas across resets and evictions, top N + other, derived metrics, the schema.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { buildStatementCountersSql, buildStatementTextsSql, type PgssShape } from '../src/agent/collect/columns.ts';
import { diffSnapshots } from '../src/agent/collect/delta.ts';
import { baselineMixFrom } from '../src/agent/collect/derive.ts';
import { toCount, toCountOrNull, toIsoOrNull, RowParseError } from '../src/agent/collect/parse.ts';
import { buildMetricsReport } from '../src/agent/collect/report-builder.ts';
import { statementKey } from '../src/protocol/statement.ts';
import { buildCheckpointerSql, buildWalSql, activityFromRows } from '../src/agent/collect/stats.ts';
import type {
  CheckpointerSnapshot,
  DatabaseEntry,
  Snapshot,
  SnapshotDelta,
  StatementDelta,
  StatementEntry,
} from '../src/agent/collect/types.ts';
import { MetricsReportSchema, REPORT_LIMITS, type MetricsReport } from '../src/protocol/report.ts';

// Column lists as the extension scripts define them (contrib/pg_stat_statements/*.sql).
const PGSS_1_7 =
  'userid dbid queryid query calls total_time min_time max_time mean_time stddev_time rows shared_blks_hit shared_blks_read shared_blks_dirtied shared_blks_written local_blks_hit local_blks_read local_blks_dirtied local_blks_written temp_blks_read temp_blks_written blk_read_time blk_write_time';
const PGSS_1_11 =
  'userid dbid toplevel queryid query plans total_plan_time min_plan_time max_plan_time mean_plan_time stddev_plan_time calls total_exec_time min_exec_time max_exec_time mean_exec_time stddev_exec_time rows shared_blks_hit shared_blks_read shared_blks_dirtied shared_blks_written local_blks_hit local_blks_read local_blks_dirtied local_blks_written temp_blks_read temp_blks_written shared_blk_read_time shared_blk_write_time local_blk_read_time local_blk_write_time temp_blk_read_time temp_blk_write_time wal_records wal_fpi wal_bytes jit_functions jit_generation_time jit_inlining_count jit_inlining_time jit_optimization_count jit_optimization_time jit_emission_count jit_emission_time jit_deform_count jit_deform_time stats_since minmax_stats_since';
const BGWRITER_16 =
  'checkpoints_timed checkpoints_req checkpoint_write_time checkpoint_sync_time buffers_checkpoint buffers_clean maxwritten_clean buffers_backend buffers_backend_fsync buffers_alloc stats_reset';
const BGWRITER_17 = 'buffers_clean maxwritten_clean buffers_alloc stats_reset';
const CHECKPOINTER_17 =
  'num_timed num_requested restartpoints_timed restartpoints_req restartpoints_done write_time sync_time buffers_written stats_reset';
const WAL_18 = 'wal_records wal_fpi wal_bytes wal_buffers_full stats_reset';

const cols = (list: string) => new Set(list.split(' '));
const shape = (list: string, version: string): PgssShape => ({ version, schema: 'public', columns: cols(list), hasInfo: true });
/** The output expressions of a SELECT list, for exact comparisons. */
const selectList = (sql: string) =>
  sql
    .replace(/^SELECT\s+/, '')
    .split(/\s+FROM\s+/)[0]!
    .split(',')
    .map((s) => s.trim());

describe('SQL built from column lists', () => {
  test('1.11: renamed block times, stats_since, toplevel, planning', () => {
    const list = selectList(buildStatementCountersSql(shape(PGSS_1_11, '1.11')));
    assert.ok(list.includes('shared_blk_read_time AS blk_read_time'));
    assert.ok(list.includes('shared_blk_write_time AS blk_write_time'));
    assert.ok(list.includes('stats_since'));
    assert.ok(list.includes('toplevel'));
    assert.ok(list.includes('plans'));
    assert.ok(list.includes('total_exec_time'));
    assert.ok(list.includes('wal_bytes'));
    assert.ok(!list.some((c) => /^blk_read_time/.test(c)), 'the pre-1.11 name must not be selected');
    assert.match(buildStatementCountersSql(shape(PGSS_1_11, '1.11')), /pg_stat_statements\(false\)/);
  });

  test('1.7: total_time for total_exec_time, typed NULLs for what it lacks', () => {
    const list = selectList(buildStatementCountersSql(shape(PGSS_1_7, '1.7')));
    assert.ok(list.includes('total_time AS total_exec_time'));
    assert.ok(list.includes('NULL::bigint AS plans'));
    assert.ok(list.includes('NULL::boolean AS toplevel'));
    assert.ok(list.includes('NULL::numeric AS wal_bytes'));
    assert.ok(list.includes('NULL::timestamptz AS stats_since'));
    assert.ok(list.includes('blk_read_time'));
  });

  test('a missing required column is an error that names it', () => {
    const broken = shape(PGSS_1_11.replace(' calls ', ' '), '1.11');
    assert.throws(() => buildStatementCountersSql(broken), /calls/);
  });

  test('texts query: text only when asked for, own-ness decided in the server', () => {
    const withText = buildStatementTextsSql(shape(PGSS_1_11, '1.11'), true);
    const without = buildStatementTextsSql(shape(PGSS_1_11, '1.11'), false);
    assert.match(withText, /pg_stat_statements\(true\)/);
    assert.match(withText, /left\(query, \$3\)/);
    assert.doesNotMatch(without, /\$3/);
    assert.doesNotMatch(without, /AS text/);
    assert.match(without, /AS own/);
  });

  test('checkpointer: pg_stat_bgwriter up to 16, pg_stat_checkpointer from 17', () => {
    const v16 = buildCheckpointerSql({ name: 'pg_catalog.pg_stat_bgwriter', columns: cols(BGWRITER_16) }, null);
    assert.ok(selectList(v16).includes('b.checkpoints_timed AS checkpoints_timed'));
    assert.ok(selectList(v16).includes('b.buffers_backend AS buffers_backend'));
    assert.doesNotMatch(v16, /pg_stat_checkpointer/);
    const v17 = buildCheckpointerSql(
      { name: 'pg_catalog.pg_stat_bgwriter', columns: cols(BGWRITER_17) },
      { name: 'pg_catalog.pg_stat_checkpointer', columns: cols(CHECKPOINTER_17) },
    );
    const list = selectList(v17);
    assert.ok(list.includes('c.num_timed AS checkpoints_timed'));
    assert.ok(list.includes('c.num_requested AS checkpoints_req'));
    assert.ok(list.includes('c.buffers_written AS buffers_checkpoint'));
    assert.ok(list.includes('NULL::bigint AS buffers_backend'));
    assert.ok(list.includes('b.buffers_alloc AS buffers_alloc'));
    assert.match(v17, /pg_stat_checkpointer c CROSS JOIN pg_catalog.pg_stat_bgwriter b/);
  });

  test('pg_stat_wal of 18 lacks write/sync: NULLs', () => {
    const list = selectList(buildWalSql({ name: 'pg_catalog.pg_stat_wal', columns: cols(WAL_18) }));
    assert.ok(list.includes('NULL::bigint AS wal_write'));
    assert.ok(list.includes('NULL::float8 AS wal_sync_time'));
    assert.ok(list.includes('wal_bytes'));
  });
});

describe('parsing values from pg', () => {
  test('int8 and numeric arrive as strings', () => {
    assert.equal(toCount('123', 'x'), 123);
    assert.equal(toCount(4.5, 'x'), 4.5);
    assert.equal(toCount('9007199254740993', 'x'), 9007199254740992); // beyond 2^53: nearest double
    assert.equal(toCountOrNull(null, 'x'), null);
  });
  test('garbage and negative counters throw and name the field', () => {
    assert.throws(
      () => toCount('abc', 'calls'),
      (e: unknown) => e instanceof RowParseError && /calls/.test(e.message),
    );
    assert.throws(() => toCount('', 'calls'), RowParseError);
    assert.throws(() => toCount('-1', 'calls'), RowParseError);
    assert.throws(() => toCount(undefined, 'calls'), RowParseError);
    assert.throws(() => toCount(Number.NaN, 'calls'), RowParseError);
  });
  test('timestamps become ISO strings', () => {
    assert.equal(toIsoOrNull(new Date('2024-05-06T07:08:09.123Z'), 't'), '2024-05-06T07:08:09.123Z');
    assert.equal(toIsoOrNull(null, 't'), null);
    assert.throws(() => toIsoOrNull('not a time', 't'), RowParseError);
  });
});

// ---- synthetic snapshots ----

interface EntrySpec {
  q: string;
  calls: number;
  time: number;
  rows?: number;
  toplevel?: boolean | null;
  since?: string | null;
  text?: string;
}

function entry(spec: EntrySpec): StatementEntry {
  const toplevel = spec.toplevel === undefined ? true : spec.toplevel;
  const e: StatementEntry = {
    key: statementKey({ userId: 10, dbId: 5, queryId: spec.q, toplevel }),
    queryId: spec.q,
    userId: 10,
    dbId: 5,
    toplevel,
    calls: spec.calls,
    plans: 0,
    totalPlanTimeMs: 0,
    totalExecTimeMs: spec.time,
    rows: spec.rows ?? spec.calls,
    sharedBlksHit: spec.calls * 3,
    sharedBlksRead: spec.calls,
    sharedBlksDirtied: 0,
    sharedBlksWritten: 0,
    tempBlksRead: 0,
    tempBlksWritten: 0,
    blkReadTimeMs: 0,
    blkWriteTimeMs: 0,
    walBytes: 0,
    jitTimeMs: 0,
    statsSince: spec.since ?? null,
  };
  if (spec.text !== undefined) e.text = spec.text;
  return e;
}

function database(
  datid: number,
  datname: string,
  commits: number,
  rollbacks: number,
  hit: number,
  read: number,
  statsReset: string | null = null,
): DatabaseEntry {
  return {
    datid,
    datname,
    xactCommit: commits,
    xactRollback: rollbacks,
    blksHit: hit,
    blksRead: read,
    tempFiles: 0,
    tempBytes: 0,
    deadlocks: 0,
    statsReset,
  };
}

interface SnapSpec {
  atMs: number;
  entries: EntrySpec[];
  info?: { dealloc: number; statsReset: string | null } | null;
  databases?: DatabaseEntry[];
  checkpointer?: CheckpointerSnapshot | null;
}

function snap(spec: SnapSpec): Snapshot {
  return {
    takenAt: new Date(spec.atMs).toISOString(),
    takenAtMs: spec.atMs,
    postmasterStartTime: '2024-01-01T00:00:00.000Z',
    serverVersionNum: 150000,
    statements: {
      pgssVersion: '1.10',
      entries: new Map(spec.entries.map((s) => [entry(s).key, entry(s)])),
      info: spec.info === undefined ? { dealloc: 0, statsReset: '2024-01-01T00:00:00.000Z' } : spec.info,
      textsFetched: 0,
    },
    databases: new Map((spec.databases ?? [database(5, 'postgres', 0, 0, 0, 0)]).map((d) => [d.datid, d])),
    checkpointer: spec.checkpointer ?? null,
    wal: null,
    activity: {
      maxConnections: 100,
      connections: { total: 0, active: 0, idle: 0, idleInTransaction: 0, idleInTransactionAborted: 0, other: 0 },
      activeNotWaiting: 0,
      waitEvents: [],
    },
    cost: { queries: 0, wallMs: 0 },
  };
}

const T0 = Date.parse('2024-06-01T12:00:00Z');
const byQ = (d: SnapshotDelta, q: string) => d.statements.find((s) => s.queryId === q);

function assertNoNegative(delta: SnapshotDelta): void {
  for (const s of delta.statements) {
    for (const [k, v] of Object.entries(s)) if (typeof v === 'number') assert.ok(v >= 0, `${s.queryId}.${k} = ${v}`);
  }
  for (const d of delta.databases)
    for (const [k, v] of Object.entries(d)) if (typeof v === 'number') assert.ok(v >= 0, `${d.datname}.${k}`);
}

describe('deltas', () => {
  test('counter differences per entry; idle entries left out; new entries count whole', () => {
    const prev = snap({
      atMs: T0,
      entries: [
        { q: '1', calls: 10, time: 100 },
        { q: '2', calls: 4, time: 8 },
      ],
    });
    const cur = snap({
      atMs: T0 + 60_000,
      entries: [
        { q: '1', calls: 15, time: 130 },
        { q: '2', calls: 4, time: 8 },
        { q: '3', calls: 2, time: 1 },
      ],
    });
    const d = diffSnapshots(prev, cur);
    assert.equal(d.seconds, 60);
    assert.equal(byQ(d, '1')?.calls, 5);
    assert.equal(byQ(d, '1')?.totalExecTimeMs, 30);
    assert.equal(byQ(d, '1')?.sharedBlksHit, 15);
    assert.equal(byQ(d, '2'), undefined, 'an entry that did not run is not in the delta');
    assert.equal(byQ(d, '3')?.calls, 2);
    assert.deepEqual(d.evictions, { newEntries: 1, reinitializedEntries: 0, evictedEntries: 0, deallocations: 0, statsReset: false });
  });

  test('calls went down: counted from zero (no negative delta)', () => {
    const prev = snap({ atMs: T0, entries: [{ q: '1', calls: 50, time: 500 }] });
    const cur = snap({ atMs: T0 + 1000, entries: [{ q: '1', calls: 7, time: 600 }] });
    const d = diffSnapshots(prev, cur);
    assert.equal(byQ(d, '1')?.calls, 7);
    assert.equal(byQ(d, '1')?.totalExecTimeMs, 600);
    assert.equal(d.evictions.reinitializedEntries, 1);
    assertNoNegative(d);
  });

  test('stats_since changed (1.11): re-created entry counts whole even though calls grew', () => {
    const prev = snap({ atMs: T0, entries: [{ q: '1', calls: 5, time: 50, since: '2024-06-01T11:00:00.000Z' }] });
    const cur = snap({ atMs: T0 + 1000, entries: [{ q: '1', calls: 9, time: 60, since: '2024-06-01T12:00:00.500Z' }] });
    const d = diffSnapshots(prev, cur);
    assert.equal(byQ(d, '1')?.calls, 9);
    assert.equal(d.evictions.reinitializedEntries, 1);
  });

  test('stats_reset changed: every entry from zero, missing ones are not evictions, dealloc restarts', () => {
    const prev = snap({
      atMs: T0,
      entries: [
        { q: '1', calls: 5, time: 50 },
        { q: '2', calls: 3, time: 3 },
      ],
      info: { dealloc: 9, statsReset: '2024-06-01T00:00:00.000Z' },
    });
    const cur = snap({
      atMs: T0 + 1000,
      entries: [{ q: '1', calls: 8, time: 70 }],
      info: { dealloc: 2, statsReset: '2024-06-01T12:00:00.200Z' },
    });
    const d = diffSnapshots(prev, cur);
    assert.equal(byQ(d, '1')?.calls, 8);
    assert.equal(d.evictions.statsReset, true);
    assert.equal(d.evictions.evictedEntries, 0);
    assert.equal(d.evictions.deallocations, 2);
    assertNoNegative(d);
  });

  test('entries gone without a reset are evictions; the dealloc delta is reported', () => {
    const prev = snap({
      atMs: T0,
      entries: [
        { q: '1', calls: 5, time: 5 },
        { q: '2', calls: 1, time: 1 },
        { q: '3', calls: 1, time: 1 },
      ],
      info: { dealloc: 3, statsReset: null },
    });
    const cur = snap({ atMs: T0 + 1000, entries: [{ q: '1', calls: 6, time: 6 }], info: { dealloc: 5, statsReset: null } });
    const d = diffSnapshots(prev, cur);
    assert.equal(d.evictions.evictedEntries, 2);
    assert.equal(d.evictions.deallocations, 2);
  });

  test('before 1.9 (no pg_stat_statements_info) deallocations are unknown', () => {
    const prev = snap({ atMs: T0, entries: [{ q: '1', calls: 1, time: 1 }], info: null });
    const cur = snap({ atMs: T0 + 1000, entries: [{ q: '1', calls: 2, time: 2 }], info: null });
    assert.equal(diffSnapshots(prev, cur).evictions.deallocations, null);
  });

  test('random resets never give a negative delta', () => {
    let seed = 42;
    const rnd = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    for (let round = 0; round < 200; round++) {
      const prevSpecs: EntrySpec[] = [];
      const curSpecs: EntrySpec[] = [];
      for (let i = 0; i < 20; i++) {
        const calls = Math.floor(rnd() * 1000);
        const time = rnd() * 1000;
        prevSpecs.push({ q: String(i), calls, time });
        // Half grow, a quarter restart lower, a quarter vanish.
        const r = rnd();
        if (r < 0.5) curSpecs.push({ q: String(i), calls: calls + Math.floor(rnd() * 10), time: time + rnd() });
        else if (r < 0.75) curSpecs.push({ q: String(i), calls: Math.floor(rnd() * calls), time: rnd() * time });
      }
      assertNoNegative(diffSnapshots(snap({ atMs: T0, entries: prevSpecs }), snap({ atMs: T0 + 1, entries: curSpecs })));
    }
  });

  test('snapshots out of order are refused', () => {
    const a = snap({ atMs: T0, entries: [] });
    assert.throws(() => diffSnapshots(a, a), RangeError);
  });

  test('databases: per-database reset and new databases count from zero', () => {
    const prev = snap({
      atMs: T0,
      entries: [],
      databases: [database(5, 'postgres', 100, 1, 1000, 10), database(6, 'app', 500, 5, 5000, 50, 'r1')],
    });
    const cur = snap({
      atMs: T0 + 10_000,
      entries: [],
      databases: [database(5, 'postgres', 140, 3, 1900, 20), database(6, 'app', 30, 0, 300, 0, 'r2'), database(7, 'new', 10, 0, 100, 0)],
    });
    const d = diffSnapshots(prev, cur);
    const get = (n: string) => d.databases.find((x) => x.datname === n);
    assert.equal(get('postgres')?.xactCommit, 40);
    assert.equal(get('app')?.xactCommit, 30);
    assert.equal(get('new')?.xactCommit, 10);
    assertNoNegative(d);
  });

  test('checkpointer and bgwriter groups restart separately (17+)', () => {
    const cp = (timed: number, clean: number, cpReset: string, bgReset: string): CheckpointerSnapshot => ({
      source: 'pg_stat_checkpointer',
      checkpointer: {
        checkpointsTimed: timed,
        checkpointsRequested: 1,
        writeTimeMs: 10,
        syncTimeMs: 1,
        buffersCheckpoint: 100,
        buffersBackend: null,
        buffersBackendFsync: null,
      },
      checkpointerStatsReset: cpReset,
      bgwriter: { buffersClean: clean, maxwrittenClean: 0, buffersAlloc: 1000 },
      bgwriterStatsReset: bgReset,
    });
    const d = diffSnapshots(
      snap({ atMs: T0, entries: [], checkpointer: cp(10, 500, 'a', 'x') }),
      snap({ atMs: T0 + 1000, entries: [], checkpointer: cp(12, 40, 'a', 'y') }),
    );
    assert.equal(d.checkpointer?.checkpointsTimed, 2);
    assert.equal(d.checkpointer?.buffersClean, 40, 'bgwriter was reset: whole value');
    assert.equal(d.checkpointer?.buffersAlloc, 1000);
    assert.equal(d.checkpointer?.buffersBackend, null);
  });
});

// ---- report ----

function statementDelta(q: string, calls: number, time: number, extra: Partial<StatementDelta> = {}): StatementDelta {
  const { statsSince: _s, ...e } = entry({ q, calls, time });
  return { ...e, ...extra };
}

function deltaOf(statements: StatementDelta[], databases = [{ ...database(5, 'postgres', 90, 10, 900, 100) }]): SnapshotDelta {
  return {
    start: new Date(T0).toISOString(),
    end: new Date(T0 + 20_000).toISOString(),
    seconds: 20,
    serverRestarted: false,
    pgssVersion: '1.10',
    statements,
    evictions: { newEntries: 0, reinitializedEntries: 0, evictedEntries: 0, deallocations: 0, statsReset: false },
    databases: databases.map(({ statsReset: _r, ...d }) => d),
    checkpointer: null,
    wal: null,
    activity: {
      maxConnections: 100,
      connections: { total: 3, active: 1, idle: 2, idleInTransaction: 0, idleInTransactionAborted: 0, other: 0 },
      activeNotWaiting: 1,
      waitEvents: [],
    },
  };
}

function validate(report: MetricsReport): MetricsReport {
  return MetricsReportSchema.parse(JSON.parse(JSON.stringify(report)));
}

describe('report', () => {
  test('top N plus one "other" row; sums of calls match the total', () => {
    let seed = 7;
    const rnd = () => (seed = (seed * 16807) % 2147483647) / 2147483647;
    const statements = Array.from({ length: 250 }, (_, i) => statementDelta(String(1000 + i), 1 + Math.floor(rnd() * 500), rnd() * 1000));
    const totalCalls = statements.reduce((a, s) => a + s.calls, 0);
    const totalTime = statements.reduce((a, s) => a + s.totalExecTimeMs, 0);
    const report = validate(buildMetricsReport(deltaOf(statements), { includeQueries: false, topN: 100 }));
    const { top, other } = report.statements;
    assert.equal(top.length, 100);
    assert.equal(other.statements, 150);
    assert.equal(report.statements.activeStatements, 250);
    assert.equal(top.reduce((a, s) => a + s.calls, 0) + other.calls, totalCalls);
    assert.equal(report.derived.calls, totalCalls);
    assert.ok(Math.abs(top.reduce((a, s) => a + s.totalExecTimeMs, 0) + other.totalExecTimeMs - totalTime) < 0.01 * 101);
    for (let i = 1; i < top.length; i++) assert.ok(top[i - 1]!.totalExecTimeMs >= top[i]!.totalExecTimeMs, 'sorted');
    const slowestOther = Math.max(
      ...statements
        .map((s) => s.totalExecTimeMs)
        .sort((a, b) => b - a)
        .slice(100),
    );
    assert.ok(top.at(-1)!.totalExecTimeMs >= Math.round(slowestOther * 1000) / 1000);
  });

  test('default N is 100; N = 0 puts everything in "other"; N beyond the limit is refused', () => {
    const statements = Array.from({ length: 120 }, (_, i) => statementDelta(String(i), 1, i));
    assert.equal(buildMetricsReport(deltaOf(statements), { includeQueries: false }).statements.top.length, 100);
    const none = validate(buildMetricsReport(deltaOf(statements), { includeQueries: false, topN: 0 }));
    assert.equal(none.statements.other.statements, 120);
    assert.equal(none.statements.other.calls, 120);
    assert.throws(
      () => buildMetricsReport(deltaOf(statements), { includeQueries: false, topN: REPORT_LIMITS.maxTopStatements + 1 }),
      RangeError,
    );
  });

  test('include_queries false: no text anywhere in the report', () => {
    const statements = [
      statementDelta('1', 5, 50, { text: 'SELECT * FROM zz_private_payroll WHERE id = $1' }),
      statementDelta('2', 5, 40, { text: 'UPDATE zz_private_payroll SET x = $1' }),
    ];
    const withText = JSON.stringify(validate(buildMetricsReport(deltaOf(statements), { includeQueries: true })));
    assert.match(withText, /zz_private_payroll/, 'positive control: text is there when allowed');
    const json = JSON.stringify(validate(buildMetricsReport(deltaOf(statements), { includeQueries: false })));
    assert.doesNotMatch(json, /zz_private_payroll/);
    assert.doesNotMatch(json, /"text"/);
  });

  test('weighted runtime: a shift toward cheap queries does not look like a win', () => {
    const [A, B, C, D] = ['101', '102', '103', '104'];
    // Baseline mix: A 60 %, B 30 %, C 10 % of calls.
    const baseline = deltaOf([statementDelta(A, 60, 60), statementDelta(B, 30, 30), statementDelta(C, 10, 100)]);
    const mix = baselineMixFrom(baseline);
    assert.deepEqual(
      Object.entries(mix).map(([k, v]) => [k.split(':')[2], v]),
      [
        [A, 0.6],
        [B, 0.3],
        [C, 0.1],
      ],
    );
    // Now: A got slower (mean 2 ms), B stays at 1 ms, C did not run, and a new cheap D dominates.
    const now = deltaOf([statementDelta(A, 10, 20), statementDelta(B, 90, 90), statementDelta(D, 100, 10)]);
    // Plain average: (20 + 90 + 10) / 200 = 0.6 ms, "better" than the baseline's 1.9 ms.
    // Weighted: (0.6 × 2 + 0.3 × 1) / (0.6 + 0.3) = 1.5 / 0.9 = 1.666… ms, covering 90 % of the mix.
    const report = validate(buildMetricsReport(now, { includeQueries: false, baselineMix: mix }));
    assert.ok(Math.abs(report.derived.avgQueryRuntimeMs! - 0.6) < 1e-12);
    assert.ok(Math.abs(report.derived.weightedQueryRuntimeMs! - 5 / 3) < 1e-12);
    assert.ok(Math.abs(report.derived.weightedCoverage! - 0.9) < 1e-12);
    assert.equal(buildMetricsReport(now, { includeQueries: false }).derived.weightedQueryRuntimeMs, null);
  });

  test('nested statements stay out of the averages and the mix', () => {
    const d = deltaOf([
      statementDelta('1', 10, 100),
      statementDelta('2', 1000, 90, { toplevel: false, key: statementKey({ userId: 10, dbId: 5, queryId: '2', toplevel: false }) }),
    ]);
    const report = buildMetricsReport(d, { includeQueries: false });
    assert.equal(report.derived.calls, 10);
    assert.equal(report.derived.avgQueryRuntimeMs, 10);
    assert.deepEqual(Object.values(baselineMixFrom(d)), [1]);
    assert.equal(report.statements.top.length, 2, 'but nested statements are still reported');
  });

  test('tps and cache hit ratio', () => {
    const report = buildMetricsReport(deltaOf([]), { includeQueries: false });
    assert.equal(report.derived.tps, 5); // (90 + 10) / 20 s
    assert.equal(report.derived.cacheHitRatio, 0.9); // 900 / 1000
    assert.equal(report.derived.avgQueryRuntimeMs, null);
  });

  test('activity rows: states, waits, active without a wait', () => {
    const a = activityFromRows(
      [
        { state: 'active', wait_event_type: null, wait_event: null, n: 2 },
        { state: 'active', wait_event_type: 'Lock', wait_event: 'relation', n: 3 },
        { state: 'active', wait_event_type: 'IO', wait_event: 'DataFileRead', n: 1 },
        { state: 'idle', wait_event_type: 'Client', wait_event: 'ClientRead', n: 7 },
        { state: 'idle in transaction', wait_event_type: 'Client', wait_event: 'ClientRead', n: 1 },
        { state: null, wait_event_type: null, wait_event: null, n: 1 },
      ],
      100,
    );
    assert.deepEqual(a.connections, { total: 15, active: 6, idle: 7, idleInTransaction: 1, idleInTransactionAborted: 0, other: 1 });
    assert.equal(a.activeNotWaiting, 2);
    assert.deepEqual(a.waitEvents, [
      { type: 'Lock', event: 'relation', count: 3 },
      { type: 'IO', event: 'DataFileRead', count: 1 },
    ]);
  });
});

describe('report schema is strict and bounded', () => {
  const good = () =>
    JSON.parse(
      JSON.stringify(buildMetricsReport(deltaOf([statementDelta('1', 1, 1, { text: 'SELECT 1' })]), { includeQueries: true })),
    ) as Record<string, unknown> & MetricsReport;

  test('a built report passes', () => {
    assert.ok(MetricsReportSchema.safeParse(good()).success);
  });
  test('unknown keys are rejected, at the top and inside', () => {
    assert.equal(MetricsReportSchema.safeParse({ ...good(), extra: 1 }).success, false);
    const r = good();
    (r.statements.top[0] as Record<string, unknown>)['secret'] = 'x';
    assert.equal(MetricsReportSchema.safeParse(r).success, false);
  });
  test('too long a text, negative or fractional counters, a bad queryid are rejected', () => {
    const long = good();
    long.statements.top[0]!.text = 'x'.repeat(REPORT_LIMITS.maxQueryTextLength + 1);
    assert.equal(MetricsReportSchema.safeParse(long).success, false);
    const neg = good();
    neg.statements.top[0]!.calls = -1;
    assert.equal(MetricsReportSchema.safeParse(neg).success, false);
    const frac = good();
    frac.statements.top[0]!.rows = 1.5;
    assert.equal(MetricsReportSchema.safeParse(frac).success, false);
    const qid = good();
    qid.statements.top[0]!.queryId = 'DROP TABLE x';
    assert.equal(MetricsReportSchema.safeParse(qid).success, false);
  });
  test('arrays are bounded and top + other must add up', () => {
    const many = good();
    many.statements.topN = REPORT_LIMITS.maxTopStatements;
    many.statements.top = Array.from({ length: REPORT_LIMITS.maxTopStatements + 1 }, () => many.statements.top[0]!);
    many.statements.activeStatements = many.statements.top.length;
    assert.equal(MetricsReportSchema.safeParse(many).success, false);
    const mismatch = good();
    mismatch.statements.activeStatements += 1;
    assert.equal(MetricsReportSchema.safeParse(mismatch).success, false);
    const waits = good();
    waits.activity.waitEvents = Array.from({ length: REPORT_LIMITS.maxWaitEvents + 1 }, (_, i) => ({
      type: 'Lock',
      event: `e${i}`,
      count: 1,
    }));
    assert.equal(MetricsReportSchema.safeParse(waits).success, false);
  });
});

// pg_stat_statements 1.8 and 1.9 on real clusters (PostgreSQL 15 can create both), and the SQL
// for newer servers (pg_stat_statements 1.11, PostgreSQL 17's pg_stat_checkpointer, 18's
// pg_stat_wal) run for real against stand-in functions and views with exactly those columns.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { connectDb, AGENT_QUERY_MARKER, type Db } from '../src/agent/db.ts';
import { buildMetricsReport, createCollector, diffSnapshots, statementKey, type SnapshotDelta } from '../src/agent/collect/index.ts';
import type { PgssShape } from '../src/agent/collect/columns.ts';
import { createStatementReader } from '../src/agent/collect/statements.ts';
import { buildCheckpointerSql, buildWalSql, parseWalRow, readCheckpointer } from '../src/agent/collect/stats.ts';
import { startCluster, type Cluster } from '../src/lab/cluster.ts';
import { MetricsReportSchema } from '../src/protocol/report.ts';

const clusters = new Map<string, { cluster: Cluster; db: Db }>();

before(async () => {
  await Promise.all(
    ['1.8', '1.9'].map(async (version) => {
      const cluster = await startCluster({ pgssVersion: version });
      clusters.set(version, { cluster, db: await connectDb(cluster.agentUrl) });
      await cluster.sql('CREATE TABLE zz_items (id int PRIMARY KEY, qty int NOT NULL)');
      await cluster.sql('INSERT INTO zz_items SELECT g, g FROM generate_series(1, 500) g');
    }),
  );
});
after(async () => {
  for (const { cluster, db } of clusters.values()) {
    await db.close();
    await cluster.destroy();
  }
});

const POINT = 'SELECT qty FROM zz_items WHERE id = $1';

async function runPoint(cluster: Cluster, times: number): Promise<void> {
  const client = new pg.Client({ connectionString: cluster.adminUrl });
  await client.connect();
  try {
    for (let i = 1; i <= times; i++) await client.query(POINT, [i]);
  } finally {
    await client.end();
  }
}

async function pointOf(cluster: Cluster, delta: SnapshotDelta) {
  const [row] = await cluster.sql<{ queryid: string }>('SELECT queryid::text AS queryid FROM pg_stat_statements WHERE query = $1', [POINT]);
  assert.ok(row);
  const found = delta.statements.filter((s) => s.queryId === row.queryid);
  assert.equal(found.length, 1);
  return found[0]!;
}

for (const version of ['1.8', '1.9']) {
  describe(`pg_stat_statements ${version}`, () => {
    const get = () => clusters.get(version)!;

    test('discovers the columns this version has', async () => {
      const caps = await createCollector(get().db, { includeQueries: true }).capabilities();
      assert.equal(caps.pgss.version, version);
      assert.ok(caps.pgss.columns.has('total_exec_time'));
      assert.ok(caps.pgss.columns.has('plans'));
      assert.equal(caps.pgss.columns.has('toplevel'), version === '1.9');
      assert.equal(caps.pgss.hasInfo, version === '1.9');
      assert.ok(!caps.pgss.columns.has('temp_blk_read_time'), 'a 1.10 column');
    });

    test('K calls between two snapshots, the agent hidden, a valid report', async () => {
      const { cluster, db } = get();
      const collector = createCollector(db, { includeQueries: true });
      await runPoint(cluster, 2);
      const s1 = await collector.collect();
      const K = 23;
      await runPoint(cluster, K);
      const s2 = await collector.collect();
      const delta = diffSnapshots(s1, s2);
      const point = await pointOf(cluster, delta);
      assert.equal(point.calls, K);
      assert.equal(point.rows, K);
      assert.ok(point.totalExecTimeMs > 0);
      assert.equal(point.toplevel, version === '1.9' ? true : null);
      assert.equal(point.text, POINT);
      for (const e of s2.statements.entries.values()) assert.ok(!e.text?.includes(AGENT_QUERY_MARKER));
      const toplevel = version === '1.9' ? 'toplevel' : 'NULL::boolean AS toplevel';
      const own = await cluster.sql<{ userid: number; dbid: number; queryid: string; toplevel: boolean | null }>(
        `SELECT userid::int AS userid, dbid::int AS dbid, queryid::text AS queryid, ${toplevel}
           FROM pg_stat_statements WHERE starts_with(query, $1) OR right(query, length($1)) = $1`,
        [AGENT_QUERY_MARKER],
      );
      assert.ok(own.length >= 5, 'the agent ran marked statements');
      for (const o of own) assert.ok(!s2.statements.entries.has(statementKey(o.userid, o.dbid, o.queryid, o.toplevel)), 'own entry hidden');

      const report = MetricsReportSchema.parse(JSON.parse(JSON.stringify(buildMetricsReport(delta, { includeQueries: true }))));
      assert.equal(report.statements.pgssVersion, version);
      assert.equal(report.evictions.deallocations, version === '1.9' ? 0 : null);
      assert.equal(report.statements.top.find((s) => s.queryId === point.queryId)?.calls, K);
    });

    test('a reset between snapshots: no negative delta', async () => {
      const { cluster, db } = get();
      const collector = createCollector(db, { includeQueries: true });
      await runPoint(cluster, 20);
      const s1 = await collector.collect();
      await cluster.sql('SELECT pg_stat_statements_reset()');
      await runPoint(cluster, 4);
      const s2 = await collector.collect();
      const delta = diffSnapshots(s1, s2);
      // 1.8 has no pg_stat_statements_info: the reset shows only as counters that went down.
      assert.equal(delta.evictions.statsReset, version === '1.9');
      assert.equal((await pointOf(cluster, delta)).calls, 4);
      for (const s of delta.statements) for (const [k, v] of Object.entries(s)) if (typeof v === 'number') assert.ok(v >= 0, `${k} = ${v}`);
    });
  });
}

// ---- newer servers, through stand-ins ----

type Column = [name: string, type: string];

// pg_stat_statements 1.11 (PostgreSQL 17), as in pg_stat_statements--1.10--1.11.sql.
const PGSS_1_11: Column[] = (
  'userid:oid dbid:oid toplevel:bool queryid:int8 query:text plans:int8 total_plan_time min_plan_time max_plan_time mean_plan_time stddev_plan_time ' +
  'calls:int8 total_exec_time min_exec_time max_exec_time mean_exec_time stddev_exec_time rows:int8 shared_blks_hit:int8 shared_blks_read:int8 ' +
  'shared_blks_dirtied:int8 shared_blks_written:int8 local_blks_hit:int8 local_blks_read:int8 local_blks_dirtied:int8 local_blks_written:int8 ' +
  'temp_blks_read:int8 temp_blks_written:int8 shared_blk_read_time shared_blk_write_time local_blk_read_time local_blk_write_time ' +
  'temp_blk_read_time temp_blk_write_time wal_records:int8 wal_fpi:int8 wal_bytes:numeric jit_functions:int8 jit_generation_time ' +
  'jit_inlining_count:int8 jit_inlining_time jit_optimization_count:int8 jit_optimization_time jit_emission_count:int8 jit_emission_time ' +
  'jit_deform_count:int8 jit_deform_time stats_since:timestamptz minmax_stats_since:timestamptz'
)
  .split(' ')
  .map((c) => {
    const [name, type] = c.split(':');
    return [name!, type ?? 'float8'];
  });

/** A value for each column of a stand-in row; `special` overrides by name. */
function values(columns: Column[], special: Record<string, string>): string {
  const byType: Record<string, string> = { oid: '10::oid', bool: 'true', int8: '7::int8', text: "'x'", float8: '1.5::float8', numeric: '99::numeric', timestamptz: "'2024-03-04 05:06:07+00'::timestamptz" };
  return columns.map(([name, type]) => special[name] ?? byType[type]).join(', ');
}

describe('SQL for newer servers, run against stand-ins', () => {
  test('pg_stat_statements 1.11: counters, renamed block times, stats_since, info, texts', async () => {
    const { cluster, db } = clusters.get('1.9')!;
    const outs = PGSS_1_11.map(([n, t]) => `OUT ${n} ${t}`).join(', ');
    const workload = values(PGSS_1_11, {
      queryid: '4242::int8',
      query: "CASE WHEN showtext THEN 'SELECT * FROM fake_table_111' END",
      calls: '3::int8',
      total_exec_time: '12.5::float8',
      shared_blk_read_time: '4.25::float8',
      shared_blk_write_time: '0.5::float8',
      dbid: '5::oid',
    });
    const own = values(PGSS_1_11, { queryid: '4343::int8', query: `CASE WHEN showtext THEN '${AGENT_QUERY_MARKER} SELECT 1' END`, dbid: '5::oid' });
    await cluster.sql('CREATE SCHEMA fake111');
    await cluster.sql(
      `CREATE FUNCTION fake111.pg_stat_statements(showtext boolean, ${outs}) RETURNS SETOF record LANGUAGE sql
         AS $$ SELECT ${workload} UNION ALL SELECT ${own} $$`,
    );
    await cluster.sql(`CREATE VIEW fake111.pg_stat_statements_info AS SELECT 6::int8 AS dealloc, '2024-01-01 00:00:00+00'::timestamptz AS stats_reset`);
    await cluster.sql('GRANT USAGE ON SCHEMA fake111 TO agent_user; GRANT SELECT ON fake111.pg_stat_statements_info TO agent_user');

    const shape: PgssShape = { version: '1.11', schema: 'fake111', columns: new Set(PGSS_1_11.map(([n]) => n)), hasInfo: true };
    const reader = createStatementReader(db, { includeQueries: true, maxTextLength: 100 });
    const snapshot = await reader.read(shape);
    assert.equal(snapshot.textsFetched, 2);
    assert.deepEqual([...snapshot.entries.keys()], ['10:5:4242:t'], 'the marked entry is the agent\'s: dropped');
    const e = snapshot.entries.get('10:5:4242:t')!;
    assert.equal(e.calls, 3);
    assert.equal(e.totalExecTimeMs, 12.5);
    assert.equal(e.blkReadTimeMs, 4.25);
    assert.equal(e.blkWriteTimeMs, 0.5);
    assert.equal(e.walBytes, 99);
    assert.equal(e.statsSince, '2024-03-04T05:06:07.000Z');
    assert.equal(e.text, 'SELECT * FROM fake_table_111');
    assert.deepEqual(snapshot.info, { dealloc: 6, statsReset: '2024-01-01T00:00:00.000Z' });
    assert.equal((await reader.read(shape)).textsFetched, 0, 'cached');
  });

  test("PostgreSQL 17: pg_stat_checkpointer plus what is left of pg_stat_bgwriter", async () => {
    const { cluster, db } = clusters.get('1.9')!;
    await cluster.sql('CREATE SCHEMA fake17');
    await cluster.sql(
      `CREATE VIEW fake17.pg_stat_checkpointer AS SELECT 11::int8 AS num_timed, 2::int8 AS num_requested, 0::int8 AS restartpoints_timed,
         0::int8 AS restartpoints_req, 0::int8 AS restartpoints_done, 1500.5::float8 AS write_time, 20.25::float8 AS sync_time,
         333::int8 AS buffers_written, '2024-02-02 00:00:00+00'::timestamptz AS stats_reset`,
    );
    await cluster.sql(
      `CREATE VIEW fake17.pg_stat_bgwriter AS SELECT 44::int8 AS buffers_clean, 1::int8 AS maxwritten_clean, 5555::int8 AS buffers_alloc,
         '2024-02-03 00:00:00+00'::timestamptz AS stats_reset`,
    );
    await cluster.sql('GRANT USAGE ON SCHEMA fake17 TO agent_user; GRANT SELECT ON ALL TABLES IN SCHEMA fake17 TO agent_user');
    const cols = async (view: string) =>
      new Set(
        (await cluster.sql<{ a: string }>(`SELECT attname::text AS a FROM pg_attribute WHERE attrelid = $1::regclass AND attnum > 0`, [view])).map((r) => r.a),
      );
    const sql = buildCheckpointerSql(
      { name: 'fake17.pg_stat_bgwriter', columns: await cols('fake17.pg_stat_bgwriter') },
      { name: 'fake17.pg_stat_checkpointer', columns: await cols('fake17.pg_stat_checkpointer') },
    );
    const snap = await readCheckpointer(db, { sql, source: 'pg_stat_checkpointer' });
    assert.deepEqual(snap, {
      source: 'pg_stat_checkpointer',
      checkpointer: { checkpointsTimed: 11, checkpointsRequested: 2, writeTimeMs: 1500.5, syncTimeMs: 20.25, buffersCheckpoint: 333, buffersBackend: null, buffersBackendFsync: null },
      checkpointerStatsReset: '2024-02-02T00:00:00.000Z',
      bgwriter: { buffersClean: 44, maxwrittenClean: 1, buffersAlloc: 5555 },
      bgwriterStatsReset: '2024-02-03T00:00:00.000Z',
    });
  });

  test('PostgreSQL 18: pg_stat_wal without write/sync', async () => {
    const { cluster, db } = clusters.get('1.9')!;
    await cluster.sql('CREATE SCHEMA fake18');
    await cluster.sql(
      `CREATE VIEW fake18.pg_stat_wal AS SELECT 10::int8 AS wal_records, 2::int8 AS wal_fpi, 12345::numeric AS wal_bytes,
         0::int8 AS wal_buffers_full, now() AS stats_reset`,
    );
    await cluster.sql('GRANT USAGE ON SCHEMA fake18 TO agent_user; GRANT SELECT ON fake18.pg_stat_wal TO agent_user');
    const sql = buildWalSql({ name: 'fake18.pg_stat_wal', columns: new Set(['wal_records', 'wal_fpi', 'wal_bytes', 'wal_buffers_full', 'stats_reset']) });
    const [row] = await db.query(sql);
    const wal = parseWalRow(row!);
    assert.equal(wal.bytes, 12345);
    assert.equal(wal.write, null);
    assert.equal(wal.syncTimeMs, null);
  });
});

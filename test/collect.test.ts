// Collection against a real throwaway PostgreSQL 15 cluster (pg_stat_statements 1.10): a known
// workload between two snapshots must come out exactly, the agent must not see itself, resets
// must not produce negative deltas, and include_queries false must keep every text out.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { connectDb, AGENT_QUERY_MARKER, type Db } from '../src/agent/database/db.ts';
import {
  buildMetricsReport,
  createCollector,
  diffSnapshots,
  statementKey,
  type Snapshot,
  type SnapshotDelta,
} from '../src/agent/collect/index.ts';
import { startCluster, type Cluster } from '../src/lab/cluster.ts';
import { MetricsReportSchema, type MetricsReport } from '../src/protocol/report.ts';

const TABLE = 'zz_secret_orders_7431';
const POINT_QUERY = `SELECT amount FROM ${TABLE} WHERE id = $1`;

let cluster: Cluster;
let db: Db;

before(async () => {
  cluster = await startCluster();
  db = await connectDb(cluster.agentUrl);
  await cluster.sql(`CREATE TABLE ${TABLE} (id int PRIMARY KEY, amount int NOT NULL)`);
  await cluster.sql(`INSERT INTO ${TABLE} SELECT g, g * 10 FROM generate_series(1, 1000) g`);
  await cluster.sql('CREATE TABLE zz_lock (id int)');
});
after(async () => {
  await db?.close();
  await cluster?.destroy();
});

/** Runs statements on one workload session, then makes it flush its cumulative statistics. */
async function workload(run: (client: pg.Client) => Promise<void>): Promise<void> {
  const client = new pg.Client({ connectionString: cluster.adminUrl, application_name: 'workload' });
  await client.connect();
  try {
    await run(client);
    // pg_stat_database and pg_stat_wal are flushed at most once a second; force it (PG 15+).
    await client.query('SELECT pg_stat_force_next_flush()');
    await client.query('SELECT 1');
  } finally {
    await client.end();
  }
}

async function queryIdOf(text: string): Promise<string> {
  const rows = await cluster.sql<{ queryid: string }>('SELECT queryid::text AS queryid FROM pg_stat_statements WHERE query = $1', [text]);
  assert.equal(rows.length, 1, `one entry for ${text}`);
  return rows[0]!.queryid;
}

function statementOf(delta: SnapshotDelta, queryId: string) {
  const found = delta.statements.filter((s) => s.queryId === queryId);
  assert.equal(found.length, 1, `one delta entry for queryid ${queryId}`);
  return found[0]!;
}

function validate(report: MetricsReport): MetricsReport {
  const parsed = MetricsReportSchema.safeParse(JSON.parse(JSON.stringify(report)));
  assert.ok(parsed.success, parsed.success ? '' : JSON.stringify(parsed.error.issues.slice(0, 3)));
  return parsed.data;
}

function assertNoNegativeNumbers(value: unknown, path = 'report'): void {
  if (typeof value === 'number') assert.ok(value >= 0, `${path} = ${value}`);
  else if (Array.isArray(value)) value.forEach((v, i) => assertNoNegativeNumbers(v, `${path}[${i}]`));
  else if (value !== null && typeof value === 'object')
    for (const [k, v] of Object.entries(value)) assertNoNegativeNumbers(v, `${path}.${k}`);
}

function keysOf(value: unknown, into = new Set<string>()): Set<string> {
  if (Array.isArray(value)) for (const v of value) keysOf(v, into);
  else if (value !== null && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) {
      into.add(k);
      keysOf(v, into);
    }
  }
  return into;
}

describe('pg_stat_statements 1.10 on PostgreSQL 15', () => {
  test('discovers the version and its columns', async () => {
    const caps = await createCollector(db, { includeQueries: true }).capabilities();
    assert.equal(caps.pgss.version, '1.10');
    assert.ok(caps.pgss.columns.has('toplevel'));
    assert.ok(caps.pgss.hasInfo);
    assert.ok(caps.serverVersionNum >= 150000 && caps.serverVersionNum < 160000);
    assert.equal(caps.checkpointer, null, 'PostgreSQL 15 has no pg_stat_checkpointer');
    assert.notEqual(caps.wal, null);
  });

  test('a workload run K times between two snapshots gives K calls', async () => {
    const collector = createCollector(db, { includeQueries: true });
    const K = 37;
    const K2 = 5;
    // Some calls before the first snapshot, so the delta is a real subtraction.
    await workload(async (c) => {
      for (let i = 1; i <= 3; i++) await c.query(POINT_QUERY, [i]);
    });
    const s1 = await collector.collect();
    await workload(async (c) => {
      for (let i = 1; i <= K; i++) await c.query(POINT_QUERY, [i]);
      for (let i = 0; i < K2; i++) await c.query(`SELECT count(*) FROM ${TABLE} WHERE amount > $1`, [i * 100]);
    });
    const s2 = await collector.collect();
    const delta = diffSnapshots(s1, s2);

    const point = statementOf(delta, await queryIdOf(POINT_QUERY));
    assert.equal(point.calls, K);
    assert.equal(point.rows, K, 'every id exists: one row per call');
    assert.ok(point.totalExecTimeMs > 0);
    assert.ok(point.sharedBlksHit > 0);
    assert.equal(point.toplevel, true);
    assert.equal(point.text, POINT_QUERY);
    const scan = statementOf(delta, await queryIdOf(`SELECT count(*) FROM ${TABLE} WHERE amount > $1`));
    assert.equal(scan.calls, K2);
    assert.equal(scan.rows, K2);

    const report = validate(buildMetricsReport(delta, { includeQueries: true }));
    const row = report.statements.top.find((s) => s.queryId === point.queryId);
    assert.equal(row?.calls, K);
    assert.ok(report.derived.calls >= K + K2);
    assert.ok(report.derived.avgQueryRuntimeMs! > 0);
    assert.ok(report.interval.seconds > 0);
  });

  test('JIT compilation time per statement: a query compiled every call has it, a point lookup none', async (t) => {
    const [jit] = await cluster.sql<{ available: boolean }>('SELECT pg_jit_available() AS available');
    if (!jit?.available) return t.skip('this server has no JIT provider (llvmjit)');
    const collector = createCollector(db, { includeQueries: false });
    const compiled = `SELECT sum(amount + id) FROM ${TABLE} WHERE amount > $1`;
    const s1 = await collector.collect();
    await workload(async (c) => {
      await c.query('SET jit_above_cost = 0');
      for (let i = 0; i < 4; i++) await c.query(compiled, [i]);
      await c.query('RESET jit_above_cost');
      await c.query(POINT_QUERY, [1]);
    });
    const report = validate(buildMetricsReport(diffSnapshots(s1, await collector.collect()), { includeQueries: false }));
    const byId = new Map(report.statements.top.map((s) => [s.queryId, s]));
    assert.ok((byId.get(await queryIdOf(compiled))?.jitTimeMs ?? 0) > 0, 'compiled: some JIT time');
    assert.equal(byId.get(await queryIdOf(POINT_QUERY))?.jitTimeMs, 0, 'a point lookup is never compiled');
  });

  test("the agent's own statements never show up", async () => {
    const collector = createCollector(db, { includeQueries: true });
    let last: Snapshot | undefined;
    for (let i = 0; i < 3; i++) last = await collector.collect();
    const own = await cluster.sql<{ userid: number; dbid: number; queryid: string; toplevel: boolean }>(
      `SELECT userid::int AS userid, dbid::int AS dbid, queryid::text AS queryid, toplevel
         FROM pg_stat_statements WHERE starts_with(query, $1) OR right(query, length($1)) = $1`,
      [AGENT_QUERY_MARKER],
    );
    assert.ok(own.length >= 5, 'the agent did run marked statements (so this test can fail)');
    for (const o of own)
      assert.ok(
        !last!.statements.entries.has(statementKey({ userId: o.userid, dbId: o.dbid, queryId: o.queryid, toplevel: o.toplevel })),
        o.queryid,
      );
    for (const e of last!.statements.entries.values()) assert.ok(!e.text?.includes(AGENT_QUERY_MARKER), e.text);
    const cur = await collector.collect();
    const report = buildMetricsReport(diffSnapshots(last!, cur), { includeQueries: true, topN: 500 });
    assert.doesNotMatch(JSON.stringify(report), /tuner-agent/);
  });

  test('steady state reads no query text', async () => {
    const collector = createCollector(db, { includeQueries: true });
    const first = await collector.collect();
    assert.ok(first.statements.textsFetched > 0, 'first collection fetches texts');
    await collector.collect(); // the agent's own statements of the first round are new here
    const steady = await collector.collect();
    assert.equal(steady.statements.textsFetched, 0);
    await workload(async (c) => {
      await c.query(`SELECT id FROM ${TABLE} WHERE id < $1 ORDER BY id DESC LIMIT 3`, [50]);
    });
    const afterNew = await collector.collect();
    assert.ok(afterNew.statements.textsFetched >= 1, 'a new statement has its text fetched');
    assert.equal((await collector.collect()).statements.textsFetched, 0);
  });

  test('pg_stat_statements_reset() between snapshots: no negative deltas', async () => {
    const collector = createCollector(db, { includeQueries: true });
    await workload(async (c) => {
      for (let i = 1; i <= 20; i++) await c.query(POINT_QUERY, [i]);
    });
    const s1 = await collector.collect();
    await cluster.sql('SELECT pg_stat_statements_reset()');
    await workload(async (c) => {
      for (let i = 1; i <= 4; i++) await c.query(POINT_QUERY, [i]);
    });
    const s2 = await collector.collect();
    const delta = diffSnapshots(s1, s2);
    assert.equal(delta.evictions.statsReset, true);
    assert.equal(delta.evictions.evictedEntries, 0, 'a reset is not an eviction');
    assert.equal(statementOf(delta, await queryIdOf(POINT_QUERY)).calls, 4);
    const report = validate(buildMetricsReport(delta, { includeQueries: true }));
    assertNoNegativeNumbers(report);
    for (const e of s2.statements.entries.values())
      assert.ok(!e.text?.includes(AGENT_QUERY_MARKER), 'own entries re-created by the reset stay hidden');
  });

  test('top N plus "other" on a real workload; sums of calls match', async () => {
    const collector = createCollector(db, { includeQueries: false });
    const s1 = await collector.collect();
    // IN-lists of different lengths are distinct statements on PostgreSQL 15.
    const distinct = 30;
    await workload(async (c) => {
      for (let n = 1; n <= distinct; n++) {
        const list = Array.from({ length: n }, (_, i) => i + 1).join(',');
        for (let r = 0; r < 2; r++) await c.query(`SELECT count(*) FROM ${TABLE} WHERE id IN (${list})`);
      }
    });
    const s2 = await collector.collect();
    const delta = diffSnapshots(s1, s2);
    const totalCalls = delta.statements.reduce((a, s) => a + s.calls, 0);
    assert.ok(delta.statements.length >= distinct, `${delta.statements.length} statements, more than N = 10`);
    const report = validate(buildMetricsReport(delta, { includeQueries: false, topN: 10 }));
    assert.equal(report.statements.top.length, 10);
    assert.equal(report.statements.other.statements, delta.statements.length - 10);
    assert.equal(report.statements.top.reduce((a, s) => a + s.calls, 0) + report.statements.other.calls, totalCalls);
    assert.ok(totalCalls >= distinct * 2);
  });

  test('include_queries false: no query text anywhere in the report', async () => {
    const run = () =>
      workload(async (c) => {
        for (let i = 1; i <= 3; i++) await c.query(POINT_QUERY, [i]);
        await c.query(`UPDATE ${TABLE} SET amount = amount WHERE id = $1`, [1]);
      });
    // Positive control: with include_queries the distinctive table name is there.
    const withText = createCollector(db, { includeQueries: true });
    const a1 = await withText.collect();
    await run();
    const a2 = await withText.collect();
    const allowed = JSON.stringify(buildMetricsReport(diffSnapshots(a1, a2), { includeQueries: true }));
    assert.match(allowed, new RegExp(TABLE));

    // The report builder alone keeps texts out, even from a collector that read them...
    const filtered = JSON.stringify(validate(buildMetricsReport(diffSnapshots(a1, a2), { includeQueries: false })));
    assert.doesNotMatch(filtered, new RegExp(TABLE));
    assert.ok(!keysOf(JSON.parse(filtered)).has('text'));

    // ...and a collector without include_queries never reads them.
    const noText = createCollector(db, { includeQueries: false });
    const b1 = await noText.collect();
    await run();
    const b2 = await noText.collect();
    for (const e of b2.statements.entries.values()) assert.equal(e.text, undefined);
    const json = JSON.stringify(validate(buildMetricsReport(diffSnapshots(b1, b2), { includeQueries: false })));
    assert.doesNotMatch(json, new RegExp(TABLE));
    assert.doesNotMatch(json, /amount/);
    assert.ok(!keysOf(JSON.parse(json)).has('text'));
  });
});

describe('server statistics', () => {
  test('pg_stat_database, pg_stat_wal: deltas of a known workload', async () => {
    const collector = createCollector(db, { includeQueries: false });
    const s1 = await collector.collect();
    const K = 25;
    await workload(async (c) => {
      for (let i = 1; i <= K; i++) await c.query(POINT_QUERY, [i]);
      await c.query('CREATE TABLE zz_wal (id int, pad text)');
      await c.query(`INSERT INTO zz_wal SELECT g, repeat('x', 100) FROM generate_series(1, 500) g`);
      await c.query('BEGIN');
      await c.query('SELECT 1');
      await c.query('ROLLBACK');
    });
    const s2 = await collector.collect();
    const delta = diffSnapshots(s1, s2);
    const report = validate(buildMetricsReport(delta, { includeQueries: false }));
    const postgres = report.database.databases.find((d) => d.datname === 'postgres');
    assert.ok(postgres, 'the postgres database is listed');
    assert.ok(postgres.xactCommit >= K + 2, `commits ${postgres.xactCommit}`);
    assert.ok(postgres.xactRollback >= 1, `rollbacks ${postgres.xactRollback}`);
    assert.ok(report.database.total.xactCommit >= postgres.xactCommit);
    assert.ok(report.database.total.blksHit > 0);
    assert.ok(report.derived.tps > 0);
    assert.ok(report.derived.cacheHitRatio! > 0 && report.derived.cacheHitRatio! <= 1);
    assert.ok(report.wal, 'PostgreSQL 15 has pg_stat_wal');
    assert.ok(report.wal.records >= 500, `wal records ${report.wal.records}`);
    assert.ok(report.wal.bytes > 500 * 100);
    assert.equal(report.checkpointer?.source, 'pg_stat_bgwriter');
    await cluster.sql('DROP TABLE zz_wal');
  });

  test('checkpointer: a CHECKPOINT shows up as a requested checkpoint', async () => {
    const collector = createCollector(db, { includeQueries: false });
    const s1 = await collector.collect();
    await cluster.sql('CHECKPOINT');
    // The checkpointer publishes its counters just after it wakes the waiting backend: poll.
    let requested = 0;
    for (let i = 0; i < 50 && requested === 0; i++) {
      const cur = await collector.collect();
      requested = diffSnapshots(s1, cur).checkpointer?.checkpointsRequested ?? 0;
      if (requested === 0) await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(requested, 1);
  });

  test('connections by state and wait events, without the agent', async () => {
    const collector = createCollector(db, { includeQueries: false });
    const otherAgentSession = await connectDb(cluster.agentUrl); // application_name tuner-agent: not counted
    const connect = async (name: string) => {
      const c = new pg.Client({ connectionString: cluster.adminUrl, application_name: name });
      await c.connect();
      return c;
    };
    const idle = await connect('idle-one');
    const holder = await connect('lock-holder');
    const waiter = await connect('lock-waiter');
    try {
      await holder.query('BEGIN');
      await holder.query('LOCK TABLE zz_lock IN ACCESS EXCLUSIVE MODE');
      const blocked = waiter.query('SELECT count(*) FROM zz_lock');
      // Wait until the waiter is really waiting.
      for (let i = 0; i < 100; i++) {
        const [r] = await cluster.sql<{ n: number }>(
          `SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'lock-waiter' AND wait_event_type = 'Lock'`,
        );
        if (r!.n === 1) break;
        await new Promise((r) => setTimeout(r, 50));
      }
      const snapshot = await collector.collect();
      const a = snapshot.activity;
      assert.equal(a.maxConnections, 100);
      assert.equal(a.connections.total, 3, JSON.stringify(a));
      assert.equal(a.connections.idle, 1);
      assert.equal(a.connections.idleInTransaction, 1);
      assert.equal(a.connections.active, 1);
      assert.deepEqual(a.waitEvents, [{ type: 'Lock', event: 'relation', count: 1 }]);
      await holder.query('ROLLBACK');
      await blocked;
    } finally {
      await Promise.all([idle.end(), holder.end(), waiter.end(), otherAgentSession.close()]);
    }
  });
});

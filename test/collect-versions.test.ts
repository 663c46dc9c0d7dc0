// pg_stat_statements 1.8 and 1.9 created at those versions on one server (PostgreSQL 15 can
// create both): an extension older than its server. The newer versions and views run on real
// servers of their own majors in version-matrix.test.ts.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { connectDb, AGENT_QUERY_MARKER, type Db } from '../src/agent/database/db.ts';
import { buildMetricsReport, createCollector, diffSnapshots, statementKey, type SnapshotDelta } from '../src/agent/collect/index.ts';
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
      for (const o of own)
        assert.ok(
          !s2.statements.entries.has(statementKey({ userId: o.userid, dbId: o.dbid, queryId: o.queryid, toplevel: o.toplevel })),
          'own entry hidden',
        );

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

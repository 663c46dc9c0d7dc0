// Eviction: with pg_stat_statements.max = 100 (its minimum), more distinct statements than that
// push entries out. The report must say so: evicted entries and the dealloc delta.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import pg from 'pg';
import { connectDb, type Db } from '../src/agent/database/db.ts';
import { buildMetricsReport, createCollector, diffSnapshots } from '../src/agent/collect/index.ts';
import { startCluster, type Cluster } from '../src/lab/cluster.ts';
import { MetricsReportSchema } from '../src/protocol/report.ts';

let cluster: Cluster;
let db: Db;
before(async () => {
  cluster = await startCluster({ extraConf: ['pg_stat_statements.max = 100'] });
  db = await connectDb(cluster.agentUrl);
  await cluster.sql('CREATE TABLE zz_evict (id int PRIMARY KEY)');
});
after(async () => {
  await db?.close();
  await cluster?.destroy();
});

/** `count` distinct statements (IN-lists of different lengths have different queryids on PostgreSQL 15). */
async function distinctStatements(from: number, count: number): Promise<void> {
  const client = new pg.Client({ connectionString: cluster.adminUrl });
  await client.connect();
  try {
    for (let n = from; n < from + count; n++) {
      await client.query(`SELECT count(*) FROM zz_evict WHERE id IN (${Array.from({ length: n }, (_, i) => i + 1).join(',')})`);
    }
  } finally {
    await client.end();
  }
}

test('more distinct statements than pg_stat_statements.max: evictions and dealloc are reported', async () => {
  const [max] = await cluster.sql<{ max: string }>(`SELECT current_setting('pg_stat_statements.max') AS max`);
  assert.equal(max?.max, '100');
  const collector = createCollector(db, { includeQueries: false });
  await distinctStatements(1, 30);
  const s1 = await collector.collect();
  assert.ok(s1.statements.entries.size >= 30);
  await distinctStatements(31, 300);
  const s2 = await collector.collect();
  assert.ok(s2.statements.entries.size <= 100);

  const delta = diffSnapshots(s1, s2);
  assert.equal(delta.evictions.statsReset, false);
  assert.ok(delta.evictions.deallocations! >= 1, `deallocations ${delta.evictions.deallocations}`);
  assert.ok(delta.evictions.evictedEntries >= 1, `evicted ${delta.evictions.evictedEntries}`);
  assert.ok(delta.evictions.newEntries >= 1);

  const report = MetricsReportSchema.parse(JSON.parse(JSON.stringify(buildMetricsReport(delta, { includeQueries: false }))));
  assert.equal(report.evictions.deallocations, delta.evictions.deallocations);
  assert.equal(report.evictions.evictedEntries, delta.evictions.evictedEntries);
  // Cross-check with the server's own count.
  const [info] = await cluster.sql<{ dealloc: string }>('SELECT dealloc::text AS dealloc FROM pg_stat_statements_info');
  assert.ok(Number(info!.dealloc) >= report.evictions.deallocations!);
});

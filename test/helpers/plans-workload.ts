// The planner probe's tests' workload (test/plans*.test.ts): a NOT IN report whose subplan the
// planner hashes only above a work_mem threshold, and the application that runs it.
import pg from 'pg';
import type { Cluster } from '../../src/lab/cluster.ts';

/** The report: every row of `report_rows` whose id is not excluded. 300 000 excluded ids make a
 * hash table of about 10-20 MB: above the default work_mem (4MB, × hash_mem_multiplier), well
 * under 64MB. */
export const NOT_IN_REPORT = 'SELECT count(*) FROM report_rows WHERE region = $1 AND id NOT IN (SELECT id FROM report_excluded)';

export async function createReportWorkload(cluster: Cluster): Promise<void> {
  await cluster.sql(`CREATE TABLE report_rows AS SELECT g AS id, g % 10 AS region FROM generate_series(1, 2000) g`);
  await cluster.sql(`CREATE TABLE report_excluded AS SELECT g AS id FROM generate_series(1, 300000) g`);
  await cluster.sql('ANALYZE report_rows, report_excluded');
  // Planning reads what a query reads: pg_read_all_data from 14 on, SELECT on the tables before.
  await cluster.sql(
    cluster.major >= 14 ? 'GRANT pg_read_all_data TO agent_user' : 'GRANT SELECT ON ALL TABLES IN SCHEMA public TO agent_user',
  );
}

/** Runs `statements` as the application would (the superuser, its own session). */
export async function runAsApp(cluster: Cluster, statements: readonly [string, unknown[]?][]): Promise<void> {
  const client = new pg.Client({ connectionString: cluster.adminUrl });
  await client.connect();
  try {
    // The application's own session runs the report fast; the server's default stays 4MB.
    await client.query(`SET work_mem = '64MB'`);
    for (const [text, params] of statements) await client.query(text, params);
  } finally {
    await client.end();
  }
}

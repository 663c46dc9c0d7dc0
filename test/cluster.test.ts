import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import pg from 'pg';
import { startCluster, type Cluster } from '../src/lab/cluster.ts';

let cluster: Cluster;
before(async () => {
  cluster = await startCluster();
});
after(async () => {
  await cluster?.destroy();
});

test('throwaway cluster preloads pg_stat_statements and has a pg_monitor agent_user', async () => {
  const [row] = await cluster.sql<{ libs: string }>(`SELECT current_setting('shared_preload_libraries') AS libs`);
  assert.equal(row?.libs, 'pg_stat_statements');
  const client = new pg.Client({ connectionString: cluster.agentUrl });
  await client.connect();
  const r = await client.query<{ m: boolean }>(`SELECT pg_has_role('agent_user', 'pg_monitor', 'MEMBER') AS m`);
  await client.end();
  assert.equal(r.rows[0]?.m, true);
});

test('throwaway cluster restarts', async () => {
  const [before] = await cluster.sql<{ t: Date }>('SELECT pg_postmaster_start_time() AS t');
  await cluster.restart();
  const [afterRestart] = await cluster.sql<{ t: Date }>('SELECT pg_postmaster_start_time() AS t');
  assert.ok(afterRestart!.t.getTime() > before!.t.getTime());
});

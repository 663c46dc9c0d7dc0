// The TPC-C-like lab workload (src/lab/tpcc.ts): its mix runs without errors from several clients
// under the built-in driver, each of the five transactions runs, and the database stays
// consistent in the ways the TPC-C standard checks (its consistency conditions 1-3, in spirit).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startCluster, type Cluster } from '../src/lab/cluster.ts';
import { startDriver } from '../src/lab/load-driver.ts';
import { tpccSetup, TPCC_SCRIPT } from '../src/lab/tpcc.ts';
import { until } from './helpers/until.ts';

let cluster: Cluster;
before(async () => {
  cluster = await startCluster();
  await tpccSetup(cluster, 1);
});
after(async () => {
  await cluster?.destroy();
});

test('the mix runs from 4 clients without a failed transaction, each transaction runs, and the books agree', async () => {
  const count = async (sql: string) => Number((await cluster.sql<{ n: string }>(`SELECT (${sql})::text AS n`))[0]?.n);
  const before = {
    orders: await count('SELECT count(*) FROM tpcc_orders'),
    delivered: await count('SELECT count(*) FROM tpcc_orders WHERE o_carrier_id IS NOT NULL'),
    history: await count('SELECT count(*) FROM tpcc_history'),
  };
  await cluster.sql('SELECT pg_stat_statements_reset()');
  const driver = await startDriver(TPCC_SCRIPT, { connectionString: cluster.adminUrl, clients: 4, variables: { warehouses: 1 } });
  // A sample of the mix: over 100 transactions, however long a busy machine takes to run them.
  await until('100 transactions', () => Promise.resolve(driver.transactions > 100), 120_000, 100);
  await driver.stop();
  assert.ok(driver.transactions > 100, `${driver.transactions} transactions`);
  assert.equal(driver.failed, 0);

  const calls = await cluster.sql<{ name: string; calls: string }>(
    `SELECT substring(query FROM 'tpcc_[a-z_]+') AS name, sum(calls)::text AS calls FROM pg_stat_statements
      WHERE query ~ '^SELECT tpcc_[a-z_]+\\(' GROUP BY 1`,
  );
  const ran = new Map(calls.map((r) => [r.name, Number(r.calls)]));
  for (const name of ['tpcc_new_order', 'tpcc_payment', 'tpcc_order_status', 'tpcc_delivery', 'tpcc_stock_level'])
    assert.ok((ran.get(name) ?? 0) > 0, `${name} ran (${JSON.stringify([...ran])})`);
  assert.equal(
    [...ran.values()].reduce((a, b) => a + b, 0),
    driver.transactions,
  );

  // New orders: one per new-order transaction, numbered by their district's counter.
  assert.equal((await count('SELECT count(*) FROM tpcc_orders')) - before.orders, ran.get('tpcc_new_order'));
  assert.equal(
    await count(
      'SELECT count(*) FROM tpcc_district WHERE d_next_o_id - 1 <> (SELECT max(o_id) FROM tpcc_orders WHERE o_w_id = d_w_id AND o_d_id = d_id)',
    ),
    0,
  );
  // Each order has as many lines as it says, and is either waiting for delivery or delivered.
  assert.equal(
    await count(
      'SELECT count(*) FROM tpcc_orders WHERE o_ol_cnt <> (SELECT count(*) FROM tpcc_order_line WHERE ol_w_id = o_w_id AND ol_d_id = o_d_id AND ol_o_id = o_id)',
    ),
    0,
  );
  assert.equal(
    await count(
      'SELECT count(*) FROM tpcc_orders WHERE (o_carrier_id IS NULL) <> EXISTS (SELECT 1 FROM tpcc_new_order WHERE no_w_id = o_w_id AND no_d_id = o_d_id AND no_o_id = o_id)',
    ),
    0,
  );
  assert.ok((await count('SELECT count(*) FROM tpcc_orders WHERE o_carrier_id IS NOT NULL')) > before.delivered);
  // Payments: one history row each, and the warehouse's year-to-date equals its districts'.
  assert.equal((await count('SELECT count(*) FROM tpcc_history')) - before.history, ran.get('tpcc_payment'));
  assert.equal(
    await count('SELECT count(*) FROM tpcc_warehouse WHERE w_ytd <> (SELECT sum(d_ytd) FROM tpcc_district WHERE d_w_id = w_id)'),
    0,
  );
});

// The built-in load driver, for machines without pgbench: it reads the lab workloads' scripts,
// runs them on a real cluster closed-loop and at a fixed rate, and every transaction it counts
// is one the server ran.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { evaluate, parseScript, startDriver } from '../src/lab/load-driver.ts';
import { startCluster, type Cluster } from '../src/lab/cluster.ts';
import { WORKLOADS } from '../src/lab/workloads.ts';
import { until } from './helpers/until.ts';

describe('the script language it understands', () => {
  test('every lab workload parses', () => {
    for (const workload of Object.values(WORKLOADS)) assert.ok(parseScript(workload.script).length > 0, workload.name);
  });

  test('integer arithmetic with variables, * before + and -', () => {
    const vars = new Map([
      ['scale', 10],
      ['id', 7],
    ]);
    assert.equal(evaluate('100000 * :scale', vars), 1_000_000);
    assert.equal(evaluate(':id + 0', vars), 7);
    assert.equal(evaluate('2 + 3 * :scale - 1', vars), 31);
    assert.equal(evaluate('-5000', vars), -5000);
    assert.throws(() => evaluate(':nope + 1', vars), /no variable :nope/);
    assert.throws(() => evaluate('1 / 2', vars), /only integers, :variables and \+ - \*/);
  });

  test('a meta-command it cannot run is refused when the script is read, naming the line', () => {
    assert.throws(() => parseScript('SELECT 1;\n\\sleep 10 ms\n'), /line 2: .*"\\sleep 10 ms"/);
  });
});

describe('on a real cluster', () => {
  let cluster: Cluster;
  before(async () => {
    cluster = await startCluster();
  });
  after(async () => {
    await cluster?.destroy();
  });

  test('closed loop: the transactions it counts are the ones the server ran', async () => {
    const workload = WORKLOADS['select-1'];
    await workload.setup(cluster);
    await cluster.sql('SELECT pg_stat_statements_reset()');
    const driver = await startDriver(workload.script, { connectionString: cluster.adminUrl, clients: 2 });
    await until('20 transactions', () => Promise.resolve(driver.transactions >= 20), 60_000, 50);
    await driver.stop();
    const [row] = await cluster.sql<{ calls: string }>(
      `SELECT sum(calls)::text AS calls FROM pg_stat_statements WHERE query LIKE 'SELECT v FROM lab_points WHERE id = $1%'`,
    );
    assert.ok(driver.transactions > 0);
    assert.equal(driver.failed, 0);
    assert.equal(Number(row?.calls), driver.transactions);
  });

  test('fixed rate: it never runs ahead of the schedule', async () => {
    const started = Date.now();
    const driver = await startDriver(WORKLOADS['select-1'].script, { connectionString: cluster.adminUrl, clients: 2, rate: 20 });
    await sleep(1500);
    await driver.stop();
    const seconds = (Date.now() - started) / 1000;
    assert.ok(driver.transactions > 0);
    assert.ok(driver.transactions <= 20 * seconds + 2, `${driver.transactions} transactions in ${seconds.toFixed(1)} s at 20/s`);
  });

  test('TPC-B-like transactions keep the books balanced', async () => {
    const workload = WORKLOADS['tpcb-like'];
    await workload.setup(cluster);
    const driver = await startDriver(workload.script, { connectionString: cluster.adminUrl, clients: 2, variables: workload.variables });
    await until('20 transactions', () => Promise.resolve(driver.transactions >= 20), 60_000, 50);
    await driver.stop();
    const [books] = await cluster.sql<{ accounts: string; history: string; n: string }>(
      'SELECT (SELECT sum(abalance) FROM pgbench_accounts)::text AS accounts, (SELECT sum(delta) FROM pgbench_history)::text AS history, (SELECT count(*) FROM pgbench_history)::text AS n',
    );
    assert.equal(Number(books?.n), driver.transactions);
    assert.equal(books?.accounts, books?.history);
  });
});

// Issue 44: the planner probe (src/agent/plans/) on real servers of PostgreSQL 13, 15, 16 and 18:
// a NOT IN report whose subplan becomes hashed above a work_mem threshold, and the probe's safety:
// a write in the top is refused, a volatile function that writes is planned and never run, a lying
// IMMUTABLE one that writes at planning is stopped by the read-only transaction, FOR UPDATE is
// refused, and a table locked ACCESS EXCLUSIVE costs at most lock_timeout. On 16+ the PREPARE path
// of 13-15 gives the same generic plans as EXPLAIN (GENERIC_PLAN).
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { connectDb, type Db } from '../src/agent/database/db.ts';
import { isPlanless, planRefusal } from '../src/agent/plans/refusal.ts';
import { probePlans, toProtocol, type ProbeResult, type ShownStatement } from '../src/agent/plans/probe.ts';
import { startCluster, type Cluster } from '../src/lab/cluster.ts';
import { availableMajors } from '../src/lab/postgres-binaries.ts';
import { PlanProbeSchema } from '../src/protocol/plans.ts';
import { createReportWorkload, NOT_IN_REPORT, runAsApp } from './helpers/plans-workload.ts';
import { until } from './helpers/until.ts';

const byText = (result: ProbeResult, part: string): ShownStatement => {
  const found = result.statements.find((s) => s.text?.includes(part));
  assert.ok(found, `"${part}" in ${JSON.stringify(result.statements.map((s) => s.text))}`);
  return found;
};

test('planRefusal refuses what may write or lock before anything is sent, and lets reads through', () => {
  for (const text of [
    'INSERT INTO t VALUES ($1)',
    'UPDATE t SET a = $1',
    'DELETE FROM t',
    'MERGE INTO t USING s ON t.id = s.id WHEN MATCHED THEN DELETE',
    'WITH gone AS (DELETE FROM t RETURNING *) SELECT count(*) FROM gone',
    'SELECT * FROM t WHERE id = $1 FOR UPDATE',
    'SELECT * FROM t FOR NO KEY UPDATE',
    'SELECT * FROM t FOR KEY SHARE',
    'SELECT * INTO copy FROM t',
    'CREATE TABLE x (a int)',
    'VACUUM t',
    'EXPLAIN ANALYZE SELECT 1',
    'SELECT 1; DELETE FROM t',
    "SELECT 'unterminated",
  ]) {
    assert.notEqual(planRefusal(text), null, text);
  }
  for (const text of [
    'SELECT * FROM t WHERE id = $1',
    "SELECT 'update' AS word FROM t /* delete */",
    'WITH x AS (SELECT 1) SELECT * FROM x',
    'VALUES (1)',
    'TABLE t',
    'SELECT * FROM t;',
  ]) {
    assert.equal(planRefusal(text), null, text);
  }
});

test('isPlanless: commands run without a plan, and not those that plan a query', () => {
  for (const text of [
    'BEGIN',
    'COMMIT;',
    'SET work_mem = $1',
    'CREATE EXTENSION IF NOT EXISTS pg_stat_statements',
    'VACUUM t',
    'GRANT pg_read_all_data TO a',
  ])
    assert.equal(isPlanless(text), true, text);
  for (const text of [
    'SELECT 1',
    'CREATE TABLE c AS SELECT * FROM t',
    'EXPLAIN SELECT 1',
    'PREPARE p AS SELECT 1',
    'UPDATE t SET a = 1',
    'REFRESH MATERIALIZED VIEW v',
  ])
    assert.equal(isPlanless(text), false, text);
});

const MAJORS = [13, 15, 16, 18];
const available = availableMajors();

for (const major of MAJORS) {
  const skip = available.includes(major as never) ? false : `no PostgreSQL ${major} server binaries here`;
  describe(`PostgreSQL ${major}`, { skip }, () => {
    let cluster: Cluster;
    let db: Db;

    before(async () => {
      cluster = await startCluster({ major });
      await createReportWorkload(cluster);
      await cluster.sql('CREATE TABLE audit (n int)');
      await cluster.sql('CREATE TABLE locked_orders (id int)');
      await cluster.sql(`CREATE FUNCTION bump() RETURNS int VOLATILE LANGUAGE sql AS 'INSERT INTO audit VALUES (1) RETURNING 1'`);
      // Declared IMMUTABLE while it writes (a sequence: PL/pgSQL refuses INSERT in a non-volatile
      // function): the planner folds it, so planning alone would run it.
      await cluster.sql('CREATE SEQUENCE liar_seq');
      await cluster.sql(`CREATE FUNCTION liar() RETURNS bigint IMMUTABLE LANGUAGE plpgsql AS $$BEGIN RETURN nextval('liar_seq'); END$$`);
      // Even with the right to advance the sequence, the read-only transaction stops it.
      await cluster.sql('GRANT USAGE ON SEQUENCE liar_seq TO agent_user');
      if (major < 14) await cluster.sql('GRANT SELECT ON ALL TABLES IN SCHEMA public TO agent_user');
      db = await connectDb(cluster.agentUrl);
    });
    after(async () => {
      await db?.close();
      await cluster?.destroy();
    });

    test('the NOT IN report is a plain subplan under the current work_mem and a hashed one under 64MB', async () => {
      await cluster.sql('SELECT pg_stat_statements_reset()');
      await runAsApp(cluster, [
        [NOT_IN_REPORT, [3]],
        [NOT_IN_REPORT, [4]],
      ]);
      const result = await probePlans(db, { includeTexts: true, settings: { work_mem: '64MB' } });
      assert.equal(result.method, major >= 16 ? 'generic_plan' : 'prepare');
      const report = byText(result, 'report_excluded');
      assert.equal(report.current?.fingerprint.subplans.plain, 1, JSON.stringify(report.current?.tree));
      assert.equal(report.current?.fingerprint.subplans.hashed, 0);
      assert.equal(report.candidate?.fingerprint.subplans.hashed, 1, JSON.stringify(report.candidate?.tree));
      assert.equal(report.changed, true);
      assert.ok(
        report.changes?.some((c) => /^\+ SubPlan \d+ \(hashed\)/.test(c)),
        JSON.stringify(report.changes),
      );
      assert.deepEqual(result.settings, { work_mem: '64MB' });
      // What may leave the host parses against the protocol, without the trees.
      const sent = PlanProbeSchema.parse(toProtocol(result));
      assert.ok(!JSON.stringify(sent).includes('"tree"'));

      // Unchanged under a value that keeps the hash table out of memory.
      const same = byText(await probePlans(db, { includeTexts: true, settings: { work_mem: '1MB' } }), 'report_excluded');
      assert.equal(same.changed, false, JSON.stringify(same.changes));
    });

    test('a setting a session cannot SET is reported as not plannable, and the rest still planned', async () => {
      const result = await probePlans(db, { includeTexts: true, settings: { shared_buffers: '1GB', work_mem: '64MB', no_such: '1' } });
      assert.deepEqual(
        result.notPlannableSettings.map((s) => s.name),
        ['shared_buffers', 'no_such'],
      );
      assert.match(result.notPlannableSettings[0]!.reason, /postmaster/);
      assert.deepEqual(result.settings, { work_mem: '64MB' });
    });

    test("a superuser parameter is plannable only where the agent's user was granted SET on it (15+)", async () => {
      const settings = { session_replication_role: 'replica' };
      const refused = await probePlans(db, { includeTexts: true, settings });
      assert.match(refused.notPlannableSettings[0]?.reason ?? '', /context is superuser/);
      if (major < 15) return;
      await cluster.sql('GRANT SET ON PARAMETER session_replication_role TO agent_user');
      try {
        const granted = await probePlans(db, { includeTexts: true, settings });
        assert.deepEqual(granted.notPlannableSettings, []);
        assert.deepEqual(granted.settings, settings);
        assert.ok(
          granted.statements.some((s) => s.candidate),
          'planned under it',
        );
      } finally {
        await cluster.sql('REVOKE SET ON PARAMETER session_replication_role FROM agent_user');
      }
    });

    if (major >= 16) {
      test('PREPARE with force_generic_plan gives the same generic plans as EXPLAIN (GENERIC_PLAN)', async () => {
        await runAsApp(cluster, [['SELECT * FROM report_rows WHERE id = $1 AND region > $2', [1, 2]]]);
        const limits = { share: 1, max: 50 };
        const generic = await probePlans(db, { includeTexts: true, limits, settings: { work_mem: '64MB' } });
        const prepared = await probePlans(db, { includeTexts: true, limits, settings: { work_mem: '64MB' }, method: 'prepare' });
        assert.equal(prepared.method, 'prepare');
        const digests = (r: ProbeResult) =>
          r.statements.filter((s) => s.current).map((s) => [s.queryId, s.current!.digest, s.candidate!.digest]);
        assert.ok(digests(generic).length >= 2);
        assert.deepEqual(digests(prepared), digests(generic));
      });
    }

    test('the probe never writes, never runs what it plans, and waits on a lock at most lock_timeout', async () => {
      await cluster.sql('SELECT pg_stat_statements_reset()');
      await runAsApp(cluster, [
        [NOT_IN_REPORT, [1]],
        ['INSERT INTO audit VALUES ($1)', [9]],
        ['SELECT bump()'],
        ['SELECT * FROM report_rows WHERE id = $1 FOR UPDATE', [5]],
        ['SELECT count(*) FROM locked_orders'],
      ]);
      // The lying function writes whenever it runs, the application's call included.
      await runAsApp(cluster, [['SELECT liar() AS x, count(*) FROM report_rows']]);
      const written = () =>
        cluster.sql<{ n: number; seq: string }>(
          `SELECT (SELECT count(*)::int FROM audit) AS n, (SELECT last_value::text FROM liar_seq) AS seq`,
        );
      const [before] = await written();

      const holder = new pg.Client({ connectionString: cluster.adminUrl });
      await holder.connect();
      try {
        await holder.query('BEGIN');
        await holder.query('LOCK TABLE locked_orders IN ACCESS EXCLUSIVE MODE');
        const started = Date.now();
        const result = await probePlans(db, {
          includeTexts: true,
          limits: { share: 1, max: 50 },
          lockTimeoutMs: 300,
          settings: { work_mem: '64MB' },
        });
        const elapsed = Date.now() - started;

        assert.match(byText(result, 'INSERT INTO audit').notPlanned ?? '', /may write/);
        assert.match(byText(result, 'FOR UPDATE').notPlanned ?? '', /FOR UPDATE/);
        const bump = byText(result, 'bump()');
        assert.ok(bump.current, `SELECT bump() is planned: ${bump.notPlanned}`);
        const liar = byText(result, 'liar()');
        assert.equal(liar.current, undefined);
        assert.match(liar.notPlanned ?? '', /read-only transaction refused/);
        const locked = byText(result, 'count(*) FROM locked_orders');
        assert.equal(locked.current, undefined);
        assert.match(locked.notPlanned ?? '', /lock_timeout \(300 ms\)/);
        assert.equal(locked.sqlstate, '55P03');
        // One wait of 300 ms for the locked table, and planning in milliseconds otherwise.
        assert.ok(elapsed < 5_000, `the probe took ${elapsed} ms`);
      } finally {
        await holder.query('ROLLBACK').catch(() => undefined);
        await holder.end();
      }
      const [afterProbe] = await written();
      assert.deepEqual(afterProbe, before, 'nothing was written to audit, nor the sequence advanced, by the probe');
      // The agent's session is left outside any transaction, holding no lock and no prepared statement.
      const state = await until('the agent session idle', async () => {
        const [row] = await cluster.sql<{ state: string }>(`SELECT state FROM pg_stat_activity WHERE pid = $1`, [db.backendPid]);
        return row?.state === 'idle' ? row : undefined;
      });
      assert.equal(state.state, 'idle');
      const [locks] = await cluster.sql<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_locks WHERE pid = $1 AND locktype = 'relation' AND relation <> 'pg_locks'::regclass`,
        [db.backendPid],
      );
      assert.equal(locks?.n, 0);
      const [prepared] = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM pg_prepared_statements');
      assert.equal(prepared?.n, 0);
    });
  });
}

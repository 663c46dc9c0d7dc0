// Issue 44 item 4: the service's plan command as the agent carries it out (src/agent/plans/command.ts)
// on a real PostgreSQL 15 cluster running the NOT IN report: each candidate planned, only catalog
// parameters ever set, and the work_mem threshold found by bisection on the planner, within the
// catalog's bounds, with the plans on either side of it; the answer parses against the protocol.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { connectDb, type Db } from '../src/agent/database/db.ts';
import { answerPlanCommand, type PlanCommandContext } from '../src/agent/plans/command.ts';
import { startCluster, type Cluster } from '../src/lab/cluster.ts';
import { PlanAnswerSchema } from '../src/protocol/plans.ts';
import { CommandAckRequestSchema, CommandSchema } from '../src/protocol/v1.ts';
import { createReportWorkload, NOT_IN_REPORT, runAsApp } from './helpers/plans-workload.ts';

const MACHINE = { memoryBytes: 8 * 1024 ** 3, vcpus: 2 };

describe('the plan command on PostgreSQL 15', () => {
  let cluster: Cluster;
  let db: Db;
  let ctx: PlanCommandContext;

  before(async () => {
    cluster = await startCluster({ major: 15 });
    await createReportWorkload(cluster);
    await cluster.sql('SELECT pg_stat_statements_reset()');
    await runAsApp(cluster, [
      [NOT_IN_REPORT, [3]],
      [NOT_IN_REPORT, [4]],
    ]);
    db = await connectDb(cluster.agentUrl);
    ctx = { db, machine: MACHINE, targetKind: 'local', includeTexts: true };
  });
  after(async () => {
    await db?.close();
    await cluster?.destroy();
  });

  test('the protocol bounds a plan command and carries its answer in the acknowledgement', () => {
    const command = { id: 'p1', kind: 'plan', candidates: [{ values: { work_mem: '64MB' } }] };
    assert.ok(CommandSchema.safeParse(command).success);
    assert.ok(!CommandSchema.safeParse({ ...command, candidates: Array(4).fill({ values: {} }) }).success, 'at most 3 candidates');
    assert.ok(!CommandSchema.safeParse({ ...command, thresholds: [{ name: 'shared_buffers', low: 1, high: 2 }] }).success);
  });

  test('each candidate is planned; a parameter outside the catalog is never set, and said so', async () => {
    const answer = await answerPlanCommand(ctx, {
      id: 'p2',
      kind: 'plan',
      candidates: [{ values: { work_mem: '64MB', session_replication_role: 'replica' } }, { values: { work_mem: '1MB' } }],
    });
    PlanAnswerSchema.parse(answer);
    const [hashed, plain] = answer.candidates;
    assert.deepEqual(hashed?.settings, { work_mem: '64MB' });
    assert.deepEqual(
      hashed?.notPlannableSettings.map((s) => s.name),
      ['session_replication_role'],
    );
    const report = (probe: (typeof answer.candidates)[number] | undefined) =>
      probe?.statements.find((s) => s.text?.includes('report_excluded'));
    assert.equal(report(hashed)?.changed, true);
    assert.equal(report(hashed)?.candidate?.fingerprint.subplans.hashed, 1);
    assert.equal(report(plain)?.changed, false);
    const ack = { leaseId: 'l', status: 'applied', effective: {}, errors: [], restarted: false, restored: false, plans: answer };
    assert.ok(CommandAckRequestSchema.safeParse(ack).success, 'the acknowledgement carries it');
    // Nothing changed on the server.
    const [setting] = await cluster.sql<{ work_mem: string }>('SHOW work_mem');
    assert.equal(setting?.work_mem, '4MB');
  });

  test('the work_mem threshold: the smallest value that hashes the subplan, found by bisection and checked on both sides', async () => {
    const started = performance.now();
    const answer = await answerPlanCommand(ctx, {
      id: 'p3',
      kind: 'plan',
      candidates: [],
      // Beyond the catalog's bounds on both sides: the search stays within them (1 MB … 2 GB here).
      thresholds: [{ name: 'work_mem', low: 1, high: 1024 ** 3 }],
    });
    const [threshold] = answer.thresholds;
    assert.equal(threshold?.low, 1024);
    assert.equal(threshold?.high, 2 * 1024 * 1024);
    const report = threshold?.statements.find((s) => s.text?.includes('report_excluded'));
    assert.ok(report, JSON.stringify(threshold));
    assert.equal(report.below.fingerprint.subplans.plain, 1);
    assert.equal(report.at.fingerprint.subplans.hashed, 1);
    console.log(`threshold ${report.value} kB found in ${(performance.now() - started).toFixed(0)} ms`);
    // The planner agrees: plain 5 % below the value found, hashed at it.
    const check = await answerPlanCommand(ctx, {
      id: 'p4',
      kind: 'plan',
      candidates: [{ values: { work_mem: `${Math.floor(report.value * 0.95)}kB` } }, { values: { work_mem: `${report.value}kB` } }],
    });
    const plannedReport = (i: number) => check.candidates[i]?.statements.find((s) => s.queryId === report.queryId);
    assert.equal(plannedReport(0)?.candidate?.fingerprint.subplans.hashed, 0);
    assert.equal(plannedReport(1)?.candidate?.fingerprint.subplans.hashed, 1);
  });
});

import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { connectDb, type Db } from '../src/agent/database/db.ts';
import { guardThresholdsFrom } from '../src/agent/config/guardrails.ts';
import { DEFAULT_THRESHOLDS, judgeWindow, type KnownGoodFigures } from '../src/agent/applying/guardrails.ts';
import type { Cluster } from '../src/lab/cluster.ts';
import { startAgentCluster } from './helpers/agent-cluster.ts';
import type { MetricsReport } from '../src/protocol/report.ts';
import { GiB } from '../src/knobs/units.ts';
import { ZEROS } from './helpers/synthetic-reports.ts';
import type { TargetMetric } from '../src/protocol/v1.ts';
import { createWreckableTable, guardRevertsWreckingTrial, startRangeWorkload, type RangeWorkload } from './helpers/wrecking-trial.ts';

/** A window with only the fields the guardrails read filled in. */
function window(w: {
  calls?: number;
  runtimeMs?: number | null;
  seconds?: number;
  commits?: number;
  rollbacks?: number;
  connections?: number;
  maxConnections?: number;
}): MetricsReport {
  const zeros = { calls: 0, totalExecTimeMs: 0, meanExecTimeMs: 0, ...ZEROS };
  const total = {
    xactCommit: w.commits ?? 100,
    xactRollback: w.rollbacks ?? 0,
    blksHit: 0,
    blksRead: 0,
    tempFiles: 0,
    tempBytes: 0,
    deadlocks: 0,
  };
  return {
    version: 1,
    interval: { start: '2026-01-01T00:00:00Z', end: '2026-01-01T00:00:05Z', seconds: w.seconds ?? 5, serverRestarted: false },
    derived: {
      calls: w.calls ?? 100,
      avgQueryRuntimeMs: w.runtimeMs ?? 1,
      weightedQueryRuntimeMs: w.runtimeMs ?? 1,
      weightedCoverage: 1,
      tps: 20,
      cacheHitRatio: null,
    },
    statements: { pgssVersion: '1.10', topN: 0, activeStatements: 0, top: [], other: { statements: 0, ...zeros } },
    evictions: { newEntries: 0, reinitializedEntries: 0, evictedEntries: 0, deallocations: 0, statsReset: false },
    database: { total, databases: [] },
    checkpointer: null,
    wal: null,
    activity: {
      maxConnections: w.maxConnections ?? 100,
      connections: { total: w.connections ?? 5, active: 1, idle: 4, idleInTransaction: 0, idleInTransactionAborted: 0, other: 0 },
      activeNotWaiting: 1,
      waitEvents: [],
    },
  };
}

const good: KnownGoodFigures = { weightedRuntimeMs: 1, callsPerSecond: 20, rollbackRate: 0, connectionShare: 0.05 };
const memory = (available: number, total: number): TargetMetric[] => [
  { name: 'memory_available_bytes', value: available, unit: 'bytes', at: '2026-01-01T00:00:05Z', source: 'host' },
  { name: 'memory_total_bytes', value: total, unit: 'bytes', at: '2026-01-01T00:00:05Z', source: 'host' },
];

test('a runtime far over known-good breaches at once; a moderate one only twice in a row', () => {
  assert.match(
    judgeWindow(window({ runtimeMs: 6 }), [], good, 0, false).breaches[0]!,
    /query runtime 6\.000 ms is 6\.0× the known-good 1\.000 ms/,
  );
  const first = judgeWindow(window({ runtimeMs: 3 }), [], good, 0, false);
  assert.deepEqual(first, { breaches: [], slow: true });
  assert.equal(judgeWindow(window({ runtimeMs: 3 }), [], good, 0, first.slow).breaches.length, 1);
  assert.deepEqual(judgeWindow(window({ runtimeMs: 1.5 }), [], good, 0, true), { breaches: [], slow: false });
});

test('too few calls are not judged, and nothing is judged against an unknown known-good runtime', () => {
  assert.deepEqual(judgeWindow(window({ runtimeMs: 50, calls: DEFAULT_THRESHOLDS.minCalls - 1 }), [], good, 0, true).breaches, []);
  assert.deepEqual(judgeWindow(window({ runtimeMs: 50 }), [], { ...good, weightedRuntimeMs: null }, 0, true).breaches, []);
});

test('a stuck workload breaches; an idle one does not', () => {
  assert.match(
    judgeWindow(window({ calls: 2 }), [], good, 3, false).breaches[0]!,
    /throughput fell to 0\.4 calls\/s from 20\.0 with 3 queries running/,
  );
  assert.deepEqual(judgeWindow(window({ calls: 2 }), [], good, 0, false).breaches, []);
});

test('memory, rollbacks and connections each have their own breach', () => {
  assert.match(
    judgeWindow(window({}), memory(0.2 * GiB, 16 * GiB), good, 0, false).breaches[0]!,
    /available memory 205 MB is below the floor of 819 MB/,
  );
  assert.deepEqual(judgeWindow(window({}), memory(4 * GiB, 16 * GiB), good, 0, false).breaches, []);
  assert.match(
    judgeWindow(window({ commits: 50, rollbacks: 50 }), [], good, 0, false).breaches[0]!,
    /50 % of transactions rolled back, known-good 0 %/,
  );
  assert.deepEqual(judgeWindow(window({ commits: 5, rollbacks: 5 }), [], good, 0, false).breaches, [], 'too few rollbacks to judge');
  assert.match(judgeWindow(window({ connections: 97 }), [], good, 0, false).breaches[0]!, /connections at 97 % of max_connections/);
  assert.deepEqual(
    judgeWindow(window({ connections: 97 }), [], { ...good, connectionShare: 0.96 }, 0, false).breaches,
    [],
    'already saturated under known-good',
  );
});

test('thresholds a DBA made stricter in agent.yaml breach where the defaults would not', () => {
  const { thresholds } = guardThresholdsFrom({
    runtimeFactor: 1.5,
    connectionSharePercent: 80,
    memoryFloorPercent: 30,
    allowLooser: false,
  });
  const slow = window({ runtimeMs: 1.8 });
  assert.equal(judgeWindow(slow, [], good, 0, true).breaches.length, 0, 'defaults: 1.8× twice in a row is tolerated');
  assert.match(judgeWindow(slow, [], good, 0, true, thresholds).breaches[0]!, /1\.8× the known-good/);
  assert.deepEqual(judgeWindow(window({ connections: 85 }), [], good, 0, false).breaches, []);
  assert.match(judgeWindow(window({ connections: 85 }), [], good, 0, false, thresholds).breaches[0]!, /connections at 85 %/);
  const quarterFree = memory(4 * GiB, 16 * GiB);
  assert.deepEqual(judgeWindow(window({}), quarterFree, good, 0, false).breaches, []);
  assert.match(judgeWindow(window({}), quarterFree, good, 0, false, thresholds).breaches[0]!, /below the floor of 4915 MB/);
});

// A live trial: a planner-cost configuration that turns an index lookup into a full scan.
let cluster: Cluster;
let db: Db;
let dir: string;
let workload: RangeWorkload | undefined;

before(async () => {
  cluster = await startAgentCluster();
  await createWreckableTable(cluster);
  db = await connectDb(cluster.agentUrl);
  dir = mkdtempSync(join(tmpdir(), 'tuner-guard-'));
});

after(async () => {
  await workload?.stop();
  await db?.close();
  await cluster?.destroy();
  rmSync(dir, { recursive: true, force: true });
});

test('a trial that wrecks query runtime is reverted to known-good by the guard alone', async () => {
  workload = await startRangeWorkload(cluster);
  await guardRevertsWreckingTrial(cluster, db, dir, workload);
});

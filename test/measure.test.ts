import assert from 'node:assert/strict';
import { test } from 'node:test';
import { queryMix, relativeObjective, windowStats } from '../src/measure/objective.ts';
import type { MetricsReport } from '../src/protocol/report.ts';
import { isTopLevel } from '../src/protocol/statement.ts';
import { ZEROS } from './helpers/synthetic-reports.ts';

type Row = { id: string; calls: number; ms: number; toplevel?: boolean };

/** A report holding the given statements; everything else zero. */
function report(rows: Row[], seconds = 10, commits = 100, rollbacks = 0): MetricsReport {
  const zeros = ZEROS;
  const counted = rows.filter((r) => isTopLevel({ toplevel: r.toplevel ?? null }));
  const calls = counted.reduce((s, r) => s + r.calls, 0);
  const exec = counted.reduce((s, r) => s + r.ms, 0);
  return {
    version: 1,
    interval: { start: '2026-01-01T00:00:00Z', end: '2026-01-01T00:00:10Z', seconds, serverRestarted: false },
    derived: {
      calls,
      avgQueryRuntimeMs: calls ? exec / calls : null,
      weightedQueryRuntimeMs: null,
      weightedCoverage: null,
      tps: 10,
      cacheHitRatio: null,
    },
    statements: {
      pgssVersion: '1.10',
      topN: 100,
      activeStatements: rows.length,
      top: rows.map((r) => ({
        queryId: r.id,
        userId: 10,
        dbId: 5,
        toplevel: r.toplevel ?? true,
        calls: r.calls,
        totalExecTimeMs: r.ms,
        meanExecTimeMs: r.ms / r.calls,
        ...zeros,
      })),
      other: { statements: 0, calls: 0, totalExecTimeMs: 0, meanExecTimeMs: 0, ...zeros },
    },
    evictions: { newEntries: 0, reinitializedEntries: 0, evictedEntries: 0, deallocations: 0, statsReset: false },
    database: {
      total: { xactCommit: commits, xactRollback: rollbacks, blksHit: 0, blksRead: 0, tempFiles: 0, tempBytes: 0, deadlocks: 0 },
      databases: [],
    },
    checkpointer: null,
    wal: null,
    activity: {
      maxConnections: 100,
      connections: { total: 1, active: 1, idle: 0, idleInTransaction: 0, idleInTransactionAborted: 0, other: 0 },
      activeNotWaiting: 1,
      waitEvents: [],
    },
  };
}

test('the weighted runtime keeps the baseline mix: a shift toward cheap queries is no win', () => {
  // Baseline: 75 % cheap (1 ms), 25 % expensive (9 ms) over two reports → weighted 3 ms.
  const baselineReports = [
    report([
      { id: '1', calls: 30, ms: 30 },
      { id: '2', calls: 10, ms: 90 },
    ]),
    report([
      { id: '1', calls: 45, ms: 45 },
      { id: '2', calls: 15, ms: 135 },
    ]),
  ];
  const mix = queryMix(baselineReports);
  assert.deepEqual(mix, { '10:5:1:t': 0.75, '10:5:2:t': 0.25 });
  const baseline = windowStats(baselineReports, mix);
  assert.equal(baseline.weightedRuntimeMs, 3);
  assert.equal(baseline.coverage, 1);

  // Same per-query speed, but the workload now runs mostly the cheap query: the plain average
  // drops, the weighted runtime does not.
  const shifted = windowStats(
    [
      report([
        { id: '1', calls: 95, ms: 95 },
        { id: '2', calls: 5, ms: 45 },
      ]),
    ],
    mix,
  );
  assert.equal(shifted.avgRuntimeMs, 1.4);
  assert.equal(shifted.weightedRuntimeMs, 3);
  assert.equal(relativeObjective(shifted, baseline), 1);

  // The expensive query got twice as fast: 0.75 × 1 + 0.25 × 4.5 = 1.875 ms.
  const faster = windowStats(
    [
      report([
        { id: '1', calls: 30, ms: 30 },
        { id: '2', calls: 10, ms: 45 },
      ]),
    ],
    mix,
  );
  assert.equal(relativeObjective(faster, baseline), 1.875 / 3);
});

test('missing statements lower the coverage and are renormalized; nested statements are left out', () => {
  const mix = { '10:5:1:t': 0.75, '10:5:2:t': 0.25 };
  const partial = windowStats(
    [
      report([
        { id: '2', calls: 10, ms: 50 },
        { id: '3', calls: 100, ms: 1000, toplevel: false },
      ]),
    ],
    mix,
  );
  assert.equal(partial.coverage, 0.25);
  assert.equal(partial.weightedRuntimeMs, 5);
  assert.equal(queryMix([report([{ id: '3', calls: 5, ms: 5, toplevel: false }])])['10:5:3:n'], undefined);
  assert.equal(relativeObjective(windowStats([], mix), partial), null);
});

test('TPS and rollback rate over the window', () => {
  const stats = windowStats([report([], 10, 90, 10), report([], 10, 100, 0)], {});
  assert.equal(stats.tps, 10);
  assert.equal(stats.rollbackRate, 0.05);
  assert.equal(stats.seconds, 20);
});

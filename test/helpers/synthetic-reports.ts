// Synthetic report streams for the measure's pure tests: windows of agent reports whose
// statements run at a given speed, with a given call mix, in deterministic (seeded) noise.
import { createRng, type Rng } from '../../src/optimizer/index.ts';
import type { MetricsReport } from '../../src/protocol/report.ts';
import type { WindowReport } from '../../src/measure/contamination.ts';

export interface Statement {
  id: string;
  /** Share of the calls. */
  share: number;
  /** Mean runtime at speed factor 1. */
  ms: number;
}

/** Three statements: a cheap lookup, an update, a report query. */
export const MIX: Statement[] = [
  { id: '101', share: 0.6, ms: 0.2 },
  { id: '102', share: 0.3, ms: 1.5 },
  { id: '103', share: 0.1, ms: 40 },
];

/** A statement row's counters besides calls and time, all zero (or null where versions lack them). */
export const ZEROS = {
  plans: null,
  totalPlanTimeMs: null,
  rows: 0,
  sharedBlksHit: 0,
  sharedBlksRead: 0,
  sharedBlksDirtied: 0,
  sharedBlksWritten: 0,
  tempBlksRead: 0,
  tempBlksWritten: 0,
  blkReadTimeMs: 0,
  blkWriteTimeMs: 0,
  walBytes: null,
};

/** One report of `seconds` from `startMs`, the statements' runtimes multiplied by `factor`. */
export function syntheticReport(
  startMs: number,
  seconds: number,
  statements: readonly Statement[],
  callsPerSecond: number,
  factor: number,
  options: { statsReset?: boolean; restarted?: boolean } = {},
): MetricsReport {
  const rows = statements.map((s) => {
    const calls = Math.max(1, Math.round(s.share * callsPerSecond * seconds));
    return {
      queryId: s.id,
      userId: 10,
      dbId: 5,
      toplevel: true,
      calls,
      totalExecTimeMs: calls * s.ms * factor,
      meanExecTimeMs: s.ms * factor,
      ...ZEROS,
    };
  });
  const calls = rows.reduce((n, r) => n + r.calls, 0);
  const exec = rows.reduce((n, r) => n + r.totalExecTimeMs, 0);
  const xacts = Math.round(calls / 2);
  return {
    version: 1,
    interval: {
      start: new Date(startMs).toISOString(),
      end: new Date(startMs + seconds * 1000).toISOString(),
      seconds,
      serverRestarted: options.restarted ?? false,
    },
    derived: {
      calls,
      avgQueryRuntimeMs: exec / calls,
      weightedQueryRuntimeMs: null,
      weightedCoverage: null,
      tps: xacts / seconds,
      cacheHitRatio: null,
    },
    statements: {
      pgssVersion: '1.10',
      topN: 100,
      activeStatements: rows.length,
      top: rows,
      other: { statements: 0, calls: 0, totalExecTimeMs: 0, meanExecTimeMs: 0, ...ZEROS },
    },
    evictions: { newEntries: 0, reinitializedEntries: 0, evictedEntries: 0, deallocations: 0, statsReset: options.statsReset ?? false },
    database: {
      total: { xactCommit: xacts, xactRollback: 0, blksHit: 0, blksRead: 0, tempFiles: 0, tempBytes: 0, deadlocks: 0 },
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

export interface WindowSpec {
  startMs: number;
  /** Reports in the window, each `reportSeconds` long. */
  reports: number;
  reportSeconds: number;
  callsPerSecond: number;
  /** The speed of the window as a whole: configuration × drift × this window's noise. */
  factor: number;
  statements?: readonly Statement[];
  /** From this report on (index), the statements are these instead. */
  shift?: { at: number; statements: readonly Statement[] };
}

let seq = 0;

/** A window's reports as one agent lease sends them. */
export function syntheticWindow(spec: WindowSpec): WindowReport[] {
  return Array.from({ length: spec.reports }, (_, i) => {
    const statements = spec.shift && i >= spec.shift.at ? spec.shift.statements : (spec.statements ?? MIX);
    return {
      leaseId: 'lease-1',
      seq: seq++,
      metrics: syntheticReport(
        spec.startMs + i * spec.reportSeconds * 1000,
        spec.reportSeconds,
        statements,
        spec.callsPerSecond,
        spec.factor,
      ),
    };
  });
}

/** A load that drifts and is noisy: window i runs at exp(drift × i) × lognormal(σ). */
export function driftingLoad(
  seed: number,
  options: { driftPerWindow: number; noise: number },
): { factor: (window: number) => number; rng: Rng } {
  const rng = createRng('synthetic-load', seed);
  return { factor: (window) => Math.exp(options.driftPerWindow * window + options.noise * rng.normal()), rng };
}

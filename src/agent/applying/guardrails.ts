// Guardrails: while a trial configuration is applied, the agent watches the database in short
// windows and returns to the last known-good configuration by itself when the trial hurts. It
// needs no service: the service may be down, and the database must still be safe.
//
//   judgeWindow()   pure: one window's metrics against the known-good figures → breaches
//   createGuard()   at each tick, judges the window since the last one that held enough calls
import { buildMetricsReport, createCollector, diffSnapshots, type BaselineMix, type Snapshot } from '../collect/index.ts';
import type { Db } from '../database/db.ts';
import { MiB } from '../../knobs/index.ts';
import type { MetricsReport } from '../../protocol/report.ts';
import type { TargetMetric } from '../../protocol/v1.ts';
import { statementsPerSecond, THROUGHPUT_FIGURE } from '../../measure/throughput.ts';
import { DEFAULT_THRESHOLDS, type GuardThresholds } from '../config/guard-thresholds.ts';

// The thresholds are configuration (guardrails.* in agent.yaml), read below the watch.
export { DEFAULT_THRESHOLDS, type GuardThresholds };

/** The known-good configuration's figures, from a report interval measured under it. */
export interface KnownGoodFigures {
  weightedRuntimeMs: number | null;
  /** Throughput: top-level statements per second (src/measure/throughput.ts). */
  callsPerSecond: number;
  rollbackRate: number;
  connectionShare: number;
}

export function knownGoodFigures(report: MetricsReport): KnownGoodFigures {
  const d = report.database.total;
  const xacts = d.xactCommit + d.xactRollback;
  return {
    weightedRuntimeMs: report.derived.weightedQueryRuntimeMs ?? report.derived.avgQueryRuntimeMs,
    callsPerSecond: statementsPerSecond(report),
    rollbackRate: xacts > 0 ? d.xactRollback / xacts : 0,
    connectionShare: report.activity.connections.total / report.activity.maxConnections,
  };
}

export interface WindowJudgement {
  breaches: string[];
  /** The window's runtime was over `runtimeFactor` (counts toward two in a row). */
  slow: boolean;
}

/** Judges one window. `previousSlow`: the window before was also over `runtimeFactor`. */
export function judgeWindow(
  window: MetricsReport,
  targetMetrics: readonly TargetMetric[],
  knownGood: KnownGoodFigures,
  stuckQueries: number,
  previousSlow: boolean,
  t: GuardThresholds = DEFAULT_THRESHOLDS,
): WindowJudgement {
  const breaches: string[] = [];
  let slow = false;
  const runtime = window.derived.weightedQueryRuntimeMs ?? window.derived.avgQueryRuntimeMs;
  if (knownGood.weightedRuntimeMs && runtime !== null && window.derived.calls >= t.minCalls) {
    const factor = runtime / knownGood.weightedRuntimeMs;
    slow = factor > t.runtimeFactor;
    if (factor > t.runtimeFactorAtOnce || (slow && previousSlow)) {
      breaches.push(
        `query runtime ${runtime.toFixed(3)} ms is ${factor.toFixed(1)}× the known-good ${knownGood.weightedRuntimeMs.toFixed(3)} ms`,
      );
    }
  }
  const callsPerSecond = statementsPerSecond(window);
  if (stuckQueries > 0 && knownGood.callsPerSecond > 0 && callsPerSecond < t.throughputFloorShare * knownGood.callsPerSecond) {
    breaches.push(
      `throughput fell to ${callsPerSecond.toFixed(1)} calls/s from ${knownGood.callsPerSecond.toFixed(1)} with ${stuckQueries} queries running over ${t.stuckQuerySeconds} s (throughput in ${THROUGHPUT_FIGURE})`,
    );
  }
  const available = targetMetrics.find((m) => m.name === 'memory_available_bytes')?.value;
  const total = targetMetrics.find((m) => m.name === 'memory_total_bytes')?.value;
  if (available !== undefined && total !== undefined && total > 0) {
    const floor = Math.max(t.memoryFloorShare * total, t.memoryFloorBytes);
    if (available < floor) breaches.push(`available memory ${mb(available)} MB is below the floor of ${mb(floor)} MB`);
  }
  const d = window.database.total;
  const xacts = d.xactCommit + d.xactRollback;
  const rollbackRate = xacts > 0 ? d.xactRollback / xacts : 0;
  if (d.xactRollback >= t.minRollbacks && rollbackRate > knownGood.rollbackRate + t.rollbackRateIncrease) {
    breaches.push(
      `${(rollbackRate * 100).toFixed(0)} % of transactions rolled back, known-good ${(knownGood.rollbackRate * 100).toFixed(0)} %`,
    );
  }
  const connections = window.activity.connections.total / window.activity.maxConnections;
  if (connections >= t.connectionShare && knownGood.connectionShare < t.connectionShare) {
    breaches.push(
      `connections at ${(connections * 100).toFixed(0)} % of max_connections, known-good ${(knownGood.connectionShare * 100).toFixed(0)} %`,
    );
  }
  return { breaches, slow };
}

const mb = (bytes: number) => Math.round(bytes / MiB);

export interface Guard {
  /** Judges the window since the last judged one (or the first tick, which only takes a snapshot). */
  tick(targetMetrics: readonly TargetMetric[]): Promise<string[]>;
}

export function createGuard(
  db: Db,
  knownGood: KnownGoodFigures,
  baselineMix: BaselineMix | undefined,
  thresholds: GuardThresholds = DEFAULT_THRESHOLDS,
): Guard {
  // Its own collector, without texts: a tick must stay cheap.
  const collector = createCollector(db, { includeQueries: false });
  // The window runs from `windowStart` to now. It is closed (the next starts here) once it held
  // enough calls to judge the runtime: a trial that makes each query slow also makes them few per
  // tick, and judging only short windows would never judge it at all.
  let windowStart: Snapshot | null = null;
  let previousSlow = false;
  return {
    async tick(targetMetrics) {
      const current = await collector.collect();
      const before = windowStart;
      if (!before) {
        windowStart = current;
        return [];
      }
      const window = buildMetricsReport(diffSnapshots(before, current), {
        includeQueries: false,
        topN: 0,
        ...(baselineMix && { baselineMix }),
      });
      const [stuck] = await db.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE state = 'active' AND backend_type = 'client backend' AND pid <> pg_backend_pid()
            AND application_name <> 'tuner-agent' AND now() - query_start > make_interval(secs => $1)`,
        [thresholds.stuckQuerySeconds],
      );
      const judgement = judgeWindow(window, targetMetrics, knownGood, stuck?.n ?? 0, previousSlow, thresholds);
      if (window.derived.calls >= thresholds.minCalls) {
        previousSlow = judgement.slow;
        windowStart = current;
      }
      return judgement.breaches;
    },
  };
}

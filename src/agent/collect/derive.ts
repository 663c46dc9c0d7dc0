// The figures the tuner steers by, computed from a delta. Statement figures use top-level
// statements only: with pg_stat_statements.track = all a function's nested statements are
// counted as well, and their time is already inside their caller's.
import { mixOf, topLevelTotals, weightedRuntimeOf } from '../../measure/objective.ts';
import type { DerivedMetrics } from '../../protocol/report.ts';
import { isTopLevel } from '../../protocol/statement.ts';
import { DATABASE_COUNTER_FIELDS, type BaselineMix, type DatabaseCounters, type SnapshotDelta, type StatementDelta } from './types.ts';

export interface RuntimeFigures {
  calls: number;
  execTimeMs: number;
  /** Σ exec time / Σ calls; null without calls. */
  avgQueryRuntimeMs: number | null;
}

export function averageRuntime(statements: readonly StatementDelta[]): RuntimeFigures {
  let calls = 0;
  let execTimeMs = 0;
  for (const s of statements) {
    if (!isTopLevel(s)) continue;
    calls += s.calls;
    execTimeMs += s.totalExecTimeMs;
  }
  return { calls, execTimeMs, avgQueryRuntimeMs: calls > 0 ? execTimeMs / calls : null };
}

/** Each top-level statement's share of the calls in `delta`: the mix to weigh later intervals by
 * (the same measure as the tuning sessions', src/measure/objective.ts). */
export function baselineMixFrom(delta: Pick<SnapshotDelta, 'statements'>): BaselineMix {
  return mixOf(topLevelTotals(delta.statements));
}

export function sumDatabaseCounters(rows: readonly DatabaseCounters[]): DatabaseCounters {
  const total: DatabaseCounters = { xactCommit: 0, xactRollback: 0, blksHit: 0, blksRead: 0, tempFiles: 0, tempBytes: 0, deadlocks: 0 };
  for (const row of rows) for (const f of DATABASE_COUNTER_FIELDS) total[f] += row[f];
  return total;
}

export function transactionsPerSecond(total: DatabaseCounters, seconds: number): number {
  return (total.xactCommit + total.xactRollback) / seconds;
}

export function cacheHitRatio(total: DatabaseCounters): number | null {
  const accesses = total.blksHit + total.blksRead;
  return accesses > 0 ? total.blksHit / accesses : null;
}

export function deriveMetrics(delta: SnapshotDelta, baselineMix?: BaselineMix): DerivedMetrics {
  const runtime = averageRuntime(delta.statements);
  const weighted = baselineMix ? weightedRuntimeOf(topLevelTotals(delta.statements), baselineMix) : null;
  const totals = sumDatabaseCounters(delta.databases);
  return {
    calls: runtime.calls,
    avgQueryRuntimeMs: runtime.avgQueryRuntimeMs,
    weightedQueryRuntimeMs: weighted?.runtimeMs ?? null,
    weightedCoverage: weighted ? weighted.coverage : null,
    tps: transactionsPerSecond(totals, delta.seconds),
    statementsPerSecond: delta.seconds > 0 ? runtime.calls / delta.seconds : 0,
    cacheHitRatio: cacheHitRatio(totals),
  };
}

// The figures the tuner steers by, computed from a delta. Statement figures use top-level
// statements only: with pg_stat_statements.track = all a function's nested statements are
// counted as well, and their time is already inside their caller's.
import type { DerivedMetrics } from '../../protocol/report.ts';
import {
  DATABASE_COUNTER_FIELDS,
  type BaselineMix,
  type DatabaseCounters,
  type SnapshotDelta,
  type StatementDelta,
} from './types.ts';

/** Top-level, or unknown (before 1.9, where nothing tells them apart). */
export function isTopLevel(s: Pick<StatementDelta, 'toplevel'>): boolean {
  return s.toplevel !== false;
}

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

/** Each top-level statement's share of the calls in `delta`: the mix to weigh later intervals by. */
export function baselineMixFrom(delta: Pick<SnapshotDelta, 'statements'>): BaselineMix {
  const { calls } = averageRuntime(delta.statements);
  const mix = new Map<string, number>();
  if (calls === 0) return mix;
  for (const s of delta.statements) if (isTopLevel(s) && s.calls > 0) mix.set(s.key, s.calls / calls);
  return mix;
}

export interface WeightedRuntime {
  /** Σ share_q × mean_q / coverage over statements in both; null when they share none. */
  runtimeMs: number | null;
  /** Σ share_q over the statements in both (0..1). */
  coverage: number;
}

/**
 * The baseline's query mix at today's per-query speed: a shift of the workload toward cheap
 * queries lowers the plain average but not this. Statements that ran in the baseline but not now
 * (or the reverse) are left out, and the result is renormalised by the share that remains.
 */
export function weightedRuntime(statements: readonly StatementDelta[], mix: BaselineMix): WeightedRuntime {
  let coverage = 0;
  let weighted = 0;
  for (const s of statements) {
    if (s.calls === 0) continue;
    const share = mix.get(s.key);
    if (share === undefined || share <= 0) continue;
    coverage += share;
    weighted += share * (s.totalExecTimeMs / s.calls);
  }
  return { runtimeMs: coverage > 0 ? weighted / coverage : null, coverage: Math.min(coverage, 1) };
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
  const weighted = baselineMix ? weightedRuntime(delta.statements, baselineMix) : null;
  const totals = sumDatabaseCounters(delta.databases);
  return {
    calls: runtime.calls,
    avgQueryRuntimeMs: runtime.avgQueryRuntimeMs,
    weightedQueryRuntimeMs: weighted?.runtimeMs ?? null,
    weightedCoverage: weighted ? weighted.coverage : null,
    tps: transactionsPerSecond(totals, delta.seconds),
    cacheHitRatio: cacheHitRatio(totals),
  };
}

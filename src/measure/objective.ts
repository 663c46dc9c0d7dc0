// The measure of a configuration (design.md, "The measure"): the workload's own speed, as the
// average runtime of the *baseline's* query mix at today's per-query speed. Each statement keeps
// the share of calls it had during the baseline window, so a shift toward cheap queries does not
// look like a win. Pure functions over report metrics: the service's tuning sessions and the
// tuning benchmark compute it the same way.
import type { MetricsReport } from '../protocol/report.ts';
import { isTopLevel, statementKey, type StatementIdentifiers, type StatementKey } from '../protocol/statement.ts';

/** Statement key (a StatementKey, kept as stored) → share of the baseline window's top-level calls (the shares sum to 1). */
export type QueryMix = Record<string, number>;

export interface WindowStats {
  /** Σ share × mean runtime over the baseline statements seen in the window, renormalized. */
  weightedRuntimeMs: number | null;
  /** Share of the baseline mix the window saw (0..1); low coverage makes the figure weak. */
  coverage: number;
  /** Plain average runtime of top-level statements in the window. */
  avgRuntimeMs: number | null;
  calls: number;
  seconds: number;
  tps: number;
  /** Rolled back / all transactions. */
  rollbackRate: number;
  /** Mean runtime per call (ms) of each statement of the baseline mix the window ran, by key: what
   * the verification compares statement by statement (windows measured before it have none). */
  statementMs?: Record<string, number>;
}

/** A statement's totals over some time: what a mix and a weighted runtime are computed from. */
export interface StatementTotals {
  calls: number;
  execMs: number;
}

/** Per-statement totals of the top-level statements that ran (a report's rows, or the agent's
 * deltas): nested ones would count their caller twice. */
export function topLevelTotals(
  statements: Iterable<StatementIdentifiers & { readonly calls: number; readonly totalExecTimeMs: number }>,
): Map<StatementKey, StatementTotals> {
  const totals = new Map<StatementKey, StatementTotals>();
  for (const s of statements) {
    if (!isTopLevel(s) || s.calls === 0) continue;
    const key = statementKey(s);
    const t = totals.get(key) ?? { calls: 0, execMs: 0 };
    t.calls += s.calls;
    t.execMs += s.totalExecTimeMs;
    totals.set(key, t);
  }
  return totals;
}

/** Looked up by the keys of stored mixes, which are strings. */
function totalsByStatement(reports: readonly MetricsReport[]): ReadonlyMap<string, StatementTotals> {
  return topLevelTotals(reports.flatMap((r) => r.statements.top));
}

/** Each statement's share of the calls (top-level statements' totals, as topLevelTotals keeps them). */
export function mixOf(totals: ReadonlyMap<string, StatementTotals>): QueryMix {
  const all = [...totals.values()].reduce((sum, t) => sum + t.calls, 0);
  if (all === 0) return {};
  return Object.fromEntries([...totals].filter(([, t]) => t.calls > 0).map(([key, t]) => [key, t.calls / all]));
}

/**
 * The mix at these totals' per-query speed: Σ share × mean runtime over the statements in both,
 * renormalised by the share they cover. A shift of the workload toward cheap queries lowers the
 * plain average but not this; statements of the mix that did not run (or the reverse) are left out.
 */
export function weightedRuntimeOf(
  totals: ReadonlyMap<string, StatementTotals>,
  mix: QueryMix,
): { runtimeMs: number | null; coverage: number } {
  let weighted = 0;
  let coverage = 0;
  for (const [key, share] of Object.entries(mix)) {
    const t = totals.get(key);
    if (!t || t.calls === 0 || share <= 0) continue;
    weighted += share * (t.execMs / t.calls);
    coverage += share;
  }
  return { runtimeMs: coverage > 0 ? weighted / coverage : null, coverage: Math.min(coverage, 1) };
}

/** The call mix of a baseline window. */
export function queryMix(reports: readonly MetricsReport[]): QueryMix {
  return mixOf(totalsByStatement(reports));
}

export function windowStats(reports: readonly MetricsReport[], mix: QueryMix): WindowStats {
  const totals = totalsByStatement(reports);
  const { runtimeMs, coverage } = weightedRuntimeOf(totals, mix);
  const statementMs = Object.fromEntries(
    Object.keys(mix).flatMap((key) => {
      const t = totals.get(key);
      return t && t.calls > 0 ? [[key, Number((t.execMs / t.calls).toPrecision(6))]] : [];
    }),
  );
  const seconds = reports.reduce((s, r) => s + r.interval.seconds, 0);
  const calls = reports.reduce((s, r) => s + r.derived.calls, 0);
  const runtimeSum = reports.reduce((s, r) => s + (r.derived.avgQueryRuntimeMs ?? 0) * r.derived.calls, 0);
  const commits = reports.reduce((s, r) => s + r.database.total.xactCommit, 0);
  const rollbacks = reports.reduce((s, r) => s + r.database.total.xactRollback, 0);
  return {
    weightedRuntimeMs: runtimeMs,
    coverage,
    avgRuntimeMs: calls > 0 ? runtimeSum / calls : null,
    calls,
    seconds,
    tps: seconds > 0 ? (commits + rollbacks) / seconds : 0,
    rollbackRate: commits + rollbacks > 0 ? rollbacks / (commits + rollbacks) : 0,
    statementMs,
  };
}

/** Each statement's share of the window's time at the mix's calls (share × mean runtime, normalised). */
export function timeShares(mix: QueryMix, statementMs: Readonly<Record<string, number>>): Record<string, number> {
  const weighted = Object.entries(mix).flatMap(([key, share]) => {
    const ms = statementMs[key];
    return ms !== undefined && ms > 0 && share > 0 ? [[key, share * ms] as const] : [];
  });
  const total = weighted.reduce((sum, [, w]) => sum + w, 0);
  return total > 0 ? Object.fromEntries(weighted.map(([key, w]) => [key, w / total])) : {};
}

/** The optimizer's objective: the window's weighted runtime relative to the baseline's (1.0 =
 * as fast as the baseline, lower is better); null when either cannot be measured. */
export function relativeObjective(window: WindowStats, baseline: WindowStats): number | null {
  if (window.weightedRuntimeMs === null || baseline.weightedRuntimeMs === null || baseline.weightedRuntimeMs <= 0) return null;
  return window.weightedRuntimeMs / baseline.weightedRuntimeMs;
}

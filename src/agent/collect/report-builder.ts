// From a delta to the report's metrics section: the top N statements by execution time, one
// "other" row summing all the rest (so totals stay exact while the size stays bounded), and the
// server-wide sections. Query text goes in only when include_queries allows it, and then
// without its literals (src/postgres/statement-redaction.ts): --once prints this same report.
import {
  METRICS_REPORT_VERSION,
  REPORT_LIMITS,
  type ActivitySection,
  type CheckpointerSection,
  type DatabaseRow,
  type MetricsReport,
  type OtherStatements,
  type StatementRow,
  type WalSection,
} from '../../protocol/report.ts';
import { redactStatementText } from '../../postgres/statement-redaction.ts';
import { deriveMetrics, sumDatabaseCounters } from './derive.ts';
import type { BaselineMix, SnapshotDelta, StatementCounters, StatementDelta } from './types.ts';

export const DEFAULT_TOP_N = 100;

export interface ReportOptions {
  /** The config's include_queries: when false, no query text goes into the report. */
  includeQueries: boolean;
  /** Statements reported one by one (default 100, at most REPORT_LIMITS.maxTopStatements). */
  topN?: number;
  /** Call mix of the baseline interval, for the weighted runtime. */
  baselineMix?: BaselineMix;
}

/** Microsecond precision is all that timings need, and it shortens the JSON by a third. */
function ms(x: number): number {
  return Math.round(x * 1000) / 1000;
}
function msOrNull(x: number | null): number | null {
  return x === null ? null : ms(x);
}

function countersRow(c: StatementCounters) {
  return {
    calls: c.calls,
    plans: c.plans,
    totalPlanTimeMs: msOrNull(c.totalPlanTimeMs),
    totalExecTimeMs: ms(c.totalExecTimeMs),
    meanExecTimeMs: c.calls > 0 ? ms(c.totalExecTimeMs / c.calls) : 0,
    rows: c.rows,
    sharedBlksHit: c.sharedBlksHit,
    sharedBlksRead: c.sharedBlksRead,
    sharedBlksDirtied: c.sharedBlksDirtied,
    sharedBlksWritten: c.sharedBlksWritten,
    tempBlksRead: c.tempBlksRead,
    tempBlksWritten: c.tempBlksWritten,
    blkReadTimeMs: ms(c.blkReadTimeMs),
    blkWriteTimeMs: ms(c.blkWriteTimeMs),
    walBytes: c.walBytes,
    jitTimeMs: msOrNull(c.jitTimeMs),
  };
}

function statementRow(s: StatementDelta, includeQueries: boolean): StatementRow {
  const row: StatementRow = { queryId: s.queryId, userId: s.userId, dbId: s.dbId, toplevel: s.toplevel, ...countersRow(s) };
  if (includeQueries && s.text !== undefined) row.text = redactStatementText(s.text).slice(0, REPORT_LIMITS.maxQueryTextLength);
  return row;
}

function addNullable(a: number | null, b: number | null): number | null {
  return a === null ? b : b === null ? a : a + b;
}

/** Which nullable counters this pg_stat_statements version has (null ones it lacks). */
export interface NullableCounters {
  planning: boolean;
  walBytes: boolean;
  jit: boolean;
}

export function nullableCountersOf(statements: readonly StatementDelta[]): NullableCounters {
  const first = statements[0];
  return {
    planning: first !== undefined && first.plans !== null,
    walBytes: first !== undefined && first.walBytes !== null,
    jit: first !== undefined && first.jitTimeMs !== null,
  };
}

/** The sum of `rest`; a nullable counter is null when the version lacks it, 0 for no statements. */
export function sumStatements(rest: readonly StatementDelta[], has: NullableCounters): OtherStatements {
  const sum: StatementCounters = {
    calls: 0,
    plans: has.planning ? 0 : null,
    totalPlanTimeMs: has.planning ? 0 : null,
    totalExecTimeMs: 0,
    rows: 0,
    sharedBlksHit: 0,
    sharedBlksRead: 0,
    sharedBlksDirtied: 0,
    sharedBlksWritten: 0,
    tempBlksRead: 0,
    tempBlksWritten: 0,
    blkReadTimeMs: 0,
    blkWriteTimeMs: 0,
    walBytes: has.walBytes ? 0 : null,
    jitTimeMs: has.jit ? 0 : null,
  };
  for (const s of rest) {
    sum.calls += s.calls;
    sum.plans = addNullable(sum.plans, s.plans);
    sum.totalPlanTimeMs = addNullable(sum.totalPlanTimeMs, s.totalPlanTimeMs);
    sum.totalExecTimeMs += s.totalExecTimeMs;
    sum.rows += s.rows;
    sum.sharedBlksHit += s.sharedBlksHit;
    sum.sharedBlksRead += s.sharedBlksRead;
    sum.sharedBlksDirtied += s.sharedBlksDirtied;
    sum.sharedBlksWritten += s.sharedBlksWritten;
    sum.tempBlksRead += s.tempBlksRead;
    sum.tempBlksWritten += s.tempBlksWritten;
    sum.blkReadTimeMs += s.blkReadTimeMs;
    sum.blkWriteTimeMs += s.blkWriteTimeMs;
    sum.walBytes = addNullable(sum.walBytes, s.walBytes);
    sum.jitTimeMs = addNullable(sum.jitTimeMs, s.jitTimeMs);
  }
  return { statements: rest.length, ...countersRow(sum) };
}

/** Highest total execution time first; ties broken by calls, then key, so the order is stable. */
export function byExecTime(a: StatementDelta, b: StatementDelta): number {
  return b.totalExecTimeMs - a.totalExecTimeMs || b.calls - a.calls || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0);
}

function databaseRows(delta: SnapshotDelta): DatabaseRow[] {
  return [...delta.databases]
    .sort((a, b) => b.xactCommit + b.xactRollback - (a.xactCommit + a.xactRollback) || a.datname.localeCompare(b.datname))
    .slice(0, REPORT_LIMITS.maxDatabases)
    .map(({ datid: _datid, datname, ...counters }) => ({ datname: datname.slice(0, REPORT_LIMITS.maxNameLength), ...counters }));
}

function checkpointerSection(delta: SnapshotDelta): CheckpointerSection | null {
  const c = delta.checkpointer;
  if (c === null) return null;
  return {
    source: c.source,
    checkpointsTimed: c.checkpointsTimed,
    checkpointsRequested: c.checkpointsRequested,
    writeTimeMs: ms(c.writeTimeMs),
    syncTimeMs: ms(c.syncTimeMs),
    buffersCheckpoint: c.buffersCheckpoint,
    buffersClean: c.buffersClean,
    maxwrittenClean: c.maxwrittenClean,
    buffersAlloc: c.buffersAlloc,
    buffersBackend: c.buffersBackend,
    buffersBackendFsync: c.buffersBackendFsync,
  };
}

function walSection(delta: SnapshotDelta): WalSection | null {
  const w = delta.wal;
  if (w === null) return null;
  return { ...w, writeTimeMs: msOrNull(w.writeTimeMs), syncTimeMs: msOrNull(w.syncTimeMs) };
}

function activitySection(delta: SnapshotDelta): ActivitySection {
  const a = delta.activity;
  const cut = (s: string) => s.slice(0, REPORT_LIMITS.maxNameLength);
  return {
    maxConnections: a.maxConnections,
    connections: { ...a.connections },
    activeNotWaiting: a.activeNotWaiting,
    waitEvents: a.waitEvents.slice(0, REPORT_LIMITS.maxWaitEvents).map((w) => ({ type: cut(w.type), event: cut(w.event), count: w.count })),
  };
}

export function buildMetricsReport(delta: SnapshotDelta, options: ReportOptions): MetricsReport {
  const topN = options.topN ?? DEFAULT_TOP_N;
  if (!Number.isInteger(topN) || topN < 0 || topN > REPORT_LIMITS.maxTopStatements) {
    throw new RangeError(`topN must be an integer from 0 to ${REPORT_LIMITS.maxTopStatements}, got ${topN}`);
  }
  const sorted = [...delta.statements].sort(byExecTime);
  return {
    version: METRICS_REPORT_VERSION,
    interval: { start: delta.start, end: delta.end, seconds: delta.seconds, serverRestarted: delta.serverRestarted },
    derived: deriveMetrics(delta, options.baselineMix),
    statements: {
      pgssVersion: delta.pgssVersion,
      topN,
      activeStatements: sorted.length,
      top: sorted.slice(0, topN).map((s) => statementRow(s, options.includeQueries)),
      other: sumStatements(sorted.slice(topN), nullableCountersOf(sorted)),
    },
    evictions: { ...delta.evictions },
    database: { total: sumDatabaseCounters(delta.databases), databases: databaseRows(delta) },
    checkpointer: checkpointerSection(delta),
    wal: walSection(delta),
    activity: activitySection(delta),
  };
}

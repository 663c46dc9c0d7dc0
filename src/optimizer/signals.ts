// What the database's own statistics say about where its configuration falls short, summed
// over the reports of one window (the session's baseline): temporary files, checkpoints the WAL
// volume forced, reads that missed the buffer cache. Plain JSON: the tuning session keeps it
// with its baseline, and the optimizer's diagnosis (diagnose.ts) reads it.
import { PAGE_BYTES } from '../knobs/index.ts';
import type { MetricsReport } from '../protocol/report.ts';

/** A statement that wrote temporary files: a sort or hash that did not fit in work_mem. */
export interface Spiller {
  readonly queryId: string;
  readonly calls: number;
  /** Temporary file bytes written per call. */
  readonly tempBytesPerCall: number;
}

export interface WorkloadSignals {
  /** Length of the window the figures cover. */
  readonly seconds: number;
  /** Temporary file bytes written, all databases (pg_stat_database.temp_bytes). */
  readonly tempBytes: number;
  /** The statements that wrote the most temporary bytes, most first (at most MAX_SPILLERS). */
  readonly spillers: readonly Spiller[];
  readonly checkpointsTimed: number;
  /** Checkpoints forced by WAL volume (max_wal_size) or by a command. */
  readonly checkpointsRequested: number;
  /** WAL bytes and full-page images written; null without pg_stat_wal (before PostgreSQL 14). */
  readonly walBytes: number | null;
  readonly walFpi: number | null;
  readonly walRecords: number | null;
  /** Shared buffer hits and reads, all databases. */
  readonly blksHit: number;
  readonly blksRead: number;
  /** Statements' execution time, and the JIT compilation time within it (null before
   * pg_stat_statements 1.10); absent from signals kept before these figures. */
  readonly execMs?: number;
  readonly jitMs?: number | null;
  /** Statements that spent time compiling JIT code. */
  readonly jitStatements?: number;
}

const MAX_SPILLERS = 5;

const sumNullable = (values: ReadonlyArray<number | null | undefined>): number | null =>
  values.some((v) => v === null || v === undefined) ? null : values.reduce<number>((s, v) => s + (v as number), 0);

export function signalsOf(reports: readonly MetricsReport[]): WorkloadSignals {
  const byStatement = new Map<string, { calls: number; tempBlocks: number }>();
  for (const r of reports) {
    for (const row of r.statements.top) {
      if (row.tempBlksWritten === 0) continue;
      const s = byStatement.get(row.queryId) ?? { calls: 0, tempBlocks: 0 };
      s.calls += row.calls;
      s.tempBlocks += row.tempBlksWritten;
      byStatement.set(row.queryId, s);
    }
  }
  const spillers = [...byStatement]
    .filter(([, s]) => s.calls > 0)
    .map(([queryId, s]) => ({ queryId, calls: s.calls, tempBytesPerCall: (s.tempBlocks * PAGE_BYTES) / s.calls }))
    .sort((a, b) => b.tempBytesPerCall * b.calls - a.tempBytesPerCall * a.calls)
    .slice(0, MAX_SPILLERS);
  const sum = (f: (r: MetricsReport) => number) => reports.reduce((s, r) => s + f(r), 0);
  const rows = reports.flatMap((r) => [...r.statements.top, r.statements.other]);
  const jitMs = sumNullable(rows.map((row) => row.jitTimeMs));
  const jitStatements = new Set(
    reports.flatMap((r) => r.statements.top.filter((row) => (row.jitTimeMs ?? 0) > 0).map((row) => row.queryId)),
  );
  return {
    seconds: sum((r) => r.interval.seconds),
    tempBytes: sum((r) => r.database.total.tempBytes),
    spillers,
    checkpointsTimed: sum((r) => r.checkpointer?.checkpointsTimed ?? 0),
    checkpointsRequested: sum((r) => r.checkpointer?.checkpointsRequested ?? 0),
    walBytes: sumNullable(reports.map((r) => r.wal?.bytes)),
    walFpi: sumNullable(reports.map((r) => r.wal?.fpi)),
    walRecords: sumNullable(reports.map((r) => r.wal?.records)),
    blksHit: sum((r) => r.database.total.blksHit),
    blksRead: sum((r) => r.database.total.blksRead),
    execMs: rows.reduce((s, row) => s + row.totalExecTimeMs, 0),
    jitMs,
    jitStatements: jitStatements.size,
  };
}

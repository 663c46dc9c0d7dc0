// What happened between two snapshots. Counters only grow, except when they restart: a reset
// (whole or per entry), an entry evicted and re-created, a crash. A counter group that restarted
// is counted from zero, so its delta is its current value; a delta is therefore never negative,
// at worst an undercount that the eviction figures make visible.
import {
  DATABASE_COUNTER_FIELDS,
  STATEMENT_COUNTER_FIELDS,
  type BgwriterCounters,
  type CheckpointerCounters,
  type CheckpointerDelta,
  type DatabaseDelta,
  type Snapshot,
  type SnapshotDelta,
  type StatementDelta,
  type StatementsSnapshot,
  type WalCounters,
} from './types.ts';

type CounterRecord<K extends string> = { readonly [P in K]: number | null };

const CHECKPOINTER_FIELDS = [
  'checkpointsTimed',
  'checkpointsRequested',
  'writeTimeMs',
  'syncTimeMs',
  'buffersCheckpoint',
  'buffersBackend',
  'buffersBackendFsync',
] as const satisfies readonly (keyof CheckpointerCounters)[];
const BGWRITER_FIELDS = ['buffersClean', 'maxwrittenClean', 'buffersAlloc'] as const satisfies readonly (keyof BgwriterCounters)[];
const WAL_FIELDS = [
  'records',
  'fpi',
  'bytes',
  'buffersFull',
  'write',
  'sync',
  'writeTimeMs',
  'syncTimeMs',
] as const satisfies readonly (keyof WalCounters)[];

/** Some counter went down: the group restarted since `prev`. */
export function decreased<K extends string>(prev: CounterRecord<K>, cur: CounterRecord<K>, fields: readonly K[]): boolean {
  for (const f of fields) {
    const p = prev[f];
    const c = cur[f];
    if (p !== null && c !== null && c < p) return true;
  }
  return false;
}

/** Per-field cur − prev, or cur itself when the group restarted (or has no previous value). */
export function diffCounters<T extends CounterRecord<K>, K extends string>(
  prev: T | undefined,
  cur: T,
  fields: readonly K[],
  restarted: boolean,
): Pick<T, K> {
  const out: Partial<Record<K, number | null>> = {};
  for (const f of fields) {
    const c = cur[f];
    const p = prev?.[f];
    out[f] = c === null ? null : restarted || p === undefined || p === null ? c : c - p;
  }
  // Every field of `fields` was set, and set to null only where `cur` holds null.
  return out as Pick<T, K>;
}

/** stats_since (1.11+) moved: the entry was dropped and re-created. Null on either side (older version) says nothing. */
function sinceChanged(before: string | null, now: string | null): boolean {
  return before !== null && now !== null && before !== now;
}

function diffStatements(prev: StatementsSnapshot, cur: StatementsSnapshot) {
  const statsReset = prev.info !== null && cur.info !== null && prev.info.statsReset !== cur.info.statsReset;
  let newEntries = 0;
  let reinitializedEntries = 0;
  const statements: StatementDelta[] = [];
  for (const entry of cur.entries.values()) {
    const before = prev.entries.get(entry.key);
    // Fast path for the common case, an entry that did not run: no allocation, no field loop.
    if (
      !statsReset &&
      before !== undefined &&
      before.calls === entry.calls &&
      before.plans === entry.plans &&
      before.totalExecTimeMs === entry.totalExecTimeMs &&
      before.statsSince === entry.statsSince
    ) {
      continue;
    }
    let restarted = false;
    if (before === undefined) {
      newEntries += 1;
      restarted = true;
    } else if (statsReset || sinceChanged(before.statsSince, entry.statsSince) || decreased(before, entry, STATEMENT_COUNTER_FIELDS)) {
      reinitializedEntries += 1;
      restarted = true;
    }
    const d = diffCounters(before, entry, STATEMENT_COUNTER_FIELDS, restarted);
    // Entries that did nothing in the interval are left out: most of them, in the steady state.
    if (d.calls === 0 && (d.plans ?? 0) === 0 && d.totalExecTimeMs === 0) continue;
    const delta: StatementDelta = {
      key: entry.key,
      queryId: entry.queryId,
      userId: entry.userId,
      dbId: entry.dbId,
      toplevel: entry.toplevel,
      ...d,
    };
    if (entry.text !== undefined) delta.text = entry.text;
    statements.push(delta);
  }
  let evictedEntries = 0;
  // After a full reset the missing entries were reset, not evicted.
  if (!statsReset) for (const key of prev.entries.keys()) if (!cur.entries.has(key)) evictedEntries += 1;

  let deallocations: number | null = null;
  if (prev.info !== null && cur.info !== null) {
    // The reset zeroes dealloc too.
    const restarted = statsReset || cur.info.dealloc < prev.info.dealloc;
    deallocations = restarted ? cur.info.dealloc : cur.info.dealloc - prev.info.dealloc;
  }
  return { statements, evictions: { newEntries, reinitializedEntries, evictedEntries, deallocations, statsReset } };
}

function diffDatabases(prev: Snapshot['databases'], cur: Snapshot['databases']): DatabaseDelta[] {
  const out: DatabaseDelta[] = [];
  for (const entry of cur.values()) {
    const before = prev.get(entry.datid);
    const restarted = before === undefined || before.statsReset !== entry.statsReset || decreased(before, entry, DATABASE_COUNTER_FIELDS);
    out.push({ datid: entry.datid, datname: entry.datname, ...diffCounters(before, entry, DATABASE_COUNTER_FIELDS, restarted) });
  }
  return out;
}

function diffCheckpointer(prev: Snapshot['checkpointer'], cur: Snapshot['checkpointer']): CheckpointerDelta | null {
  if (cur === null) return null;
  // A different source means a major upgrade in between: nothing to subtract from.
  const before = prev !== null && prev.source === cur.source ? prev : undefined;
  // On 17+ the two groups are reset separately (pg_stat_reset_shared('checkpointer'/'bgwriter')).
  const cpRestarted =
    before === undefined ||
    before.checkpointerStatsReset !== cur.checkpointerStatsReset ||
    decreased(before.checkpointer, cur.checkpointer, CHECKPOINTER_FIELDS);
  const bgRestarted =
    before === undefined ||
    before.bgwriterStatsReset !== cur.bgwriterStatsReset ||
    decreased(before.bgwriter, cur.bgwriter, BGWRITER_FIELDS);
  return {
    source: cur.source,
    ...diffCounters(before?.checkpointer, cur.checkpointer, CHECKPOINTER_FIELDS, cpRestarted),
    ...diffCounters(before?.bgwriter, cur.bgwriter, BGWRITER_FIELDS, bgRestarted),
  };
}

function diffWal(prev: Snapshot['wal'], cur: Snapshot['wal']): WalCounters | null {
  if (cur === null) return null;
  const before = prev ?? undefined;
  const restarted = before === undefined || before.statsReset !== cur.statsReset || decreased(before, cur, WAL_FIELDS);
  return diffCounters(before, cur, WAL_FIELDS, restarted);
}

export function diffSnapshots(prev: Snapshot, cur: Snapshot): SnapshotDelta {
  const seconds = (cur.takenAtMs - prev.takenAtMs) / 1000;
  if (!(seconds > 0)) throw new RangeError(`snapshots out of order: ${prev.takenAt} is not before ${cur.takenAt}`);
  const { statements, evictions } = diffStatements(prev.statements, cur.statements);
  return {
    start: prev.takenAt,
    end: cur.takenAt,
    seconds,
    serverRestarted: prev.postmasterStartTime !== cur.postmasterStartTime,
    pgssVersion: cur.statements.pgssVersion,
    statements,
    evictions,
    databases: diffDatabases(prev.databases, cur.databases),
    checkpointer: diffCheckpointer(prev.checkpointer, cur.checkpointer),
    wal: diffWal(prev.wal, cur.wal),
    activity: cur.activity,
  };
}

// The data that flows through collection: snapshots (cumulative counters as PostgreSQL shows
// them at one instant) and deltas (what happened between two snapshots). Snapshots hold Maps and
// stay inside the agent; only the report built from a delta leaves it.
import type { QueryMix } from '../../measure/objective.ts';
import type { StatementKey } from '../../protocol/statement.ts';
import type { Db } from '../database/db.ts';

/** All that collection needs of the agent's session. */
export type Queryable = Pick<Db, 'query'>;

/** Cumulative counters of one pg_stat_statements entry (nullable where old versions lack them). */
export interface StatementCounters {
  calls: number;
  plans: number | null;
  totalPlanTimeMs: number | null;
  totalExecTimeMs: number;
  rows: number;
  sharedBlksHit: number;
  sharedBlksRead: number;
  sharedBlksDirtied: number;
  sharedBlksWritten: number;
  tempBlksRead: number;
  tempBlksWritten: number;
  blkReadTimeMs: number;
  blkWriteTimeMs: number;
  walBytes: number | null;
  /** Time spent compiling the statement's JIT code (generation, inlining, optimization,
   * emission); null before pg_stat_statements 1.10. */
  jitTimeMs: number | null;
}

/** The fields above, for loops that treat every counter alike. */
export const STATEMENT_COUNTER_FIELDS = [
  'calls',
  'plans',
  'totalPlanTimeMs',
  'totalExecTimeMs',
  'rows',
  'sharedBlksHit',
  'sharedBlksRead',
  'sharedBlksDirtied',
  'sharedBlksWritten',
  'tempBlksRead',
  'tempBlksWritten',
  'blkReadTimeMs',
  'blkWriteTimeMs',
  'walBytes',
  'jitTimeMs',
] as const satisfies readonly (keyof StatementCounters)[];

/** pg_stat_statements' own entry key: (userid, dbid, queryid, toplevel). */
export interface StatementIdentity {
  key: StatementKey;
  queryId: string;
  userId: number;
  dbId: number;
  /** Null before 1.9. */
  toplevel: boolean | null;
}

export interface StatementEntry extends StatementIdentity, StatementCounters {
  /** When this entry's counters started (1.11+); a change means the entry was re-created. */
  statsSince: string | null;
  /** Query text, only when the collector runs with includeQueries. */
  text?: string;
}

export interface StatementsSnapshot {
  pgssVersion: string;
  /** The workload's entries; the agent's own are left out. */
  entries: Map<string, StatementEntry>;
  /** pg_stat_statements_info (1.9+). */
  info: { dealloc: number; statsReset: string | null } | null;
  /** Entries whose text (or own-ness) was fetched in this collection: 0 in the steady state. */
  textsFetched: number;
}

export interface DatabaseCounters {
  xactCommit: number;
  xactRollback: number;
  blksHit: number;
  blksRead: number;
  tempFiles: number;
  tempBytes: number;
  deadlocks: number;
}

export const DATABASE_COUNTER_FIELDS = [
  'xactCommit',
  'xactRollback',
  'blksHit',
  'blksRead',
  'tempFiles',
  'tempBytes',
  'deadlocks',
] as const satisfies readonly (keyof DatabaseCounters)[];

export interface DatabaseEntry extends DatabaseCounters {
  datid: number;
  datname: string;
  statsReset: string | null;
}

/** Counters owned by the checkpointer (pg_stat_bgwriter ≤ 16, pg_stat_checkpointer 17+). */
export interface CheckpointerCounters {
  checkpointsTimed: number;
  checkpointsRequested: number;
  writeTimeMs: number;
  syncTimeMs: number;
  buffersCheckpoint: number;
  /** Counted by backends, not the checkpointer, but reset with it on ≤ 16; gone in 17. */
  buffersBackend: number | null;
  buffersBackendFsync: number | null;
}

/** Counters owned by the background writer (pg_stat_bgwriter on every version). */
export interface BgwriterCounters {
  buffersClean: number;
  maxwrittenClean: number;
  buffersAlloc: number;
}

export interface CheckpointerSnapshot {
  source: 'pg_stat_bgwriter' | 'pg_stat_checkpointer';
  checkpointer: CheckpointerCounters;
  checkpointerStatsReset: string | null;
  bgwriter: BgwriterCounters;
  bgwriterStatsReset: string | null;
}

export interface WalCounters {
  records: number;
  fpi: number;
  bytes: number;
  buffersFull: number;
  write: number | null;
  sync: number | null;
  writeTimeMs: number | null;
  syncTimeMs: number | null;
}

export interface WalSnapshot extends WalCounters {
  statsReset: string | null;
}

/** Gauges at one instant: client backends by state and the waits of the active ones. */
export interface ActivitySample {
  maxConnections: number;
  connections: {
    total: number;
    active: number;
    idle: number;
    idleInTransaction: number;
    idleInTransactionAborted: number;
    other: number;
  };
  activeNotWaiting: number;
  waitEvents: { type: string; event: string; count: number }[];
}

export interface Snapshot {
  /** Server clock (clock_timestamp()) when the snapshot was taken. */
  takenAt: string;
  takenAtMs: number;
  postmasterStartTime: string;
  serverVersionNum: number;
  statements: StatementsSnapshot;
  /** By datid. */
  databases: Map<number, DatabaseEntry>;
  checkpointer: CheckpointerSnapshot | null;
  /** Null before PostgreSQL 14. */
  wal: WalSnapshot | null;
  activity: ActivitySample;
  /** What taking this snapshot cost the agent. */
  cost: { queries: number; wallMs: number };
}

export interface StatementDelta extends StatementIdentity, StatementCounters {
  text?: string;
}

export interface EvictionInfo {
  newEntries: number;
  reinitializedEntries: number;
  evictedEntries: number;
  deallocations: number | null;
  statsReset: boolean;
}

export interface DatabaseDelta extends DatabaseCounters {
  datid: number;
  datname: string;
}

export interface CheckpointerDelta extends CheckpointerCounters, BgwriterCounters {
  source: CheckpointerSnapshot['source'];
}

export interface SnapshotDelta {
  start: string;
  end: string;
  seconds: number;
  serverRestarted: boolean;
  pgssVersion: string;
  /** Every entry that ran or was planned in the interval (not only the top N). */
  statements: StatementDelta[];
  evictions: EvictionInfo;
  databases: DatabaseDelta[];
  checkpointer: CheckpointerDelta | null;
  wal: WalCounters | null;
  /** Gauges at the end of the interval. */
  activity: ActivitySample;
}

/** A baseline's per-statement share of calls: statement key → share (the shares sum to 1). */
export type BaselineMix = Readonly<QueryMix>;

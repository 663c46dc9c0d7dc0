// The metrics section of an agent report: what one collection interval measured. The tuning
// service validates every report it receives with this schema, so it is strict (unknown keys are
// rejected) and bounded (every array and string has a maximum), and holds plain JSON only.
// Counters are deltas over the interval; gauges (connections, waits) are the value at its end.
import { z } from 'zod';

export const METRICS_REPORT_VERSION = 1;

/** Upper bounds that keep one report small whatever the database holds. */
export const REPORT_LIMITS = {
  /** Most statements reported one by one; the rest are summed into one "other" row. */
  maxTopStatements: 500,
  /** Query text is cut to this many characters (UTF-16 code units). */
  maxQueryTextLength: 4096,
  /** Databases listed one by one (the total always covers all of them). */
  maxDatabases: 200,
  /** Distinct (type, event) wait pairs listed. */
  maxWaitEvents: 200,
  /** PostgreSQL identifiers (datname, wait event names) are at most 63 bytes. */
  maxNameLength: 128,
} as const;

/** A non-negative counter delta; safe integers only, as JSON numbers must round-trip. */
const count = z.number().int().nonnegative();
/** A duration in milliseconds. */
const millis = z.number().nonnegative();
const ratio = z.number().min(0).max(1);
const oid = z.number().int().min(0).max(4_294_967_295);
/** pg_stat_statements' queryid is a signed 64-bit integer: sent as a decimal string so it stays exact. */
const queryId = z.string().regex(/^-?\d{1,20}$/);
const name = z.string().max(REPORT_LIMITS.maxNameLength);
const timestamp = z.iso.datetime({ offset: true });

/** Counter deltas of one statement (or of a group of statements). */
const statementCountersShape = {
  calls: count,
  /** Null before pg_stat_statements 1.8 (no planning statistics). */
  plans: count.nullable(),
  totalPlanTimeMs: millis.nullable(),
  totalExecTimeMs: millis,
  /** totalExecTimeMs / calls, 0 when there were no calls. */
  meanExecTimeMs: millis,
  rows: count,
  sharedBlksHit: count,
  sharedBlksRead: count,
  sharedBlksDirtied: count,
  sharedBlksWritten: count,
  tempBlksRead: count,
  tempBlksWritten: count,
  /** Time reading/writing shared blocks; 0 unless track_io_timing is on. */
  blkReadTimeMs: millis,
  blkWriteTimeMs: millis,
  /** Null before pg_stat_statements 1.8. */
  walBytes: count.nullable(),
  /** JIT compilation time (generation, inlining, optimization, emission); null before
   * pg_stat_statements 1.10, absent from agents older than this field. */
  jitTimeMs: millis.nullable().optional(),
};

export const StatementRowSchema = z.strictObject({
  queryId,
  userId: oid,
  dbId: oid,
  /** Null before pg_stat_statements 1.9, which does not tell top-level from nested statements. */
  toplevel: z.boolean().nullable(),
  ...statementCountersShape,
  /** Present only when the agent's include_queries is true. */
  text: z.string().max(REPORT_LIMITS.maxQueryTextLength).optional(),
});

/** Everything outside the top N, summed: so that the totals stay right at any number of statements. */
export const OtherStatementsSchema = z.strictObject({
  statements: count,
  ...statementCountersShape,
});

export const StatementsSectionSchema = z
  .strictObject({
    pgssVersion: z.string().regex(/^\d{1,3}(\.\d{1,3}){0,2}$/),
    /** The N the agent used; `top` holds at most this many rows. */
    topN: z.number().int().min(0).max(REPORT_LIMITS.maxTopStatements),
    /** Statements that ran (or were planned) in the interval: top plus other. */
    activeStatements: count,
    /** Sorted by totalExecTimeMs, highest first. */
    top: z.array(StatementRowSchema).max(REPORT_LIMITS.maxTopStatements),
    other: OtherStatementsSchema,
  })
  .refine((s) => s.top.length <= s.topN, { message: 'more top statements than topN' })
  .refine((s) => s.top.length + s.other.statements === s.activeStatements, {
    message: 'top + other.statements must equal activeStatements',
  });

/** How complete the statement figures are: entries that came, were re-created, or vanished. */
export const EvictionsSchema = z.strictObject({
  /** Entries that did not exist at the start of the interval (their whole value is the delta). */
  newEntries: count,
  /** Entries whose counters restarted (reset, re-creation): counted from zero. */
  reinitializedEntries: count,
  /** Entries present at the start and gone at the end: evicted (or reset one by one). */
  evictedEntries: count,
  /** Delta of pg_stat_statements_info.dealloc: evictions rounds, each dropping ~5% of entries. Null before 1.9. */
  deallocations: count.nullable(),
  /** pg_stat_statements was reset as a whole in the interval. */
  statsReset: z.boolean(),
});

const databaseCountersShape = {
  xactCommit: count,
  xactRollback: count,
  blksHit: count,
  blksRead: count,
  tempFiles: count,
  tempBytes: count,
  deadlocks: count,
};
export const DatabaseCountersSchema = z.strictObject(databaseCountersShape);
export const DatabaseRowSchema = z.strictObject({ datname: name, ...databaseCountersShape });

export const DatabaseSectionSchema = z.strictObject({
  /** Summed over every database, including those not listed. */
  total: DatabaseCountersSchema,
  /** The busiest databases by transactions, at most maxDatabases. */
  databases: z.array(DatabaseRowSchema).max(REPORT_LIMITS.maxDatabases),
});

export const CheckpointerSectionSchema = z.strictObject({
  /** pg_stat_bgwriter up to PostgreSQL 16; pg_stat_checkpointer (+ pg_stat_bgwriter) from 17. */
  source: z.enum(['pg_stat_bgwriter', 'pg_stat_checkpointer']),
  checkpointsTimed: count,
  checkpointsRequested: count,
  writeTimeMs: millis,
  syncTimeMs: millis,
  buffersCheckpoint: count,
  buffersClean: count,
  maxwrittenClean: count,
  buffersAlloc: count,
  /** Gone from PostgreSQL 17 (moved to pg_stat_io). */
  buffersBackend: count.nullable(),
  buffersBackendFsync: count.nullable(),
});

export const WalSectionSchema = z.strictObject({
  records: count,
  fpi: count,
  bytes: count,
  buffersFull: count,
  /** Gone from PostgreSQL 18 (moved to pg_stat_io). */
  write: count.nullable(),
  sync: count.nullable(),
  writeTimeMs: millis.nullable(),
  syncTimeMs: millis.nullable(),
});

export const ActivitySectionSchema = z.strictObject({
  maxConnections: z.number().int().positive(),
  /** Client backends at the end of the interval, the agent's own session left out. */
  connections: z.strictObject({
    total: count,
    active: count,
    idle: count,
    idleInTransaction: count,
    idleInTransactionAborted: count,
    other: count,
  }),
  /** Active client sessions not waiting on anything (running on CPU, or in an untracked wait). */
  activeNotWaiting: count,
  /** Active client sessions by wait event, most frequent first. */
  waitEvents: z.array(z.strictObject({ type: name, event: name, count: count.positive() })).max(REPORT_LIMITS.maxWaitEvents),
});

export const IntervalSchema = z.strictObject({
  start: timestamp,
  end: timestamp,
  /** Length of the interval by the server's clock. */
  seconds: z.number().positive(),
  /** The server restarted in the interval (its counters may have restarted too). */
  serverRestarted: z.boolean(),
});

export const DerivedMetricsSchema = z.strictObject({
  /** Σ calls of top-level statements (nested ones would count their caller's time twice). */
  calls: count,
  /** Σ execution time / Σ calls over top-level statements; null without calls. */
  avgQueryRuntimeMs: millis.nullable(),
  /**
   * Σ share_q × mean_q over statements in both the baseline mix and this interval, divided by the
   * covered share: the runtime of the baseline's query mix at today's speed. Null without a baseline.
   */
  weightedQueryRuntimeMs: millis.nullable(),
  /** Share of the baseline's calls that the weighted runtime covers (0..1). */
  weightedCoverage: ratio.nullable(),
  /** (commits + rollbacks) / seconds, all databases (pg_stat_database). On PostgreSQL 15 and
   * later a backend publishes these counters only when it goes idle or exits, so a busy pool's
   * commits arrive late and in bursts: shown as commits/s, never used as the throughput. */
  tps: z.number().nonnegative(),
  /** Top-level statements completed per second (pg_stat_statements calls / seconds): counted as
   * each statement finishes, so current under steady load. The throughput the dashboard and the
   * guardrails use. Optional: agents before it do not send it (src/measure/throughput.ts falls
   * back to calls / seconds, the same figure). */
  statementsPerSecond: z.number().nonnegative().optional(),
  /** blks_hit / (blks_hit + blks_read), all databases; null without block access. */
  cacheHitRatio: ratio.nullable(),
});

export const MetricsReportSchema = z.strictObject({
  version: z.literal(METRICS_REPORT_VERSION),
  interval: IntervalSchema,
  derived: DerivedMetricsSchema,
  statements: StatementsSectionSchema,
  evictions: EvictionsSchema,
  database: DatabaseSectionSchema,
  /** Null if the server exposes neither view. */
  checkpointer: CheckpointerSectionSchema.nullable(),
  /** Null before PostgreSQL 14 (no pg_stat_wal). */
  wal: WalSectionSchema.nullable(),
  activity: ActivitySectionSchema,
});

export type StatementRow = z.infer<typeof StatementRowSchema>;
export type OtherStatements = z.infer<typeof OtherStatementsSchema>;
export type StatementsSection = z.infer<typeof StatementsSectionSchema>;
export type Evictions = z.infer<typeof EvictionsSchema>;
export type DatabaseCounters = z.infer<typeof DatabaseCountersSchema>;
export type DatabaseRow = z.infer<typeof DatabaseRowSchema>;
export type DatabaseSection = z.infer<typeof DatabaseSectionSchema>;
export type CheckpointerSection = z.infer<typeof CheckpointerSectionSchema>;
export type WalSection = z.infer<typeof WalSectionSchema>;
export type ActivitySection = z.infer<typeof ActivitySectionSchema>;
export type ReportInterval = z.infer<typeof IntervalSchema>;
export type DerivedMetrics = z.infer<typeof DerivedMetricsSchema>;
export type MetricsReport = z.infer<typeof MetricsReportSchema>;

// Server-wide statistics besides statements: the clock, pg_stat_database, the checkpointer and
// background writer, pg_stat_wal, and client activity. Each source is one small query whose SQL
// is built from the columns the server has (see columns.ts) and whose rows are parsed here.
import { AGENT_APPLICATION_NAME } from '../database/db.ts';
import { pick, type Capabilities, type RelationColumns } from './columns.ts';
import { toCount, toCountOrNull, toInt, toIso, toIsoOrNull, toNumber, toText, toTextOrNull, type Row } from './parse.ts';
import type { ActivitySample, CheckpointerSnapshot, DatabaseEntry, Queryable, WalSnapshot } from './types.ts';

export interface ServerClock {
  takenAtMs: number;
  postmasterStartTime: string;
  maxConnections: number;
}

// Epoch milliseconds as float8 keep the microseconds that a JS Date would drop.
const SERVER_SQL = `SELECT (extract(epoch FROM clock_timestamp()) * 1000)::float8 AS now_ms,
       pg_postmaster_start_time() AS started,
       current_setting('max_connections')::int AS max_connections`;

export async function readServerClock(db: Queryable): Promise<ServerClock> {
  const [row] = await db.query<Row>(SERVER_SQL);
  if (!row) throw new Error('server clock query returned no row');
  return {
    takenAtMs: toNumber(row['now_ms'], 'now_ms'),
    postmasterStartTime: toIso(row['started'], 'started'),
    maxConnections: toInt(row['max_connections'], 'max_connections'),
  };
}

const DATABASE_SQL = `SELECT datid, datname, xact_commit, xact_rollback, blks_hit, blks_read,
       temp_files, temp_bytes, deadlocks, stats_reset
  FROM pg_catalog.pg_stat_database
 WHERE datname IS NOT NULL`;

export function parseDatabaseRow(row: Row): DatabaseEntry {
  return {
    datid: toInt(row['datid'], 'datid'),
    datname: toText(row['datname'], 'datname'),
    xactCommit: toCount(row['xact_commit'], 'xact_commit'),
    xactRollback: toCount(row['xact_rollback'], 'xact_rollback'),
    blksHit: toCount(row['blks_hit'], 'blks_hit'),
    blksRead: toCount(row['blks_read'], 'blks_read'),
    tempFiles: toCount(row['temp_files'], 'temp_files'),
    tempBytes: toCount(row['temp_bytes'], 'temp_bytes'),
    deadlocks: toCount(row['deadlocks'], 'deadlocks'),
    statsReset: toIsoOrNull(row['stats_reset'], 'stats_reset'),
  };
}

export async function readDatabases(db: Queryable): Promise<Map<number, DatabaseEntry>> {
  const rows = await db.query<Row>(DATABASE_SQL);
  return new Map(
    rows.map((row) => {
      const entry = parseDatabaseRow(row);
      return [entry.datid, entry];
    }),
  );
}

/**
 * Checkpointer and background-writer counters. Up to PostgreSQL 16 both live in pg_stat_bgwriter;
 * 17 moved the checkpointer's into pg_stat_checkpointer (renamed) and dropped the backend ones.
 */
export function buildCheckpointerSql(bgwriter: RelationColumns, checkpointer: RelationColumns | null): string {
  const b = bgwriter.columns;
  const bgwriterColumns = [
    pick(b, 'buffers_clean', ['buffers_clean'], undefined, 'b'),
    pick(b, 'maxwritten_clean', ['maxwritten_clean'], undefined, 'b'),
    pick(b, 'buffers_alloc', ['buffers_alloc'], undefined, 'b'),
    pick(b, 'bgwriter_stats_reset', ['stats_reset'], 'NULL::timestamptz', 'b'),
  ];
  const src = checkpointer ?? bgwriter;
  const c = src.columns;
  const q = checkpointer ? 'c' : 'b';
  const checkpointerColumns = [
    pick(c, 'checkpoints_timed', ['num_timed', 'checkpoints_timed'], undefined, q),
    pick(c, 'checkpoints_req', ['num_requested', 'checkpoints_req'], undefined, q),
    pick(c, 'checkpoint_write_time', ['write_time', 'checkpoint_write_time'], undefined, q),
    pick(c, 'checkpoint_sync_time', ['sync_time', 'checkpoint_sync_time'], undefined, q),
    pick(c, 'buffers_checkpoint', ['buffers_written', 'buffers_checkpoint'], undefined, q),
    pick(c, 'buffers_backend', ['buffers_backend'], 'NULL::bigint', q),
    pick(c, 'buffers_backend_fsync', ['buffers_backend_fsync'], 'NULL::bigint', q),
    pick(c, 'checkpointer_stats_reset', ['stats_reset'], 'NULL::timestamptz', q),
  ];
  const from = checkpointer ? `${checkpointer.name} c CROSS JOIN ${bgwriter.name} b` : `${bgwriter.name} b`;
  return `SELECT ${[...checkpointerColumns, ...bgwriterColumns].join(', ')} FROM ${from}`;
}

export function parseCheckpointerRow(row: Row, source: CheckpointerSnapshot['source']): CheckpointerSnapshot {
  return {
    source,
    checkpointer: {
      checkpointsTimed: toCount(row['checkpoints_timed'], 'checkpoints_timed'),
      checkpointsRequested: toCount(row['checkpoints_req'], 'checkpoints_req'),
      writeTimeMs: toCount(row['checkpoint_write_time'], 'checkpoint_write_time'),
      syncTimeMs: toCount(row['checkpoint_sync_time'], 'checkpoint_sync_time'),
      buffersCheckpoint: toCount(row['buffers_checkpoint'], 'buffers_checkpoint'),
      buffersBackend: toCountOrNull(row['buffers_backend'], 'buffers_backend'),
      buffersBackendFsync: toCountOrNull(row['buffers_backend_fsync'], 'buffers_backend_fsync'),
    },
    checkpointerStatsReset: toIsoOrNull(row['checkpointer_stats_reset'], 'checkpointer_stats_reset'),
    bgwriter: {
      buffersClean: toCount(row['buffers_clean'], 'buffers_clean'),
      maxwrittenClean: toCount(row['maxwritten_clean'], 'maxwritten_clean'),
      buffersAlloc: toCount(row['buffers_alloc'], 'buffers_alloc'),
    },
    bgwriterStatsReset: toIsoOrNull(row['bgwriter_stats_reset'], 'bgwriter_stats_reset'),
  };
}

/** pg_stat_wal (14+); 18 moved write/sync counts and times to pg_stat_io. */
export function buildWalSql(wal: RelationColumns): string {
  const c = wal.columns;
  return `SELECT ${[
    pick(c, 'wal_records', ['wal_records']),
    pick(c, 'wal_fpi', ['wal_fpi']),
    pick(c, 'wal_bytes', ['wal_bytes']),
    pick(c, 'wal_buffers_full', ['wal_buffers_full'], '0::bigint'),
    pick(c, 'wal_write', ['wal_write'], 'NULL::bigint'),
    pick(c, 'wal_sync', ['wal_sync'], 'NULL::bigint'),
    pick(c, 'wal_write_time', ['wal_write_time'], 'NULL::float8'),
    pick(c, 'wal_sync_time', ['wal_sync_time'], 'NULL::float8'),
    pick(c, 'stats_reset', ['stats_reset'], 'NULL::timestamptz'),
  ].join(', ')} FROM ${wal.name}`;
}

export function parseWalRow(row: Row): WalSnapshot {
  return {
    records: toCount(row['wal_records'], 'wal_records'),
    fpi: toCount(row['wal_fpi'], 'wal_fpi'),
    bytes: toCount(row['wal_bytes'], 'wal_bytes'),
    buffersFull: toCount(row['wal_buffers_full'], 'wal_buffers_full'),
    write: toCountOrNull(row['wal_write'], 'wal_write'),
    sync: toCountOrNull(row['wal_sync'], 'wal_sync'),
    writeTimeMs: toCountOrNull(row['wal_write_time'], 'wal_write_time'),
    syncTimeMs: toCountOrNull(row['wal_sync_time'], 'wal_sync_time'),
    statsReset: toIsoOrNull(row['stats_reset'], 'stats_reset'),
  };
}

/**
 * Client backends by state and wait event, one row per combination. The agent's own sessions
 * are left out twice over: this one by pid, any other by its application_name.
 */
const ACTIVITY_SQL = `SELECT state, wait_event_type, wait_event, count(*)::int AS n
  FROM pg_catalog.pg_stat_activity
 WHERE backend_type = 'client backend'
   AND pid <> pg_backend_pid()
   AND application_name IS DISTINCT FROM $1
 GROUP BY 1, 2, 3`;

export function activityFromRows(rows: readonly Row[], maxConnections: number): ActivitySample {
  const connections = { total: 0, active: 0, idle: 0, idleInTransaction: 0, idleInTransactionAborted: 0, other: 0 };
  const waits = new Map<string, { type: string; event: string; count: number }>();
  let activeNotWaiting = 0;
  for (const row of rows) {
    const n = toInt(row['n'], 'n');
    const state = toTextOrNull(row['state'], 'state');
    connections.total += n;
    if (state === 'active') connections.active += n;
    else if (state === 'idle') connections.idle += n;
    else if (state === 'idle in transaction') connections.idleInTransaction += n;
    else if (state === 'idle in transaction (aborted)') connections.idleInTransactionAborted += n;
    else connections.other += n;
    if (state !== 'active') continue;
    const type = toTextOrNull(row['wait_event_type'], 'wait_event_type');
    const event = toTextOrNull(row['wait_event'], 'wait_event');
    if (type === null || event === null) {
      activeNotWaiting += n;
      continue;
    }
    const id = `${type}\u0000${event}`;
    const seen = waits.get(id);
    if (seen) seen.count += n;
    else waits.set(id, { type, event, count: n });
  }
  const waitEvents = [...waits.values()].sort(
    (a, b) => b.count - a.count || a.type.localeCompare(b.type) || a.event.localeCompare(b.event),
  );
  return { maxConnections, connections, activeNotWaiting, waitEvents };
}

export async function readActivity(db: Queryable, maxConnections: number): Promise<ActivitySample> {
  return activityFromRows(await db.query<Row>(ACTIVITY_SQL, [AGENT_APPLICATION_NAME]), maxConnections);
}

export interface StatsSql {
  checkpointer: { sql: string; source: CheckpointerSnapshot['source'] } | null;
  wal: string | null;
}

export function buildStatsSql(capabilities: Capabilities): StatsSql {
  const { bgwriter, checkpointer, wal } = capabilities;
  return {
    checkpointer: bgwriter
      ? { sql: buildCheckpointerSql(bgwriter, checkpointer), source: checkpointer ? 'pg_stat_checkpointer' : 'pg_stat_bgwriter' }
      : null,
    wal: wal ? buildWalSql(wal) : null,
  };
}

export async function readCheckpointer(db: Queryable, sql: StatsSql['checkpointer']): Promise<CheckpointerSnapshot | null> {
  if (!sql) return null;
  const [row] = await db.query<Row>(sql.sql);
  return row ? parseCheckpointerRow(row, sql.source) : null;
}

export async function readWal(db: Queryable, sql: string | null): Promise<WalSnapshot | null> {
  if (sql === null) return null;
  const [row] = await db.query<Row>(sql);
  return row ? parseWalRow(row) : null;
}

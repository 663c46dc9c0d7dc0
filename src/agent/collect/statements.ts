// Reading pg_stat_statements the cheap way, as the pganalyze collector does: counters of every
// entry through pg_stat_statements(false), which does not touch the query-text file, and texts
// only for entries never seen before, in one filtered query. The text cache is what makes the
// steady state read no text at all; it is pruned to the entries that still exist, so it never
// outgrows pg_stat_statements.max.
import { AGENT_QUERY_MARKER } from '../database/db.ts';
import { buildStatementCountersSql, buildStatementsInfoSql, buildStatementTextsSql, type PgssShape } from './columns.ts';
import { toBoolOrNull, toCount, toCountOrNull, toInt, toIsoOrNull, toText, toTextOrNull, type Row } from './parse.ts';
import { statementKey } from '../../protocol/statement.ts';
import type { Queryable, StatementEntry, StatementsSnapshot } from './types.ts';

/** One row of the counters query (see buildStatementCountersSql) as an entry without text. */
export function parseStatementRow(row: Row): StatementEntry {
  const userId = toInt(row['userid'], 'userid');
  const dbId = toInt(row['dbid'], 'dbid');
  const queryId = toText(row['queryid'], 'queryid');
  const toplevel = toBoolOrNull(row['toplevel'], 'toplevel');
  return {
    key: statementKey({ userId, dbId, queryId, toplevel }),
    queryId,
    userId,
    dbId,
    toplevel,
    calls: toCount(row['calls'], 'calls'),
    plans: toCountOrNull(row['plans'], 'plans'),
    totalPlanTimeMs: toCountOrNull(row['total_plan_time'], 'total_plan_time'),
    totalExecTimeMs: toCount(row['total_exec_time'], 'total_exec_time'),
    rows: toCount(row['rows'], 'rows'),
    sharedBlksHit: toCount(row['shared_blks_hit'], 'shared_blks_hit'),
    sharedBlksRead: toCount(row['shared_blks_read'], 'shared_blks_read'),
    sharedBlksDirtied: toCount(row['shared_blks_dirtied'], 'shared_blks_dirtied'),
    sharedBlksWritten: toCount(row['shared_blks_written'], 'shared_blks_written'),
    tempBlksRead: toCount(row['temp_blks_read'], 'temp_blks_read'),
    tempBlksWritten: toCount(row['temp_blks_written'], 'temp_blks_written'),
    blkReadTimeMs: toCount(row['blk_read_time'], 'blk_read_time'),
    blkWriteTimeMs: toCount(row['blk_write_time'], 'blk_write_time'),
    walBytes: toCountOrNull(row['wal_bytes'], 'wal_bytes'),
    jitTimeMs: toCountOrNull(row['jit_time'], 'jit_time'),
    statsSince: toIsoOrNull(row['stats_since'], 'stats_since'),
  };
}

interface CachedText {
  /** The agent's own statement (its text starts or ends with the marker): never reported. */
  own: boolean;
  text?: string;
}

export interface StatementReaderOptions {
  includeQueries: boolean;
  /** Texts are cut to this many characters. */
  maxTextLength: number;
}

export interface StatementReader {
  read(shape: PgssShape): Promise<StatementsSnapshot>;
  /** Entries in the text cache (for tests and diagnostics). */
  readonly cachedTexts: number;
}

export function createStatementReader(db: Queryable, options: StatementReaderOptions): StatementReader {
  // Keyed by the entry, not the queryid alone: the agent's `SELECT 1` and the workload's share a
  // queryid but are separate entries (different users) with different first-seen texts.
  const cache = new Map<string, CachedText>();
  let sqlFor: { shape: PgssShape; counters: string; texts: string; info: string | null } | undefined;

  async function fetchTexts(shape: PgssShape, texts: string, queryIds: string[]): Promise<number> {
    const params: unknown[] = [queryIds, AGENT_QUERY_MARKER];
    if (options.includeQueries) params.push(options.maxTextLength);
    const rows = await db.query<Row>(texts, params);
    for (const row of rows) {
      const key = statementKey({
        userId: toInt(row['userid'], 'userid'),
        dbId: toInt(row['dbid'], 'dbid'),
        queryId: toText(row['queryid'], 'queryid'),
        toplevel: toBoolOrNull(row['toplevel'], 'toplevel'),
      });
      const text = toTextOrNull(row['text'], 'text');
      // left() counts characters, the report's bound counts UTF-16 units: cut again to be sure.
      cache.set(
        key,
        text === null ? { own: row['own'] === true } : { own: row['own'] === true, text: text.slice(0, options.maxTextLength) },
      );
    }
    return rows.length;
  }

  return {
    get cachedTexts() {
      return cache.size;
    },
    async read(shape) {
      if (sqlFor?.shape !== shape) {
        sqlFor = {
          shape,
          counters: buildStatementCountersSql(shape),
          texts: buildStatementTextsSql(shape, options.includeQueries),
          info: buildStatementsInfoSql(shape),
        };
      }
      const { counters, texts, info } = sqlFor;
      const parsed = (await db.query<Row>(counters)).map(parseStatementRow);

      const unknownQueryIds = new Set<string>();
      for (const entry of parsed) if (!cache.has(entry.key)) unknownQueryIds.add(entry.queryId);
      const textsFetched = unknownQueryIds.size > 0 ? await fetchTexts(shape, texts, [...unknownQueryIds]) : 0;

      const entries = new Map<string, StatementEntry>();
      const present = new Set<string>();
      for (const entry of parsed) {
        present.add(entry.key);
        const cached = cache.get(entry.key);
        // Not in the cache even after the fetch: created or evicted between the two reads. Whose
        // it is stays unknown, so it waits for the next collection (it will then count as new).
        if (!cached || cached.own) continue;
        if (options.includeQueries && cached.text !== undefined) entry.text = cached.text;
        entries.set(entry.key, entry);
      }
      for (const key of cache.keys()) if (!present.has(key)) cache.delete(key);

      let infoValue: StatementsSnapshot['info'] = null;
      if (info !== null) {
        const [row] = await db.query<Row>(info);
        if (row) {
          infoValue = { dealloc: toCount(row['dealloc'], 'dealloc'), statsReset: toIsoOrNull(row['stats_reset'], 'stats_reset') };
        }
      }
      return { pgssVersion: shape.version, entries, info: infoValue, textsFetched };
    },
  };
}

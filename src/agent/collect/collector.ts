// One collection: every statistics source read once, in a fixed order, into a Snapshot. The
// server's shape is discovered on the first collection and again after any failure, so that an
// ALTER EXTENSION ... UPDATE or a major upgrade under a running agent heals itself.
import { REPORT_LIMITS } from '../../protocol/report.ts';
import { discoverCapabilities, type Capabilities } from './columns.ts';
import { createStatementReader } from './statements.ts';
import { buildStatsSql, readActivity, readCheckpointer, readDatabases, readServerClock, readWal, type StatsSql } from './stats.ts';
import type { Queryable, Snapshot } from './types.ts';

export interface CollectorOptions {
  /** The config's include_queries: when false no query text is read from the database at all. */
  includeQueries: boolean;
  /** Query texts are cut to this many characters (at most the report's limit). */
  maxQueryTextLength?: number;
}

export interface Collector {
  collect(): Promise<Snapshot>;
  /** The server's versions and statistics columns, discovered on first use. */
  capabilities(): Promise<Capabilities>;
}

export function createCollector(db: Queryable, options: CollectorOptions): Collector {
  const maxTextLength = Math.min(options.maxQueryTextLength ?? REPORT_LIMITS.maxQueryTextLength, REPORT_LIMITS.maxQueryTextLength);
  if (!Number.isInteger(maxTextLength) || maxTextLength < 1) throw new RangeError('maxQueryTextLength must be a positive integer');

  // Count the queries of one collection without touching the caller's session.
  let queries = 0;
  const counted: Queryable = {
    query: (text, params) => {
      queries += 1;
      return db.query(text, params);
    },
  };
  const statements = createStatementReader(counted, { includeQueries: options.includeQueries, maxTextLength });
  let discovered: { capabilities: Capabilities; sql: StatsSql } | undefined;

  async function ensureDiscovered() {
    if (!discovered) {
      const capabilities = await discoverCapabilities(counted);
      discovered = { capabilities, sql: buildStatsSql(capabilities) };
    }
    return discovered;
  }

  return {
    async capabilities() {
      return (await ensureDiscovered()).capabilities;
    },
    async collect() {
      const startedAt = performance.now();
      queries = 0;
      try {
        const { capabilities, sql } = await ensureDiscovered();
        const clock = await readServerClock(counted);
        const statementsSnapshot = await statements.read(capabilities.pgss);
        const databases = await readDatabases(counted);
        const checkpointer = await readCheckpointer(counted, sql.checkpointer);
        const wal = await readWal(counted, sql.wal);
        const activity = await readActivity(counted, clock.maxConnections);
        return {
          takenAt: new Date(clock.takenAtMs).toISOString(),
          takenAtMs: clock.takenAtMs,
          postmasterStartTime: clock.postmasterStartTime,
          serverVersionNum: capabilities.serverVersionNum,
          statements: statementsSnapshot,
          databases,
          checkpointer,
          wal,
          activity,
          cost: { queries, wallMs: performance.now() - startedAt },
        };
      } catch (err) {
        discovered = undefined;
        throw err;
      }
    },
  };
}

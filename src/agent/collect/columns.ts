// What this server can tell us. Statistics views gain, lose and rename columns between
// PostgreSQL and pg_stat_statements versions (total_time → total_exec_time in 1.8,
// blk_read_time → shared_blk_read_time in 1.11, pg_stat_checkpointer split off in 17, wal_write
// gone from pg_stat_wal in 18). Rather than a table of versions, the agent reads the columns that
// exist from the catalog once, and the SQL builders pick from those.
import type { Queryable } from './types.ts';
import { toInt, toText, toTextOrNull, type Row } from './parse.ts';

export interface RelationColumns {
  /** Schema-qualified, quoted name to put in FROM. */
  name: string;
  columns: ReadonlySet<string>;
}

export interface PgssShape {
  /** Installed extension version, e.g. '1.10'. */
  version: string;
  /** Quoted schema holding the extension's view and functions. */
  schema: string;
  /** Columns of the pg_stat_statements view (the same as the function's OUT columns). */
  columns: ReadonlySet<string>;
  /** pg_stat_statements_info exists (1.9+). */
  hasInfo: boolean;
}

export interface Capabilities {
  serverVersionNum: number;
  database: string;
  pgss: PgssShape;
  bgwriter: RelationColumns | null;
  /** PostgreSQL 17+. */
  checkpointer: RelationColumns | null;
  /** PostgreSQL 14+. */
  wal: RelationColumns | null;
}

export class MissingExtensionError extends Error {
  override name = 'MissingExtensionError';
}

const CATALOG_VIEWS = ['pg_stat_bgwriter', 'pg_stat_checkpointer', 'pg_stat_wal'];

export async function discoverCapabilities(db: Queryable): Promise<Capabilities> {
  const [head] = await db.query<Row>(
    `SELECT current_setting('server_version_num')::int AS server_version_num,
            current_database() AS database,
            e.extversion AS pgss_version,
            quote_ident(n.nspname) AS pgss_schema
       FROM (SELECT 1) AS one
       LEFT JOIN pg_extension e ON e.extname = 'pg_stat_statements'
       LEFT JOIN pg_namespace n ON n.oid = e.extnamespace`,
  );
  if (!head) throw new Error('capability query returned no row');
  const database = toText(head['database'], 'database');
  const pgssVersion = toTextOrNull(head['pgss_version'], 'pgss_version');
  const pgssSchema = toTextOrNull(head['pgss_schema'], 'pgss_schema');
  if (pgssVersion === null || pgssSchema === null) {
    throw new MissingExtensionError(
      `pg_stat_statements is not installed in database "${database}": ` +
        'a privileged user must run CREATE EXTENSION pg_stat_statements in it',
    );
  }

  const rows = await db.query<Row>(
    `SELECT n.nspname = 'pg_catalog' AS in_catalog, c.relname::text AS relation,
            array_agg(a.attname::text ORDER BY a.attnum) AS columns
       FROM pg_class c
       JOIN pg_namespace n ON n.oid = c.relnamespace
       JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
      WHERE (n.nspname = 'pg_catalog' AND c.relname = ANY($1::text[]))
         OR (n.oid = (SELECT extnamespace FROM pg_extension WHERE extname = 'pg_stat_statements')
             AND c.relname IN ('pg_stat_statements', 'pg_stat_statements_info'))
      GROUP BY 1, 2`,
    [CATALOG_VIEWS],
  );
  const catalog = new Map<string, ReadonlySet<string>>();
  const extension = new Map<string, ReadonlySet<string>>();
  for (const row of rows) {
    const columns = row['columns'];
    if (!Array.isArray(columns)) throw new Error('columns: expected an array');
    const set = new Set(columns.map((c) => toText(c, 'column')));
    (row['in_catalog'] === true ? catalog : extension).set(toText(row['relation'], 'relation'), set);
  }
  const pgssColumns = extension.get('pg_stat_statements');
  if (!pgssColumns) throw new MissingExtensionError(`pg_stat_statements ${pgssVersion} has no pg_stat_statements view`);
  const relation = (name: string): RelationColumns | null => {
    const columns = catalog.get(name);
    return columns ? { name: `pg_catalog.${name}`, columns } : null;
  };
  return {
    serverVersionNum: toInt(head['server_version_num'], 'server_version_num'),
    database,
    pgss: { version: pgssVersion, schema: pgssSchema, columns: pgssColumns, hasInfo: extension.has('pg_stat_statements_info') },
    bgwriter: relation('pg_stat_bgwriter'),
    checkpointer: relation('pg_stat_checkpointer'),
    wal: relation('pg_stat_wal'),
  };
}

/**
 * Expression for one output column: the first of `candidates` that exists, else `fallback`
 * (a typed NULL or 0), else an error naming what is missing.
 */
export function pick(
  columns: ReadonlySet<string>,
  alias: string,
  candidates: readonly string[],
  fallback?: string,
  qualifier?: string,
): string {
  const found = candidates.find((c) => columns.has(c));
  if (found !== undefined) {
    if (qualifier !== undefined) return `${qualifier}.${found} AS ${alias}`;
    return found === alias ? found : `${found} AS ${alias}`;
  }
  if (fallback !== undefined) return `${fallback} AS ${alias}`;
  throw new Error(`no column for ${alias}: expected one of ${candidates.join(', ')}`);
}

/** JIT compilation time, in its four parts (pg_stat_statements 1.10+). */
const JIT_TIME_COLUMNS = ['jit_generation_time', 'jit_inlining_time', 'jit_optimization_time', 'jit_emission_time'] as const;

/** The output columns of the counters query, in the form statements.ts parses. */
function statementColumnList(shape: PgssShape): string[] {
  const c = shape.columns;
  return [
    pick(c, 'userid', ['userid']),
    pick(c, 'dbid', ['dbid']),
    pick(c, 'queryid', ['queryid']),
    pick(c, 'toplevel', ['toplevel'], 'NULL::boolean'),
    pick(c, 'calls', ['calls']),
    pick(c, 'plans', ['plans'], 'NULL::bigint'),
    pick(c, 'total_plan_time', ['total_plan_time'], 'NULL::float8'),
    pick(c, 'total_exec_time', ['total_exec_time', 'total_time']),
    pick(c, 'rows', ['rows']),
    pick(c, 'shared_blks_hit', ['shared_blks_hit']),
    pick(c, 'shared_blks_read', ['shared_blks_read']),
    pick(c, 'shared_blks_dirtied', ['shared_blks_dirtied'], '0::bigint'),
    pick(c, 'shared_blks_written', ['shared_blks_written']),
    pick(c, 'temp_blks_read', ['temp_blks_read']),
    pick(c, 'temp_blks_written', ['temp_blks_written']),
    pick(c, 'blk_read_time', ['shared_blk_read_time', 'blk_read_time'], '0::float8'),
    pick(c, 'blk_write_time', ['shared_blk_write_time', 'blk_write_time'], '0::float8'),
    pick(c, 'wal_bytes', ['wal_bytes'], 'NULL::numeric'),
    JIT_TIME_COLUMNS.every((name) => c.has(name)) ? `(${JIT_TIME_COLUMNS.join(' + ')}) AS jit_time` : 'NULL::float8 AS jit_time',
    pick(c, 'stats_since', ['stats_since'], 'NULL::timestamptz'),
  ];
}

/** Counters of every entry, without query text: pg_stat_statements(false) skips the text file. */
export function buildStatementCountersSql(shape: PgssShape): string {
  return `SELECT ${statementColumnList(shape).join(', ')}
  FROM ${shape.schema}.pg_stat_statements(false)
 WHERE queryid IS NOT NULL`;
}

/**
 * Texts of the entries with the given queryids ($1 bigint[]). Whether an entry is the agent's
 * own is decided in the server ($2 is the marker, at either end: see markStatement), so that with `withText` false no text at all
 * leaves the database; with it, texts are cut to $3 characters.
 */
export function buildStatementTextsSql(shape: PgssShape, withText: boolean): string {
  const c = shape.columns;
  const own = '(left(query, length($2)) = $2 OR right(query, length($2)) = $2)';
  const text = withText ? `, CASE WHEN ${own} THEN NULL ELSE left(query, $3) END AS text` : '';
  return `SELECT ${pick(c, 'userid', ['userid'])}, ${pick(c, 'dbid', ['dbid'])}, ${pick(c, 'queryid', ['queryid'])},
       ${pick(c, 'toplevel', ['toplevel'], 'NULL::boolean')}, COALESCE(${own}, false) AS own${text}
  FROM ${shape.schema}.pg_stat_statements(true)
 WHERE queryid IN (SELECT unnest($1::bigint[]))`;
}

export function buildStatementsInfoSql(shape: PgssShape): string | null {
  return shape.hasInfo ? `SELECT dealloc, stats_reset FROM ${shape.schema}.pg_stat_statements_info` : null;
}

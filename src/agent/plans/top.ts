// The statements carrying most of the time: the top of pg_stat_statements (this database, top-level
// statements where the server tells them apart, never the agent's own) by total execution time, up
// to 80 % of the total and at most 50. Entries of one queryid under several users count as one.
import { PLAN_LIMITS } from '../../protocol/plans.ts';
import { AGENT_QUERY_MARKER, type Db } from '../database/db.ts';

export interface TopStatement {
  queryId: string;
  /** As pg_stat_statements keeps it (not redacted: it is what gets planned); null when the
   * agent's user may not read it (pg_read_all_stats). */
  text: string | null;
  shareOfTime: number;
}

/** What pg_stat_statements shows a role without pg_read_all_stats instead of others' texts. */
const HIDDEN_TEXT = '<insufficient privilege>';

export async function topStatements(
  db: Db,
  limits: { share: number; max: number } = { share: PLAN_LIMITS.topShareOfTime, max: PLAN_LIMITS.maxStatements },
): Promise<TopStatement[]> {
  // `toplevel` exists from 14 on (pg_stat_statements 1.9): nested statements run inside a
  // top-level one, whose time already holds theirs.
  const [shape] = await db.query<{ toplevel: boolean }>(
    `SELECT EXISTS (SELECT 1 FROM pg_attribute
                     WHERE attrelid = 'pg_stat_statements'::regclass AND attname = 'toplevel' AND NOT attisdropped) AS toplevel`,
  );
  const rows = await db.query<{ queryid: string; query: string | null; ms: number; total: number }>(
    `WITH s AS (
       SELECT queryid, query, total_exec_time
         FROM pg_stat_statements(true)
        WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
          AND queryid IS NOT NULL ${shape?.toplevel ? 'AND toplevel' : ''}
          AND NOT (coalesce(left(query, length($1)) = $1 OR right(query, length($1)) = $1, false))
     )
     SELECT queryid::text AS queryid, min(query) AS query, sum(total_exec_time)::float8 AS ms,
            (SELECT sum(total_exec_time) FROM s)::float8 AS total
       FROM s GROUP BY queryid ORDER BY ms DESC, queryid LIMIT $2`,
    [AGENT_QUERY_MARKER, limits.max],
  );
  const top: TopStatement[] = [];
  let covered = 0;
  for (const row of rows) {
    if (row.total <= 0 || covered >= limits.share) break;
    const share = Math.min(1, row.ms / row.total);
    covered += share;
    top.push({ queryId: row.queryid, text: row.query === null || row.query === HIDDEN_TEXT ? null : row.query, shareOfTime: share });
  }
  return top;
}

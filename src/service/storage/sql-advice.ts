// The advice as last computed (advice/store.ts): database_advice, one row per database, read by
// the fleet's statement (sql-fleet.ts) and written by the advice's refresh (advice/refresh.ts).
import type { AdviceDue, AdviceStore } from '../advice/store.ts';
import type { Queryable } from './driver.ts';

/** The stored advice `a` stands (the fleet shows it, the metrics count it): it argues for a change,
 * on reports within the advice's window (`windowParam`: seconds, ADVICE_LIMITS.windowSeconds).
 * The caller adds that no session ran since it was computed. */
export const ADVICE_STANDS = (a: string, windowParam: string) =>
  `${a}.state = 'advice' AND ${a}.reports_to > now() - make_interval(secs => ${windowParam}::float8)`;

export function createAdviceStore(db: Queryable): AdviceStore {
  return {
    async adviceDue(everySeconds, staleSeconds, limit) {
      const rows = await db.query<{ id: string; organization_id: string }>(
        `SELECT d.id, d.organization_id
           FROM databases d
           JOIN agent_leases l ON l.database_id = d.id
           LEFT JOIN database_advice a ON a.database_id = d.id
          WHERE l.last_report_at IS NOT NULL
            AND (a.database_id IS NULL
                 OR (l.last_report_at > a.computed_at AND a.computed_at <= now() - make_interval(secs => $1::float8))
                 OR (a.state = 'advice' AND a.computed_at <= now() - make_interval(secs => $2::float8)))
          ORDER BY a.computed_at NULLS FIRST, d.id LIMIT $3::int`,
        [everySeconds, staleSeconds, limit],
      );
      return rows.map((r): AdviceDue => ({ databaseId: r.id, organizationId: r.organization_id }));
    },

    async saveAdvice(advice) {
      // The arrays go as JSON: one encoding both drivers pass the same way. `since` survives a computation that finds the same: the fleet sorts the longest waiting first.
      await db.query(
        `INSERT INTO database_advice AS a (database_id, computed_at, state, findings, parameters, reports_to, since)
         VALUES ($1::uuid, now(), $2, ARRAY(SELECT jsonb_array_elements_text($3::jsonb)),
                 ARRAY(SELECT jsonb_array_elements_text($4::jsonb)), $5::timestamptz, CASE WHEN $2 = 'advice' THEN now() END)
         ON CONFLICT (database_id) DO UPDATE SET
           computed_at = excluded.computed_at, state = excluded.state, findings = excluded.findings,
           parameters = excluded.parameters, reports_to = excluded.reports_to,
           since = CASE WHEN excluded.state <> 'advice' THEN NULL
                        WHEN a.state = 'advice' AND a.findings = excluded.findings THEN a.since
                        ELSE excluded.computed_at END`,
        [advice.databaseId, advice.state, JSON.stringify(advice.findings), JSON.stringify(advice.parameters), advice.reportsTo],
      );
    },
  };
}

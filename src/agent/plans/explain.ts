// Asking the planner for one statement's generic plan, and nothing more. Every request is one
// transaction on the agent's session:
//
//   BEGIN READ ONLY
//   set_config(statement_timeout, lock_timeout, and the candidate's values, is_local => true)
//   16+:   EXPLAIN (GENERIC_PLAN, FORMAT JSON) <text>
//   13-15: set_config(plan_cache_mode = force_generic_plan); PREPARE p AS <text>;
//          EXPLAIN (FORMAT JSON) EXECUTE p(NULL::<type>, …)   (types from pg_prepared_statements)
//   ROLLBACK   (and DEALLOCATE p: a prepared statement outlives its transaction)
//
// Never ANALYZE: the statement is planned, not run. A generic plan does not depend on parameter
// values, so NULLs stand for them. Values go through set_config as bind parameters, never into a
// statement's text. The calls run one after another and stop at the first failure: the session
// reconnects only on the next call after a broken connection, and what follows a failure here is
// the ROLLBACK, harmless on a new session.
import type { Db } from '../database/db.ts';
import { ExplainJsonSchema, type ExplainJson, type JitRule } from './fingerprint.ts';

export type PlanMethod = 'generic_plan' | 'prepare';

export interface ExplainOptions {
  method: PlanMethod;
  statementTimeoutMs: number;
  lockTimeoutMs: number;
}

export const DEFAULT_EXPLAIN_TIMEOUTS = { statementTimeoutMs: 2_000, lockTimeoutMs: 500 } as const;

const PREPARED_NAME = 'tuner_agent_plan_probe';

/** EXPLAIN (GENERIC_PLAN) exists from PostgreSQL 16 on. */
export function methodFor(serverVersionNum: number): PlanMethod {
  return serverVersionNum >= 160000 ? 'generic_plan' : 'prepare';
}

/** Why PostgreSQL would not plan it, from its SQLSTATE: never the server's message as it is,
 * which may quote a literal of the statement (`invalid input syntax … "secret"`). */
const REASONS: Record<string, (message: string, o: ExplainOptions) => string> = {
  '42501': (m) => `the agent's user lacks a privilege: ${m} (GRANT pg_read_all_data, from 14 on, or SELECT on its tables)`,
  '55P03': (_, o) => `a lock it needs was held by another session for more than lock_timeout (${o.lockTimeoutMs} ms)`,
  '57014': (_, o) => `planning took more than statement_timeout (${o.statementTimeoutMs} ms)`,
  '42P01': (m) => `${m} for the agent's user (another search_path or schema privileges)`,
  '42883': () => `a function or operator it uses is not visible to the agent's user (another search_path)`,
  '42P18': () => 'the type of a parameter cannot be inferred from its text',
  '42P02': () => 'it uses a parameter that cannot be given here',
  '25006': () => 'planning it would write, and the read-only transaction refused',
  '22023': (m) => `a value cannot be set: ${m}`,
};
/** Messages safe to quote: they name a privilege, a relation or a parameter, never a value. */
const QUOTED_MESSAGE =
  /^(permission denied for [\w ]+ [\w."]+|relation "[^"]+" does not exist|invalid value for parameter "[\w.]+": "[^"]{0,100}"|unrecognized configuration parameter "[\w.]+")$/;

export class PlanError extends Error {
  readonly code: string | undefined;
  constructor(reason: string, code: string | undefined) {
    super(reason);
    this.code = code;
  }
}

function planError(err: unknown, options: ExplainOptions): PlanError {
  const { code, message } = err as { code?: string; message?: string };
  const text = message ?? String(err);
  const safe = QUOTED_MESSAGE.test(text) ? text : 'see the server log';
  const reason = code && REASONS[code] ? REASONS[code](safe, options) : `PostgreSQL refused to plan it (SQLSTATE ${code ?? 'unknown'})`;
  return new PlanError(reason, code);
}

export interface Explained {
  explain: ExplainJson;
  jit: JitRule;
}

/** The generic plan of `text` under `settings` (SET LOCAL), or a PlanError saying why not. */
export async function explainGeneric(db: Db, text: string, settings: Record<string, string>, options: ExplainOptions): Promise<Explained> {
  const statement = text.trim().replace(/;\s*$/, '');
  const names = ['statement_timeout', 'lock_timeout', ...Object.keys(settings)];
  const values = [`${options.statementTimeoutMs}ms`, `${options.lockTimeoutMs}ms`, ...Object.values(settings)];
  if (options.method === 'prepare') {
    names.push('plan_cache_mode');
    values.push('force_generic_plan');
  }
  let prepared = false;
  try {
    await db.query('BEGIN TRANSACTION READ ONLY');
    await db.query('SELECT set_config(n, v, true) FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS s(n, v, i) ORDER BY i', [
      names,
      values,
    ]);
    let rows: Record<string, unknown>[];
    if (options.method === 'generic_plan') {
      rows = await db.query(`EXPLAIN (GENERIC_PLAN, FORMAT JSON) ${statement}`);
    } else {
      prepared = true;
      await db.query(`PREPARE ${PREPARED_NAME} AS ${statement}`);
      const [types] = await db.query<{ types: string[] }>(
        'SELECT parameter_types::text[] AS types FROM pg_prepared_statements WHERE name = $1',
        [PREPARED_NAME],
      );
      const args = (types?.types ?? []).map((t) => `NULL::${t}`);
      rows = await db.query(`EXPLAIN (FORMAT JSON) EXECUTE ${PREPARED_NAME}${args.length > 0 ? `(${args.join(', ')})` : ''}`);
    }
    const [jit] = await db.query<{ enabled: boolean; above: number }>(
      `SELECT current_setting('jit')::bool AS enabled, current_setting('jit_above_cost')::float8 AS above`,
    );
    return {
      explain: ExplainJsonSchema.parse(rows[0]?.['QUERY PLAN']),
      jit: { enabled: jit?.enabled ?? false, aboveCost: jit?.above ?? -1 },
    };
  } catch (err) {
    throw planError(err, options);
  } finally {
    await db.query('ROLLBACK').catch(() => undefined);
    if (prepared) await db.query(`DEALLOCATE ${PREPARED_NAME}`).catch(() => undefined);
  }
}

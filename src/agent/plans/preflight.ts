// --check's line for the planner probe, when postgresql.include_plans is on: can the agent's user
// plan the statements carrying the time? Planning needs the privileges a query needs to read its
// tables (pg_read_all_data from 14 on, or SELECT per schema), and sees what the agent's
// search_path sees. Statements the probe refuses by design (writes, utility statements) are
// counted, not failed.
import type { Db } from '../database/db.ts';
import type { PreflightCheck } from '../../target/target.ts';
import { probePlans, type ShownStatement } from './probe.ts';

const NAME = 'the planner probe plans the top statements (include_plans)';

/** "queryid 123 (SELECT … FROM orders …)": a statement named as briefly as it can be recognized. */
function named(s: ShownStatement): string {
  const text = s.text ? ` (${s.text.replace(/\s+/g, ' ').slice(0, 100)}${s.text.length > 100 ? '…' : ''})` : '';
  return `queryid ${s.queryId}${text}`;
}

export async function planChecks(db: Db, includeTexts: boolean): Promise<PreflightCheck[]> {
  const result = await probePlans(db, { includeTexts });
  const planned = result.statements.filter((s) => s.current !== undefined);
  const failed = result.statements.filter((s) => s.current === undefined && s.sqlstate !== undefined);
  const refused = result.statements.length - planned.length - failed.length;
  const counts = `${planned.length} of ${result.statements.length} planned (${result.method}), ${refused} not re-plannable by design (writes, utility statements)`;
  if (failed.length === 0) return [{ name: NAME, ok: true, detail: counts }];
  const [user] = await db.query<{ user: string; num: number }>(
    `SELECT current_user AS user, current_setting('server_version_num')::int AS num`,
  );
  const privileges = failed.filter((s) => s.sqlstate === '42501');
  const list = (ss: ShownStatement[]) => ss.map((s) => `${named(s)}: ${s.notPlanned}`).join('; ');
  const grant =
    (user?.num ?? 0) >= 140000
      ? `as the master user: GRANT pg_read_all_data TO ${user?.user ?? 'agent_user'}; (or GRANT SELECT ON ALL TABLES IN SCHEMA <schema> TO ${user?.user ?? 'agent_user'}; per schema)`
      : `as the master user, per schema: GRANT USAGE ON SCHEMA <schema> TO ${user?.user ?? 'agent_user'}; GRANT SELECT ON ALL TABLES IN SCHEMA <schema> TO ${user?.user ?? 'agent_user'};`;
  const checks: PreflightCheck[] = [];
  if (privileges.length > 0)
    checks.push({ name: NAME, ok: false, detail: `${counts}; not planned for want of privileges: ${list(privileges)}`, fix: grant });
  const others = failed.filter((s) => s.sqlstate !== '42501');
  if (others.length > 0)
    checks.push({
      name: privileges.length > 0 ? 'the planner probe: other statements not planned' : NAME,
      ok: false,
      severity: 'warning',
      detail: `${counts}; not planned: ${list(others)}`,
      fix: 'the tuning goes on without their plans; see docs/plans.md for what each reason means',
    });
  return checks;
}

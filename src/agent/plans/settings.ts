// Which of a candidate's parameters the probe may SET LOCAL: those a session can set
// (pg_settings.context `user`, or `superuser` when the agent's user is one or, from 15 on, was
// granted SET on it), and not the ones the probe sets itself or that change who the session is.
// The others cannot be planned under: they are listed, with why, and the plans are made without them.
import type { Db } from '../database/db.ts';

export interface SettingsSplit {
  settable: Record<string, string>;
  notPlannable: { name: string; reason: string }[];
}

/** Set by the probe itself, or not a planner's input but the session's identity. */
const RESERVED = new Set([
  'statement_timeout',
  'lock_timeout',
  'plan_cache_mode',
  'transaction_read_only',
  'default_transaction_read_only',
  'role',
  'session_authorization',
]);

export async function splitSettings(db: Db, settings: Record<string, string>): Promise<SettingsSplit> {
  const names = Object.keys(settings);
  const split: SettingsSplit = { settable: {}, notPlannable: [] };
  if (names.length === 0) return split;
  const [server] = await db.query<{ num: number; superuser: boolean }>(
    `SELECT current_setting('server_version_num')::int AS num,
            (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) AS superuser`,
  );
  // has_parameter_privilege exists from 15 on; before, only a superuser sets a superuser parameter.
  const granted = (server?.num ?? 0) >= 150000 ? `has_parameter_privilege(name, 'SET')` : 'false';
  const rows = await db.query<{ name: string; context: string; granted: boolean }>(
    `SELECT name, context, context = 'superuser' AND ${granted} AS granted FROM pg_settings WHERE name = ANY($1::text[])`,
    [names.map((n) => n.toLowerCase())],
  );
  for (const name of names) {
    const row = rows.find((r) => r.name === name.toLowerCase());
    let reason: string | null = null;
    if (RESERVED.has(name.toLowerCase())) reason = 'the probe sets it itself, or it is not a planner input';
    else if (!row) reason = 'no such parameter on this server';
    else if (row.context === 'superuser' && !server?.superuser && !row.granted)
      reason = `its context is superuser and the agent's user may not SET it (GRANT SET ON PARAMETER ${row.name}, from PostgreSQL 15 on)`;
    else if (row.context !== 'user' && row.context !== 'superuser')
      reason = `its context is ${row.context}: it cannot be SET in a session, so the planner cannot be asked under it`;
    if (reason) split.notPlannable.push({ name, reason });
    else split.settable[row!.name] = settings[name]!;
  }
  return split;
}

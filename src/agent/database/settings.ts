// pg_settings as the agent reads it: the source of truth for every read-back.
import type { PgSettingRow } from '../../knobs/index.ts';
import type { Db } from './db.ts';

export type Settings = Record<string, PgSettingRow>;

/** All of pg_settings (a few hundred rows: cheaper than knowing which ones each check needs). */
export async function readSettings(db: Db): Promise<Settings> {
  const rows = await db.query<PgSettingRow>(
    `SELECT name, setting, unit, context, vartype, source, min_val, max_val, enumvals, boot_val, reset_val, pending_restart
       FROM pg_settings`,
  );
  return Object.fromEntries(rows.map((r) => [r.name, r]));
}

/** Equal as PostgreSQL means them: numbers numerically (0.90 = 0.9), words case-insensitively. */
export function sameSetting(a: string, b: string): boolean {
  const x = Number(a);
  const y = Number(b);
  if (a.trim() !== '' && b.trim() !== '' && Number.isFinite(x) && Number.isFinite(y)) {
    return Math.abs(x - y) <= 1e-9 * Math.max(1, Math.abs(x), Math.abs(y));
  }
  return a.trim().toLowerCase() === b.trim().toLowerCase();
}

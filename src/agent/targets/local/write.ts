// Reading and writing the local override layer, postgresql.auto.conf, through ALTER SYSTEM: all
// or nothing, then a reload proven by pg_conf_load_time, then a restart only when a written value
// waits for one and restarts are allowed.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { isNeverTouch } from '../../../knobs/index.ts';
import type { TargetAgentConfig } from '../../../target/config.ts';
import type { Db } from '../../database/db.ts';
import { errorMessage } from '../../base/log.ts';
import { UndoFailedError, type Overrides, type WriteOptions, type WriteResult } from '../../../target/target.ts';
import { localConfig } from './config.ts';

const run = promisify(execFile);
const RESTART_TIMEOUT_MS = 300_000;
const RELOAD_TIMEOUT_MS = 10_000;

export const CAN_READ_FILE_SETTINGS = `SELECT has_function_privilege('pg_show_all_file_settings()', 'EXECUTE')
  AND has_table_privilege('pg_file_settings', 'SELECT') AS ok`;

export interface LocalWriteDeps {
  db: Db;
  config: TargetAgentConfig;
}

/** A parameter name safe to put in an ALTER SYSTEM statement; a second line of defence behind
 * the catalog check, so that even a bug above can never touch a durability or security setting. */
function assertWritable(name: string): void {
  if (!/^[a-z_][a-z0-9_]*$/.test(name)) throw new Error(`refused: "${name}" is not a parameter name`);
  if (isNeverTouch(name)) throw new Error(`refused: ${name} is a durability or security setting that the agent never changes`);
}

function quoteLiteral(value: string): string {
  return `'${value.replaceAll("'", "''")}'`;
}

async function alterSystem(db: Db, name: string, o: Overrides[string]): Promise<void> {
  assertWritable(name);
  await db.query(o.set ? `ALTER SYSTEM SET ${name} = ${quoteLiteral(o.value)}` : `ALTER SYSTEM RESET ${name}`);
}

/** Reloads and waits until this session has loaded the new files (pg_conf_load_time moves). */
async function reload(db: Db): Promise<void> {
  const [before] = await db.query<{ t: Date }>('SELECT pg_conf_load_time() AS t');
  await db.query('SELECT pg_reload_conf()');
  const deadline = Date.now() + RELOAD_TIMEOUT_MS;
  for (;;) {
    const [now] = await db.query<{ t: Date }>('SELECT pg_conf_load_time() AS t');
    if (now && before && now.t.getTime() > before.t.getTime()) return;
    if (Date.now() > deadline) throw new Error('the server did not reload its configuration within 10 s');
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function restart({ db, config }: LocalWriteDeps): Promise<void> {
  const command = localConfig.of(config).restartCommand;
  if (!command) throw new Error('a restart is needed but local.restart_command is not set');
  try {
    await run('/bin/sh', ['-c', command], { timeout: RESTART_TIMEOUT_MS });
  } catch (err) {
    const e = err as { stderr?: string; code?: number | string };
    throw new Error(`local.restart_command failed (exit ${e.code ?? '?'}): ${(e.stderr ?? '').trim().slice(0, 500)}`, { cause: err });
  }
  await db.waitUntilReachable(RESTART_TIMEOUT_MS);
}

export async function readAutoConf(db: Db, names: readonly string[]): Promise<Overrides> {
  const result: Overrides = Object.fromEntries(names.map((n) => [n, { set: false } as const]));
  // pg_file_settings shows postgresql.auto.conf exactly as written, pending-restart values
  // included; it needs a grant (docs/local-target.md). Without it, pg_settings is the fallback.
  const canReadFile = await db.query<{ ok: boolean }>(CAN_READ_FILE_SETTINGS);
  if (canReadFile[0]?.ok) {
    const rows = await db.query<{ name: string; setting: string }>(
      `SELECT name, setting FROM pg_file_settings
        WHERE sourcefile LIKE '%postgresql.auto.conf' AND name = ANY($1) ORDER BY seqno`,
      [names],
    );
    for (const r of rows) result[r.name] = { set: true, value: r.setting };
    return result;
  }
  const rows = await db.query<{ name: string; setting: string; source: string; sourcefile: string | null }>(
    `SELECT name, setting, source, sourcefile FROM pg_settings WHERE name = ANY($1)`,
    [names],
  );
  for (const r of rows) {
    if (r.source === 'configuration file' && r.sourcefile?.endsWith('postgresql.auto.conf')) {
      result[r.name] = { set: true, value: r.setting };
    }
  }
  return result;
}

export async function writeAutoConf(deps: LocalWriteDeps, overrides: Overrides, options: WriteOptions): Promise<WriteResult> {
  const { db } = deps;
  const names = Object.keys(overrides);
  for (const name of names) assertWritable(name);
  const before = await readAutoConf(db, names);
  const attempted: string[] = [];
  try {
    for (const name of names) {
      attempted.push(name);
      await alterSystem(db, name, overrides[name]!);
    }
  } catch (err) {
    // All or nothing: put back what was written before the failure, and the statement that
    // failed too (its session may have been cut off after the server wrote the file).
    try {
      for (const name of attempted.reverse()) await alterSystem(db, name, before[name]!);
    } catch (undoErr) {
      throw new UndoFailedError(`${errorMessage(err)}; putting back ${attempted.join(', ')} failed: ${errorMessage(undoErr)}`, {
        cause: err,
      });
    }
    throw err;
  }
  await reload(db);
  const pending = await db.query<{ name: string }>(`SELECT name FROM pg_settings WHERE name = ANY($1) AND pending_restart`, [names]);
  if (pending.length > 0 && options.allowRestart) {
    await restart(deps);
    return { restarted: true };
  }
  return { restarted: false };
}

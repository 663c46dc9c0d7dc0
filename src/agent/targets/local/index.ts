// The local target: a self-hosted PostgreSQL the agent can reach with a role allowed to run
// ALTER SYSTEM (a superuser, or on PostgreSQL 15+ a role with `ALTER SYSTEM ON PARAMETER`
// grants, see localGrantsSql). The override layer is postgresql.auto.conf.
import { execFile } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { availableParallelism, totalmem } from 'node:os';
import { promisify } from 'node:util';
import { catalogFor, isNeverTouch, type TuningMode } from '../../../knobs/index.ts';
import type { TargetMetric } from '../../../protocol/v1.ts';
import {
  UndoFailedError,
  type MachineInfo,
  type Overrides,
  type PreflightCheck,
  type Target,
  type TargetDeps,
  type WriteOptions,
  type WriteResult,
} from '../target.ts';
import { errorMessage } from '../../log.ts';
import { describeConnection } from '../../../postgres/connect.ts';

const run = promisify(execFile);
const RESTART_TIMEOUT_MS = 300_000;
const RELOAD_TIMEOUT_MS = 10_000;

const CAN_READ_FILE_SETTINGS = `SELECT has_function_privilege('pg_show_all_file_settings()', 'EXECUTE')
  AND has_table_privilege('pg_file_settings', 'SELECT') AS ok`;

const LOOPBACK = /^(localhost|127\.\d+\.\d+\.\d+|::1|\[::1\])$/;

function isSameHost(host: string): boolean {
  return LOOPBACK.test(host) || host.startsWith('/');
}

/** Memory of this host from /proc/meminfo (MemAvailable counts reclaimable cache, as the
 * kernel itself estimates it); empty where there is no /proc. */
function hostMemoryMetrics(): TargetMetric[] {
  let text: string;
  try {
    text = readFileSync('/proc/meminfo', 'utf8');
  } catch {
    return [];
  }
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? NaN) * 1024;
  const at = new Date().toISOString();
  return [
    { name: 'memory_available_bytes', value: kb('MemAvailable'), unit: 'bytes', at, source: 'host' },
    { name: 'memory_total_bytes', value: kb('MemTotal'), unit: 'bytes', at, source: 'host' },
    { name: 'swap_free_bytes', value: kb('SwapFree'), unit: 'bytes', at, source: 'host' },
  ].filter((m) => Number.isFinite(m.value));
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

export function createLocalTarget({ db, config }: Pick<TargetDeps, 'db' | 'config'>): Target {
  const where = describeConnection(config.postgresql.connectionUrl);
  const mode: TuningMode = config.postgresql.allowRestart ? 'restart' : 'reload-only';

  const alterSystem = async (name: string, o: Overrides[string]) => {
    assertWritable(name);
    await db.query(o.set ? `ALTER SYSTEM SET ${name} = ${quoteLiteral(o.value)}` : `ALTER SYSTEM RESET ${name}`);
  };

  /** Reloads and waits until this session has loaded the new files (pg_conf_load_time moves). */
  const reload = async () => {
    const [before] = await db.query<{ t: Date }>('SELECT pg_conf_load_time() AS t');
    await db.query('SELECT pg_reload_conf()');
    const deadline = Date.now() + RELOAD_TIMEOUT_MS;
    for (;;) {
      const [now] = await db.query<{ t: Date }>('SELECT pg_conf_load_time() AS t');
      if (now && before && now.t.getTime() > before.t.getTime()) return;
      if (Date.now() > deadline) throw new Error('the server did not reload its configuration within 10 s');
      await new Promise((r) => setTimeout(r, 50));
    }
  };

  const readOverrides = async (names: readonly string[]): Promise<Overrides> => {
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
  };

  const restart = async () => {
    const command = config.local.restartCommand;
    if (!command) throw new Error('a restart is needed but local.restart_command is not set');
    try {
      await run('/bin/sh', ['-c', command], { timeout: RESTART_TIMEOUT_MS });
    } catch (err) {
      const e = err as { stderr?: string; code?: number | string };
      throw new Error(`local.restart_command failed (exit ${e.code ?? '?'}): ${(e.stderr ?? '').trim().slice(0, 500)}`, { cause: err });
    }
    await db.waitUntilReachable(RESTART_TIMEOUT_MS);
  };

  return {
    kind: 'local',
    identity: `local ${where.host}:${where.port}/${where.database}`,

    machine(): Promise<MachineInfo> {
      const { memoryMb, vcpus } = config.local;
      if (memoryMb !== undefined && vcpus !== undefined) {
        return Promise.resolve({
          machine: { memoryBytes: memoryMb * 1024 * 1024, vcpus },
          source: 'agent.yaml local.memory_mb and local.vcpus',
        });
      }
      if (isSameHost(where.host)) {
        return Promise.resolve({ machine: { memoryBytes: totalmem(), vcpus: availableParallelism() }, source: 'this host' });
      }
      return Promise.reject(
        new Error(
          `the database host ${where.host} is not this host, so its memory and vCPUs are unknown: set local.memory_mb and local.vcpus in agent.yaml (or AGENT_LOCAL_MEMORY_MB and AGENT_LOCAL_VCPUS)`,
        ),
      );
    },

    applyBlockedReason: () => Promise.resolve(null),

    metrics: () => Promise.resolve(isSameHost(where.host) ? hostMemoryMetrics() : []),

    readOverrides,

    async writeOverrides(overrides: Overrides, options: WriteOptions): Promise<WriteResult> {
      const names = Object.keys(overrides);
      for (const name of names) assertWritable(name);
      const before = await readOverrides(names);
      const attempted: string[] = [];
      try {
        for (const name of names) {
          attempted.push(name);
          await alterSystem(name, overrides[name]!);
        }
      } catch (err) {
        // All or nothing: put back what was written before the failure, and the statement that
        // failed too (its session may have been cut off after the server wrote the file).
        try {
          for (const name of attempted.reverse()) await alterSystem(name, before[name]!);
        } catch (undoErr) {
          throw new UndoFailedError(`${errorMessage(err)}; putting back ${attempted.join(', ')} failed: ${errorMessage(undoErr)}`, {
            cause: err,
          });
        }
        throw err;
      }
      await reload();
      const pending = await db.query<{ name: string }>(`SELECT name FROM pg_settings WHERE name = ANY($1) AND pending_restart`, [names]);
      if (pending.length > 0 && options.allowRestart) {
        await restart();
        return { restarted: true };
      }
      return { restarted: false };
    },

    /** ALTER SYSTEM writes every catalog knob; the catalog's own checks refuse the rest. */
    unwritable: () => Promise.resolve(new Map<string, string>()),

    async preflight(): Promise<PreflightCheck[]> {
      const checks: PreflightCheck[] = [];
      const [role] = await db.query<{ user: string; superuser: boolean; version: number }>(
        `SELECT current_user AS user, rolsuper AS superuser, current_setting('server_version_num')::int AS version
           FROM pg_roles WHERE rolname = current_user`,
      );
      const user = role?.user ?? where.user;
      const names = catalogFor('local', mode).map((k) => k.name);
      if (role?.superuser) {
        checks.push({
          name: 'apply rights (ALTER SYSTEM, pg_reload_conf)',
          ok: true,
          detail: `${user} is a superuser (fewer rights suffice: tuner-agent permissions --local)`,
        });
      } else if ((role?.version ?? 0) < 150000) {
        checks.push({
          name: 'apply rights (ALTER SYSTEM, pg_reload_conf)',
          ok: false,
          detail: `PostgreSQL before 15 lets only superusers run ALTER SYSTEM, and ${user} is not one`,
          fix: 'connect as a superuser in connection_url, or upgrade to PostgreSQL 15+ and grant the rights printed by tuner-agent permissions --local',
        });
      } else {
        const rows = await db.query<{ name: string; ok: boolean }>(
          `SELECT n AS name, has_parameter_privilege(n, 'ALTER SYSTEM') AS ok FROM unnest($1::text[]) AS n`,
          [names],
        );
        const missing = rows.filter((r) => !r.ok).map((r) => r.name);
        checks.push({
          name: 'apply rights: ALTER SYSTEM on the tuned parameters',
          ok: missing.length === 0,
          detail: missing.length === 0 ? `granted on all ${names.length}` : `missing on ${missing.join(', ')}`,
          ...(missing.length > 0 && { fix: `as a superuser: GRANT ALTER SYSTEM ON PARAMETER ${missing.join(', ')} TO ${user};` }),
        });
        const [reloadRight] = await db.query<{ ok: boolean }>(`SELECT has_function_privilege('pg_reload_conf()', 'EXECUTE') AS ok`);
        checks.push({
          name: 'apply rights: pg_reload_conf()',
          ok: reloadRight?.ok === true,
          detail: reloadRight?.ok ? 'granted' : 'not granted',
          ...(!reloadRight?.ok && { fix: `as a superuser: GRANT EXECUTE ON FUNCTION pg_reload_conf() TO ${user};` }),
        });
        const [fileRight] = await db.query<{ ok: boolean }>(CAN_READ_FILE_SETTINGS);
        checks.push({
          name: 'read postgresql.auto.conf (pg_file_settings)',
          ok: fileRight?.ok === true,
          severity: 'warning',
          detail: fileRight?.ok ? 'granted' : 'not granted: values waiting for a restart cannot be seen exactly',
          ...(!fileRight?.ok && {
            fix: `as a superuser: GRANT EXECUTE ON FUNCTION pg_show_all_file_settings() TO ${user}; GRANT SELECT ON pg_file_settings TO ${user};`,
          }),
        });
      }
      try {
        const info = await this.machine();
        checks.push({
          name: 'machine size',
          ok: true,
          detail: `${Math.round(info.machine.memoryBytes / 2 ** 20)} MB, ${info.machine.vcpus} vCPUs (${info.source})`,
        });
      } catch (err) {
        checks.push({ name: 'machine size', ok: false, detail: 'unknown', fix: (err as Error).message });
      }
      if (config.postgresql.allowRestart) {
        const command = config.local.restartCommand;
        checks.push({
          name: 'restart mode: restart command',
          ok: command !== undefined,
          detail: command ? 'local.restart_command is set' : 'postgresql.allow_restart is true but local.restart_command is not set',
          ...(!command && {
            fix: 'set local.restart_command (e.g. "pg_ctlcluster 15 main restart"), or set postgresql.allow_restart: false',
          }),
        });
      }
      return checks;
    },

    close: () => Promise.resolve(),
  };
}

/** The least-privilege grants for the local target, as SQL a superuser runs once. */
export function localGrantsSql(user: string): string {
  const reloadOnly = catalogFor('local', 'reload-only').map((k) => k.name);
  const restartOnly = catalogFor('local', 'restart')
    .map((k) => k.name)
    .filter((n) => !reloadOnly.includes(n));
  return [
    `-- tuner-agent --local: rights for ${user} on PostgreSQL 15 or later, run once by a superuser`,
    `GRANT pg_monitor TO ${user};`,
    `GRANT ALTER SYSTEM ON PARAMETER ${reloadOnly.join(', ')} TO ${user};`,
    `GRANT EXECUTE ON FUNCTION pg_reload_conf() TO ${user};`,
    `-- lets the agent see postgresql.auto.conf exactly, values waiting for a restart included:`,
    `GRANT EXECUTE ON FUNCTION pg_show_all_file_settings() TO ${user};`,
    `GRANT SELECT ON pg_file_settings TO ${user};`,
    `-- only with postgresql.allow_restart: true (restart mode):`,
    `GRANT ALTER SYSTEM ON PARAMETER ${restartOnly.join(', ')} TO ${user};`,
    '',
  ].join('\n');
}

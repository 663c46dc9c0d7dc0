// The local target's preflight: the rights to apply (a superuser, or on PostgreSQL 15+ the grants
// of `tuner-agent permissions --local`), the machine's size, and the restart command when
// restarts are allowed.
import { catalogFor } from '../../../knobs/index.ts';
import { tuningModeOf } from '../../../protocol/v1.ts';
import { SELF_HOSTED_CAPABILITIES } from '../self-hosted.ts';
import type { TargetAgentConfig } from '../../../target/config.ts';
import type { Db } from '../../database/db.ts';
import type { MachineInfo, PreflightCheck } from '../../../target/target.ts';
import { CAN_READ_FILE_SETTINGS } from './write.ts';
import { describeMachineInfo } from '../machine-size.ts';
import { localConfig } from './config.ts';

export interface LocalPreflightDeps {
  db: Db;
  config: TargetAgentConfig;
  /** The connection's user, when the server does not say. */
  user: string;
  machine: () => Promise<MachineInfo>;
}

export async function localPreflight({ db, config, user: connectionUser, machine }: LocalPreflightDeps): Promise<PreflightCheck[]> {
  const mode = tuningModeOf(config.postgresql.allowRestart);
  const checks: PreflightCheck[] = [];
  const [role] = await db.query<{ user: string; superuser: boolean; version: number }>(
    `SELECT current_user AS user, rolsuper AS superuser, current_setting('server_version_num')::int AS version
       FROM pg_roles WHERE rolname = current_user`,
  );
  const user = role?.user ?? connectionUser;
  const names = catalogFor(SELF_HOSTED_CAPABILITIES, mode).map((k) => k.name);
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
    const info = await machine();
    checks.push({
      name: 'machine size',
      ok: true,
      detail: describeMachineInfo(info),
    });
  } catch (err) {
    checks.push({ name: 'machine size', ok: false, detail: 'unknown', fix: (err as Error).message });
  }
  if (config.postgresql.allowRestart) {
    const command = localConfig.of(config).restartCommand;
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
}

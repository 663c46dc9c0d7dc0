// The local target's rights: the least-privilege grants `tuner-agent permissions --local` prints.
import { catalogFor } from '../../../knobs/index.ts';
import { SELF_HOSTED_CAPABILITIES } from '../self-hosted.ts';

/** The least-privilege grants for the local target, as SQL a superuser runs once. */
export function localGrantsSql(user: string): string {
  const reloadOnly = catalogFor(SELF_HOSTED_CAPABILITIES, 'reload-only').map((k) => k.name);
  const restartOnly = catalogFor(SELF_HOSTED_CAPABILITIES, 'restart')
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

// The setup page's steps for --local: preload pg_stat_statements, then the user and the extension.
import { DATABASE_SQL, lines, type TargetSetup, type SetupStep } from '../../../target/setup.ts';

export function localSteps(): SetupStep[] {
  return [
    {
      id: 'server-parameters',
      title: 'Preload pg_stat_statements, as a superuser, then restart PostgreSQL',
      note: 'Keep any library shared_preload_libraries already lists (its value is the whole list, comma-separated).',
      text: lines(
        "ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements';",
        "ALTER SYSTEM SET pg_stat_statements.track = 'top';",
        '-- then restart PostgreSQL, e.g.: pg_ctlcluster 15 main restart',
      ),
    },
    {
      id: 'database-sql',
      title: 'On the database, as a superuser (psql, port 5432)',
      note: 'Connect with psql -p 5432 -U postgres <DBNAME>, to the database that connection_url names. Choose a strong password for agent_user in place of <AGENT_USER_PASSWORD>. To let the agent apply changes without a superuser (PostgreSQL 15+), also run the grants that ./tuner-agent permissions --local prints.',
      text: DATABASE_SQL,
    },
  ];
}

export const localSetup: TargetSetup = {
  connection: { host: 'localhost', dbname: 'postgres', query: '' },
  entries: [
    {
      key: 'restart_command',
      value: 'pg_ctlcluster 15 main restart',
      comment: ' How to restart the server; used only with allow_restart: true.',
      fileOnly: true,
    },
  ],
  steps: () => localSteps(),
};

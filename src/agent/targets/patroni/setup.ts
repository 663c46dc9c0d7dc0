// The setup page's steps for --patroni: pg_stat_statements through Patroni's dynamic configuration,
// then the user and the extension on the leader.
import { DATABASE_SQL, lines, type TargetSetup, type SetupStep } from '../../../target/setup.ts';

/** A Patroni cluster: the parameters go through Patroni's dynamic configuration (ALTER SYSTEM
 * on one member would not reach the others), then the user and extension once, on the leader. */
export function patroniSteps(): SetupStep[] {
  return [
    {
      id: 'server-parameters',
      title: "Preload pg_stat_statements through Patroni's dynamic configuration, then restart the members",
      note: 'Keep any library shared_preload_libraries already lists (its value is the whole list, comma-separated). patronictl restart restarts each member through Patroni.',
      text: lines(
        'patronictl -c /etc/patroni/patroni.yml edit-config \\',
        '  -p shared_preload_libraries=pg_stat_statements -p pg_stat_statements.track=top',
        'patronictl -c /etc/patroni/patroni.yml restart <CLUSTER_NAME>',
      ),
    },
    {
      id: 'database-sql',
      title: 'On the leader, as a superuser (psql); it replicates to every member',
      note: "Choose a strong password for agent_user in place of <AGENT_USER_PASSWORD>. Every member's pg_hba (Patroni's postgresql.pg_hba) must let agent_user in from the agent's host: the agent reads back each change on every member. No ALTER SYSTEM right is needed (./tuner-agent permissions --patroni).",
      text: DATABASE_SQL,
    },
  ];
}

export const patroniSetup: TargetSetup = {
  connection: {
    host: 'pg-primary',
    dbname: 'postgres',
    query: '',
    comment: ' The leader, or a name that follows it (HAProxy on /primary, a DNS name your failover moves).',
  },
  entries: [
    {
      key: 'rest_api_urls',
      value: ['https://pg1:8008', 'https://pg2:8008'],
      comment: " Every member's restapi.connect_address: the agent follows the leader through them.",
    },
    { key: 'username', value: '<RESTAPI_USERNAME>' },
    { key: 'password', value: '<RESTAPI_PASSWORD>' },
  ],
  steps: () => patroniSteps(),
};

// What `tuner-agent permissions --patroni` prints: the grants agent_user needs on the leader (they
// replicate to every member), as SQL on standard output, and the REST API credentials' scope as
// `#` notes on standard error. The agent never writes through SQL here: it reads statistics and
// pg_settings, and changes go through Patroni.
// This module imports nothing that talks to a network, so the service's setup page can show it.

/** The REST API calls the agent makes, with what each needs. */
export const PATRONI_API_CALLS: ReadonlyArray<{ call: string; needs: string }> = [
  { call: 'GET /patroni, /cluster, /config', needs: 'read-only: no credentials unless restapi.allowlist or verify_client restrict them' },
  { call: 'PATCH /config', needs: 'restapi.authentication (the agent changes only postgresql.parameters)' },
  { call: 'POST /restart', needs: 'restapi.authentication; only in restart mode (postgresql.allow_restart: true)' },
];

/** The REST API side: notes for the operator (the CLI writes them to standard error). */
export function patroniRestApiNotes(): string {
  return [
    "# tuner-agent --patroni: Patroni's REST API",
    '# Patroni has one set of REST API credentials (restapi.authentication) for every unsafe call:',
    '# give the agent that user name and password (patroni.username, patroni.password), over https',
    '# where the API serves it (restapi.certfile; patroni.cafile on the agent).',
    ...PATRONI_API_CALLS.map((c) => `#   ${c.call}: ${c.needs}`),
    '# The agent never calls POST /switchover, /failover, /reinitialize or PUT /config.',
    '# The grants (printed on standard output) are SQL for psql, run once on the leader.',
    '',
  ].join('\n');
}

/** The document: the grants, as SQL that psql runs as it is. */
export function patroniGrantsSql(user = 'agent_user'): string {
  return [
    `-- tuner-agent --patroni: ${user}'s grants, run once on the leader by a superuser (they reach every member):`,
    `GRANT pg_monitor TO ${user};`,
    `-- pg_monitor covers pg_settings' sourcefile (pg_read_all_settings), pg_stat_replication and`,
    `-- pg_stat_statements. No ALTER SYSTEM right is needed: changes go through Patroni.`,
    `-- Every member's pg_hba.conf (Patroni's postgresql.pg_hba) must let ${user} in from the agent's host.`,
    '',
  ].join('\n');
}

// The setup page's steps for Cloud B: two server parameters, the user and the extension, and the
// custom role (the same as `tuner-agent permissions --managed-b-flex`) with its assignment.
import { DATABASE_SQL, lines, type TargetSetup, type SetupStep } from '../../../target/setup.ts';
import type { ManagedBFlexConfig } from './config.ts';
import { managedBFlexRole } from './permissions.ts';

/** The Cloud B placeholders of agent.yaml, for the role's scope and name. */
const FLEX_PLACEHOLDERS = {
  subscriptionId: '<SUBSCRIPTION_ID>',
  resourceGroupName: '<RESOURCE_GROUP_NAME>',
  serverName: '<SERVER_NAME>',
} satisfies ManagedBFlexConfig;

export function managedBFlexSteps(): SetupStep[] {
  const { subscriptionId, resourceGroupName, serverName } = FLEX_PLACEHOLDERS;
  const role = managedBFlexRole(FLEX_PLACEHOLDERS);
  const scope = `/subscriptions/${subscriptionId}/resourceGroups/${resourceGroupName}`;
  const parameterSet = `az postgres flexible-server parameter set --resource-group ${resourceGroupName} --server-name ${serverName}`;
  return [
    {
      id: 'server-parameters',
      title: 'First, two server parameters: the extension allow-list and pg_stat_statements.track',
      note: 'azure.extensions is the allow-list of extensions: keep any extension it already lists (its value is the whole list, comma-separated). pg_stat_statements.track may be top or all. The same in the portal: the server, Server parameters.',
      text: lines(
        `${parameterSet} --name azure.extensions --value pg_stat_statements`,
        `${parameterSet} --name pg_stat_statements.track --value top`,
      ),
    },
    {
      id: 'database-sql',
      title: 'On the database, as the admin user (psql, port 5432)',
      note: `Connect with psql -h ${serverName}.postgres.database.azure.com -p 5432 -U <ADMIN_USER> <DBNAME>, to the database that connection_url names. Choose a strong password for agent_user in place of <AGENT_USER_PASSWORD>.`,
      text: DATABASE_SQL,
    },
    {
      id: 'role-json',
      title: 'The custom role (save as tuner-agent-role.json)',
      note: 'The seven actions the agent needs (the same role as ./tuner-agent permissions --managed-b-flex), assignable in the resource group of the flexible server.',
      text: `${JSON.stringify(role, null, 2)}\n`,
    },
    {
      id: 'role-assign',
      title: 'Create the role and assign it: the managed identity of the VM (production) or a service principal (container testing)',
      note: 'Setting this up needs rights to manage role assignments in the resource group. On a VM the agent needs no stored credentials. A service principal\u2019s output holds appId, password and tenant: pass them as CLOUDB_CLIENT_ID, CLOUDB_CLIENT_SECRET and CLOUDB_TENANT_ID (the container command below has them).',
      text: lines(
        'az role definition create --role-definition @tuner-agent-role.json',
        '# (a) production: the system-assigned managed identity of the VM the agent runs on',
        'az vm identity assign --resource-group <VM_RESOURCE_GROUP> --name <VM_NAME>   # prints its principalId',
        `az role assignment create --assignee-object-id <PRINCIPAL_ID> --assignee-principal-type ServicePrincipal --role "${role.Name}" --scope ${scope}`,
        '# (b) local container testing: a service principal with the role',
        `az ad sp create-for-rbac --name "${role.Name}" --role "${role.Name}" --scopes ${scope}   # appId -> CLOUDB_CLIENT_ID, password -> CLOUDB_CLIENT_SECRET, tenant -> CLOUDB_TENANT_ID`,
      ),
    },
  ];
}

export const managedBFlexSetup: TargetSetup = {
  connection: {
    host: '<SERVER_NAME>.postgres.database.azure.com',
    dbname: '<DBNAME>',
    query: '?sslmode=verify-full',
    comment: " The server's name: TLS, its certificate verified against the public roots in the agent's trust store.",
  },
  entries: [
    { key: 'subscription_id', value: '<SUBSCRIPTION_ID>' },
    { key: 'resource_group_name', value: '<RESOURCE_GROUP_NAME>' },
    { key: 'server_name', value: '<SERVER_NAME>' },
    // A container outside Cloud B has no managed identity: it signs in as a service principal.
    { key: 'CLOUDB_CLIENT_ID', value: '<CLIENT_ID>' },
    { key: 'CLOUDB_CLIENT_SECRET', value: '<CLIENT_SECRET>' },
    { key: 'CLOUDB_TENANT_ID', value: '<TENANT_ID>' },
  ],
  steps: () => managedBFlexSteps(),
};

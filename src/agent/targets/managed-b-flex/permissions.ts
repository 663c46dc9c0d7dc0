// What `tuner-agent permissions --managed-b-flex` prints: the spec's custom role as JSON (the
// file `az role definition create` takes), then the steps that create and assign it, each line
// starting with `#`, so that everything before the first `#` line parses as JSON.
import type { AgentConfig } from '../../config/load.ts';

/** The role actions each call needs, named in errors when Cloud B refuses one. This module imports
 * no SDK: the service's setup page shows the role too. */
export const ACTIONS = {
  restart: 'Microsoft.DBforPostgreSQL/flexibleServers/restart/action',
  serverRead: 'Microsoft.DBforPostgreSQL/flexibleServers/read',
  serverMetricDefinitionsRead: 'Microsoft.DBforPostgreSQL/flexibleServers/providers/Microsoft.Insights/metricDefinitions/read',
  configurationsRead: 'Microsoft.DBforPostgreSQL/flexibleServers/configurations/read',
  configurationsWrite: 'Microsoft.DBforPostgreSQL/flexibleServers/configurations/write',
  metricsRead: 'Microsoft.Insights/metrics/read',
  metricDefinitionsRead: 'Microsoft.Insights/metricDefinitions/read',
} as const;

/** The spec's seven actions, in its order. */
export const MANAGED_B_FLEX_ROLE_ACTIONS: readonly string[] = [
  ACTIONS.restart,
  ACTIONS.serverRead,
  ACTIONS.serverMetricDefinitionsRead,
  ACTIONS.configurationsRead,
  ACTIONS.configurationsWrite,
  ACTIONS.metricsRead,
  ACTIONS.metricDefinitionsRead,
];

export interface ManagedBFlexRole {
  Name: string;
  IsCustom: true;
  Description: string;
  Actions: string[];
  NotActions: string[];
  AssignableScopes: string[];
}

export function managedBFlexRole(config: AgentConfig | null): ManagedBFlexRole {
  const b = config?.managedBFlex;
  const subscription = b?.subscriptionId ?? '<subscription_id>';
  const resourceGroup = b?.resourceGroupName ?? '<resource_group_name>';
  return {
    // Role names are unique per tenant; flexible server names are unique too.
    Name: `tuner-agent ${b?.serverName ?? '<server_name>'}`,
    IsCustom: true,
    Description: 'tuner-agent: read a PostgreSQL flexible server, its server parameters and metrics, and change its server parameters',
    Actions: [...MANAGED_B_FLEX_ROLE_ACTIONS],
    NotActions: [],
    AssignableScopes: [`/subscriptions/${subscription}/resourceGroups/${resourceGroup}`],
  };
}

export function managedBFlexPermissionsText(config: AgentConfig | null): string {
  const role = managedBFlexRole(config);
  const scope = role.AssignableScopes[0]!;
  const rg = config?.managedBFlex.resourceGroupName ?? '<resource_group_name>';
  const steps = [
    '',
    '# The custom role above, for the resource group that holds the flexible server. Then:',
    '#',
    '# 1. Save the JSON above as tuner-agent-role.json and create the role:',
    '#      az role definition create --role-definition @tuner-agent-role.json',
    '#',
    '# 2a. On a VM (production): enable its system-assigned managed identity and assign it the role;',
    '#     the agent then needs no stored credentials:',
    '#      az vm identity assign --resource-group <vm_resource_group> --name <vm_name>',
    `#      az role assignment create --assignee-object-id <principalId printed above> --assignee-principal-type ServicePrincipal --role "${role.Name}" --scope ${scope}`,
    '#',
    '# 2b. For local container testing: a service principal with the role, at a scope that holds',
    "#     the flexible server and is not larger than the role's assignable scopes:",
    `#      az ad sp create-for-rbac --name "${role.Name}" --role "${role.Name}" --scopes ${scope}`,
    '#     Pass its output to the agent: appId as CLOUDB_CLIENT_ID, password as CLOUDB_CLIENT_SECRET,',
    '#     tenant as CLOUDB_TENANT_ID.',
    '#',
    '# 3. Server parameters, then the extension (as the admin user, in the database of connection_url):',
    `#      az postgres flexible-server parameter set --resource-group ${rg} --server-name ${config?.managedBFlex.serverName ?? '<server_name>'} --name azure.extensions --value pg_stat_statements`,
    `#      az postgres flexible-server parameter set --resource-group ${rg} --server-name ${config?.managedBFlex.serverName ?? '<server_name>'} --name pg_stat_statements.track --value top`,
    '#      CREATE EXTENSION IF NOT EXISTS pg_stat_statements;',
    '#     (keep any extensions azure.extensions already lists: its value is the whole list, comma-separated)',
    '',
  ];
  return `${JSON.stringify(role, null, 2)}\n${steps.join('\n')}`;
}

// What `tuner-agent permissions --managed-b-flex` prints: the spec's custom role as JSON (the
// file `az role definition create` takes) on standard output, alone, so that
// `permissions --managed-b-flex > tuner-agent-role.json` is that file; the steps that create and
// assign it are notes, `#` lines the CLI writes to standard error.
import type { TargetAgentConfig } from '../../../target/config.ts';
import { managedBFlexConfig, type ManagedBFlexConfig } from './config.ts';

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

/** The role for this server (its section of the configuration), or placeholders without one. */
export function managedBFlexRole(b: ManagedBFlexConfig | null): ManagedBFlexRole {
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

/** The document: the custom role as JSON, nothing else. */
export function managedBFlexRoleJson(config: TargetAgentConfig | null): string {
  return `${JSON.stringify(managedBFlexRole(config && managedBFlexConfig.of(config)), null, 2)}\n`;
}

/** The steps that create and assign the role: notes beside the document, never in it. */
export function managedBFlexSetupSteps(config: TargetAgentConfig | null): string {
  const role = managedBFlexRole(config && managedBFlexConfig.of(config));
  const scope = role.AssignableScopes[0]!;
  const rg = (config && managedBFlexConfig.of(config).resourceGroupName) ?? '<resource_group_name>';
  const steps = [
    '# The custom role (printed on standard output), for the resource group that holds the flexible server. Then:',
    '#',
    '# 1. Save the role as tuner-agent-role.json and create it:',
    '#      tuner-agent permissions --managed-b-flex > tuner-agent-role.json',
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
    `#      az postgres flexible-server parameter set --resource-group ${rg} --server-name ${(config && managedBFlexConfig.of(config).serverName) ?? '<server_name>'} --name azure.extensions --value pg_stat_statements`,
    `#      az postgres flexible-server parameter set --resource-group ${rg} --server-name ${(config && managedBFlexConfig.of(config).serverName) ?? '<server_name>'} --name pg_stat_statements.track --value top`,
    '#      CREATE EXTENSION IF NOT EXISTS pg_stat_statements;',
    '#     (keep any extensions azure.extensions already lists: its value is the whole list, comma-separated)',
    '',
  ];
  return steps.join('\n');
}

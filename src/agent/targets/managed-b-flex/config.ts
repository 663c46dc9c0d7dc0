// Cloud B's agent.yaml keys (section managed_b_flex), and the service principal's environment
// variables for a host without a managed identity.
import { compact, targetSection, type KeySpec } from '../../../target/config.ts';

export const managedBFlexConfigKeys: readonly KeySpec[] = [
  {
    section: 'managed_b_flex',
    key: 'subscription_id',
    env: 'AGENT_MANAGEDB_FLEX_SUBSCRIPTION_ID',
    kind: 'string',
    secret: false,
    requiredFor: ['managed-b-flex'],
    help: 'subscription of the flexible server',
  },
  {
    section: 'managed_b_flex',
    key: 'resource_group_name',
    env: 'AGENT_MANAGEDB_FLEX_RESOURCE_GROUP_NAME',
    kind: 'string',
    secret: false,
    requiredFor: ['managed-b-flex'],
    help: 'resource group of the flexible server',
  },
  {
    section: 'managed_b_flex',
    key: 'server_name',
    env: 'AGENT_MANAGEDB_FLEX_SERVER_NAME',
    kind: 'string',
    secret: false,
    requiredFor: ['managed-b-flex'],
    help: 'name of the flexible server',
  },
  {
    section: 'managed_b_flex',
    key: 'resource_manager_endpoint',
    env: 'AGENT_MANAGEDB_FLEX_RESOURCE_MANAGER_ENDPOINT',
    kind: 'http-url',
    secret: false,
    requiredFor: [],
    ours: true,
    help: 'Resource Manager endpoint for sovereign clouds (default https://management.azure.com)',
  },
  {
    section: null,
    key: 'CLOUDB_CLIENT_ID',
    env: 'CLOUDB_CLIENT_ID',
    kind: 'string',
    secret: false,
    requiredFor: [],
    help: 'service-principal client id (appId), for local container testing',
  },
  {
    section: null,
    key: 'CLOUDB_CLIENT_SECRET',
    env: 'CLOUDB_CLIENT_SECRET',
    kind: 'string',
    secret: true,
    requiredFor: [],
    help: 'service-principal secret (password)',
  },
  {
    section: 'managed_b_flex',
    key: 'managed_identity_client_id',
    env: 'AGENT_MANAGEDB_FLEX_MANAGED_IDENTITY_CLIENT_ID',
    kind: 'string',
    secret: false,
    requiredFor: [],
    ours: true,
    help: "client id of a user-assigned managed identity to use instead of the host's system-assigned one (on AKS with workload identity: the federated identity's client id, default AZURE_CLIENT_ID)",
  },
  {
    section: null,
    key: 'CLOUDB_TENANT_ID',
    env: 'CLOUDB_TENANT_ID',
    kind: 'string',
    secret: false,
    requiredFor: [],
    help: 'service-principal tenant id (tenant)',
  },
];

export interface ManagedBFlexConfig {
  subscriptionId?: string;
  resourceGroupName?: string;
  serverName?: string;
  resourceManagerEndpoint?: string;
  managedIdentityClientId?: string;
  clientId?: string;
  clientSecret?: string;
  tenantId?: string;
}

/** Section managed_b_flex, and the service principal's environment-only variables with it. */
export const managedBFlexConfig = targetSection<ManagedBFlexConfig>(
  'managed_b_flex',
  managedBFlexConfigKeys,
  [
    {
      keys: ['CLOUDB_CLIENT_ID', 'CLOUDB_CLIENT_SECRET', 'CLOUDB_TENANT_ID'],
      targets: ['managed-b-flex'],
      why: 'a service principal is its appId, password and tenant together: set all three, or none to use the managed identity of this VM',
    },
  ],
  (v) =>
    compact({
      subscriptionId: v.string('subscription_id'),
      resourceGroupName: v.string('resource_group_name'),
      serverName: v.string('server_name'),
      resourceManagerEndpoint: v.string('resource_manager_endpoint'),
      managedIdentityClientId: v.string('managed_identity_client_id'),
      clientId: v.string('CLOUDB_CLIENT_ID'),
      clientSecret: v.string('CLOUDB_CLIENT_SECRET'),
      tenantId: v.string('CLOUDB_TENANT_ID'),
    }),
);

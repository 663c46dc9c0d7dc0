// Who the agent is on Cloud B, and where it talks to. When several identities are present, the
// first of these is used (docs/cloud-b.md, "Which identity"):
//   1. the service principal of CLOUDB_CLIENT_ID / CLOUDB_CLIENT_SECRET / CLOUDB_TENANT_ID (all
//      three set: someone chose it explicitly, typically for local container testing);
//   2. workload identity on AKS: the token file the workload identity webhook mounts
//      (AZURE_FEDERATED_TOKEN_FILE, with AZURE_TENANT_ID), exchanged for the federated
//      identity's token; its client id is managed_b_flex.managed_identity_client_id, else
//      AZURE_CLIENT_ID;
//   3. a user-assigned managed identity: managed_b_flex.managed_identity_client_id;
//   4. the host's system-assigned managed identity, no stored credentials.
// The Resource Manager endpoint is ours to configure (sovereign clouds, tests); the token
// authority and the managed identity endpoint come from the SDK's own standard variables.
import {
  AzureAuthorityHosts,
  ClientSecretCredential,
  ManagedIdentityCredential,
  WorkloadIdentityCredential,
  type TokenCredential,
} from '@azure/identity';

import type { ManagedBFlexConfig } from './config.ts';

export const DEFAULT_RESOURCE_MANAGER_ENDPOINT = 'https://management.azure.com';

export interface ResourceManager {
  /** https://management.azure.com, without a trailing slash. */
  endpoint: string;
  /** The token scope that goes with it: `<endpoint>/.default`. */
  scope: string;
}

export interface ManagedBFlexIdentity {
  credential: TokenCredential;
  /** For people: "managed identity" or "service principal <client id>". */
  description: string;
  /** What to do when it cannot get a token, in the words of the setup steps. */
  fix: string;
}

/** The Resource Manager endpoint from managed_b_flex.resource_manager_endpoint, checked. */
export function resourceManager(config: ManagedBFlexConfig): ResourceManager {
  const raw = config.resourceManagerEndpoint ?? DEFAULT_RESOURCE_MANAGER_ENDPOINT;
  const url = new URL(raw);
  if (url.protocol !== 'https:') {
    throw new Error(
      `managed_b_flex.resource_manager_endpoint: expected an https:// URL (the Azure SDK sends its bearer tokens over HTTPS only), got ${JSON.stringify(raw)}`,
    );
  }
  if (url.search || url.hash || (url.pathname !== '/' && url.pathname !== '')) {
    throw new Error(
      `managed_b_flex.resource_manager_endpoint: expected only scheme, host and port, such as https://management.usgovcloudapi.net, got ${JSON.stringify(raw)}`,
    );
  }
  const endpoint = url.origin;
  return { endpoint, scope: `${endpoint}/.default` };
}

const KNOWN_AUTHORITY_HOSTS = new Set<string>(Object.values(AzureAuthorityHosts).map((h) => new URL(h).host));

/** MSAL validates an authority it does not know against the public cloud's discovery service.
 * An authority host the operator set (AZURE_AUTHORITY_HOST) that is not one of the known clouds
 * (Azure Stack, a private cloud, our tests) is trusted as given instead. */
function trustsAuthorityAsGiven(env: NodeJS.ProcessEnv): boolean {
  const host = env['AZURE_AUTHORITY_HOST'];
  if (!host) return false;
  try {
    return !KNOWN_AUTHORITY_HOSTS.has(new URL(host).host);
  } catch {
    return false;
  }
}

const SERVICE_PRINCIPAL_KEYS = ['CLOUDB_CLIENT_ID', 'CLOUDB_CLIENT_SECRET', 'CLOUDB_TENANT_ID'] as const;

/** The credential, made once per process and reused by every client. */
export function createIdentity(config: ManagedBFlexConfig, env: NodeJS.ProcessEnv = process.env): ManagedBFlexIdentity {
  const given = { CLOUDB_CLIENT_ID: config.clientId, CLOUDB_CLIENT_SECRET: config.clientSecret, CLOUDB_TENANT_ID: config.tenantId };
  const missing = SERVICE_PRINCIPAL_KEYS.filter((k) => given[k] === undefined);
  if (missing.length > 0 && missing.length < SERVICE_PRINCIPAL_KEYS.length) {
    throw new Error(
      `a service principal needs all of CLOUDB_CLIENT_ID, CLOUDB_CLIENT_SECRET and CLOUDB_TENANT_ID, and ${missing.join(', ')} ${missing.length === 1 ? 'is' : 'are'} not set ` +
        "(set all three from the service principal's appId, password and tenant, or none of them to use the managed identity of this VM)",
    );
  }
  const { clientId, clientSecret, tenantId } = config;
  if (clientId !== undefined && clientSecret !== undefined && tenantId !== undefined) {
    return {
      credential: new ClientSecretCredential(tenantId, clientId, clientSecret, { disableInstanceDiscovery: trustsAuthorityAsGiven(env) }),
      description: `service principal ${clientId} (tenant ${tenantId})`,
      fix: 'check CLOUDB_CLIENT_ID, CLOUDB_CLIENT_SECRET and CLOUDB_TENANT_ID against the appId, password and tenant printed when the service principal was created (tuner-agent permissions --managed-b-flex shows the command)',
    };
  }
  const federatedTokenFile = env['AZURE_FEDERATED_TOKEN_FILE'];
  if (federatedTokenFile) {
    const workloadClientId = config.managedIdentityClientId ?? env['AZURE_CLIENT_ID'];
    const workloadTenantId = env['AZURE_TENANT_ID'];
    if (!workloadClientId || !workloadTenantId) {
      throw new Error(
        `AZURE_FEDERATED_TOKEN_FILE is set (workload identity on AKS), but ${!workloadClientId ? 'no client id (AZURE_CLIENT_ID or managed_b_flex.managed_identity_client_id)' : 'AZURE_TENANT_ID'} is: ` +
          'label the pod azure.workload.identity/use: "true" and give its service account the azure.workload.identity/client-id annotation, so that the webhook sets all three',
      );
    }
    return {
      credential: new WorkloadIdentityCredential({
        tenantId: workloadTenantId,
        clientId: workloadClientId,
        tokenFilePath: federatedTokenFile,
        disableInstanceDiscovery: trustsAuthorityAsGiven(env),
      }),
      description: `workload identity ${workloadClientId} (tenant ${workloadTenantId})`,
      fix:
        `check that the user-assigned identity ${workloadClientId} has a federated credential for this pod's service account (az identity federated-credential list) ` +
        "and the custom role at the flexible server's resource group (tuner-agent permissions --managed-b-flex shows the commands)",
    };
  }
  if (config.managedIdentityClientId) {
    const clientId = config.managedIdentityClientId;
    return {
      credential: new ManagedIdentityCredential({ clientId }),
      description: `user-assigned managed identity ${clientId}`,
      fix:
        `check that the user-assigned identity with client id ${clientId} is assigned to this VM (az vm identity show) ` +
        "and has the custom role at the flexible server's resource group (tuner-agent permissions --managed-b-flex shows the commands)",
    };
  }
  return {
    credential: new ManagedIdentityCredential(),
    description: 'managed identity of this host',
    fix: "enable the system-assigned managed identity of this VM and assign it the custom role at the flexible server's resource group (tuner-agent permissions --managed-b-flex shows the commands); off a VM, set CLOUDB_CLIENT_ID, CLOUDB_CLIENT_SECRET and CLOUDB_TENANT_ID",
  };
}

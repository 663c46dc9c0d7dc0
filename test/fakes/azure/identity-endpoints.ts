// The token side of the fake Cloud B, in the shapes the installed @azure/identity and MSAL use:
//   managed identity, VM form (IMDS)      GET  /metadata/identity/oauth2/token   (Metadata: true)
//     reached through AZURE_POD_IDENTITY_AUTHORITY_HOST, which MSAL honours for IMDS
//   managed identity, App Service form    GET  /msi/token                        (X-IDENTITY-HEADER)
//     reached through IDENTITY_ENDPOINT + IDENTITY_HEADER
//   service principal (AZURE_AUTHORITY_HOST)
//     GET  /{tenant}/v2.0/.well-known/openid-configuration   MSAL reads it first
//     GET  /common/discovery/instance                        only if MSAL validates the authority
//     POST /{tenant}/oauth2/v2.0/token                       client_credentials
//   user-assigned managed identity: IMDS with `client_id`; an identity not assigned to the VM is
//     400 "Identity not found" (https://learn.microsoft.com/entra/identity/managed-identities-azure-resources/how-to-use-vm-token#error-handling)
//   workload identity (AKS): the same token endpoint, client_credentials with a client_assertion
//     (the federated token file's content) instead of a secret
//     (https://learn.microsoft.com/entra/identity-platform/v2-oauth2-client-creds-grant-flow#second-case-access-token-request-with-a-federated-credential)
import { randomBytes } from 'node:crypto';
import { json, type Reply } from './http.ts';

export interface ServicePrincipal {
  tenantId: string;
  clientId: string;
  clientSecret: string;
}

/** A user-assigned identity federated with a Kubernetes service account's token. */
export interface WorkloadIdentity {
  tenantId: string;
  clientId: string;
  /** What the webhook mounts at AZURE_FEDERATED_TOKEN_FILE. */
  federatedToken: string;
}

export interface IssuedToken {
  /** "managed identity (IMDS)", "managed identity (IMDS) user-assigned <id>", "managed identity
   * (App Service)", "service principal <id>" or "workload identity <id>". */
  identity: string;
  resource: string;
}

export interface TokenIssuer {
  /** Answers a token-side request, or null when the path is not one. */
  handle(method: string, url: URL, headers: Record<string, string | string[] | undefined>, body: string): Reply | null;
  /** Who a bearer token was issued to, or undefined for a token the fake never issued. */
  tokenOwner(token: string): IssuedToken | undefined;
}

export interface TokenIssuerOptions {
  baseUrl: () => string;
  servicePrincipal: ServicePrincipal;
  identityHeader: string;
  /** Client ids of the user-assigned identities assigned to the VM. */
  userAssignedClientIds: readonly string[];
  workloadIdentity: WorkloadIdentity;
}

export function createTokenIssuer({
  baseUrl,
  servicePrincipal,
  identityHeader,
  userAssignedClientIds,
  workloadIdentity,
}: TokenIssuerOptions): TokenIssuer {
  const issued = new Map<string, IssuedToken>();
  const issue = (identity: string, resource: string): string => {
    const token = `fake-${randomBytes(24).toString('base64url')}`;
    issued.set(token, { identity, resource });
    return token;
  };
  const expiresOn = () => String(Math.floor(Date.now() / 1000) + 3600);

  const managedIdentity = (identity: string, url: URL): Reply => {
    const resource = url.searchParams.get('resource');
    if (!resource) return json(400, { error: 'invalid_request', error_description: "Required query variable 'resource' is missing" });
    return json(200, {
      access_token: issue(identity, resource),
      refresh_token: '',
      expires_in: '3600',
      expires_on: expiresOn(),
      not_before: String(Math.floor(Date.now() / 1000)),
      resource,
      token_type: 'Bearer',
    });
  };

  const openIdConfiguration = (tenant: string): Reply => {
    const base = `${baseUrl()}/${tenant}`;
    return json(200, {
      token_endpoint: `${base}/oauth2/v2.0/token`,
      token_endpoint_auth_methods_supported: ['client_secret_post', 'private_key_jwt', 'client_secret_basic'],
      jwks_uri: `${base}/discovery/v2.0/keys`,
      response_modes_supported: ['query', 'fragment', 'form_post'],
      subject_types_supported: ['pairwise'],
      id_token_signing_alg_values_supported: ['RS256'],
      response_types_supported: ['code', 'id_token', 'code id_token', 'id_token token'],
      scopes_supported: ['openid', 'profile', 'email', 'offline_access'],
      issuer: `${base}/v2.0`,
      request_uri_parameter_supported: false,
      userinfo_endpoint: `${baseUrl()}/oidc/userinfo`,
      authorization_endpoint: `${base}/oauth2/v2.0/authorize`,
      device_authorization_endpoint: `${base}/oauth2/v2.0/devicecode`,
      http_logout_supported: true,
      frontchannel_logout_supported: true,
      end_session_endpoint: `${base}/oauth2/v2.0/logout`,
      claims_supported: ['sub', 'iss', 'aud', 'exp', 'iat', 'tid'],
      tenant_region_scope: 'EU',
      cloud_instance_name: 'fake.cloudb',
      cloud_graph_host_name: 'graph.fake.cloudb',
      msgraph_host: 'graph.fake.cloudb',
    });
  };

  const resourceOf = (form: URLSearchParams): string => {
    const scope = form.get('scope') ?? '';
    return (
      scope
        .split(' ')
        .find((s) => s.endsWith('/.default'))
        ?.replace(/\/\.default$/, '') ?? scope
    );
  };

  const clientCredentials = (tenant: string, body: string): Reply => {
    const form = new URLSearchParams(body);
    const sp = servicePrincipal;
    const refuse = (code: number, error: string, description: string) =>
      json(code, {
        error,
        error_description: description,
        error_codes: [code === 401 ? 7000215 : 90002],
        timestamp: new Date().toISOString(),
        trace_id: crypto.randomUUID(),
        correlation_id: crypto.randomUUID(),
      });
    // The tenant and the application must exist, whichever way the application proves itself.
    const application = (expected: { tenantId: string; clientId: string }): Reply | null => {
      if (tenant !== expected.tenantId) return refuse(400, 'invalid_request', `AADSTS90002: Tenant '${tenant}' not found.`);
      if (form.get('client_id') !== expected.clientId)
        return refuse(400, 'unauthorized_client', `AADSTS700016: Application with identifier '${form.get('client_id')}' was not found.`);
      return null;
    };
    const tokenFor = (identity: string): Reply =>
      json(200, { token_type: 'Bearer', expires_in: 3599, ext_expires_in: 3599, access_token: issue(identity, resourceOf(form)) });
    if (form.get('grant_type') !== 'client_credentials')
      return refuse(400, 'unsupported_grant_type', 'AADSTS70003: only client_credentials is served here');
    if (form.get('client_assertion_type') === 'urn:ietf:params:oauth:client-assertion-type:jwt-bearer') {
      const wi = workloadIdentity;
      const unknown = application(wi);
      if (unknown) return unknown;
      if (form.get('client_assertion') !== wi.federatedToken)
        return refuse(401, 'invalid_client', 'AADSTS70021: No matching federated identity record found for presented assertion.');
      return tokenFor(`workload identity ${wi.clientId}`);
    }
    const unknown = application(sp);
    if (unknown) return unknown;
    if (form.get('client_secret') !== sp.clientSecret)
      return refuse(401, 'invalid_client', 'AADSTS7000215: Invalid client secret provided.');
    return tokenFor(`service principal ${sp.clientId}`);
  };

  return {
    handle(method, url, headers, body) {
      // MSAL asks for the IMDS path with a trailing slash.
      const path = url.pathname.replace(/(.)\/$/, '$1');
      if (method === 'GET' && path === '/metadata/identity/oauth2/token') {
        if (headers['metadata'] !== 'true')
          return json(400, { error: 'invalid_request', error_description: 'Required metadata header not specified' });
        const clientId = url.searchParams.get('client_id');
        if (clientId === null) return managedIdentity('managed identity (IMDS)', url);
        if (!userAssignedClientIds.includes(clientId))
          return json(400, { error: 'invalid_request', error_description: 'Identity not found' });
        return managedIdentity(`managed identity (IMDS) user-assigned ${clientId}`, url);
      }
      if (method === 'GET' && path === '/msi/token') {
        if (headers['x-identity-header'] !== identityHeader)
          return json(401, { statusCode: 401, message: 'X-IDENTITY-HEADER is missing or wrong' });
        return managedIdentity('managed identity (App Service)', url);
      }
      if (method === 'GET' && path === '/common/discovery/instance') {
        const host = new URL(baseUrl()).host;
        return json(200, {
          tenant_discovery_endpoint: `${baseUrl()}/common/v2.0/.well-known/openid-configuration`,
          'api-version': '1.1',
          metadata: [{ preferred_network: host, preferred_cache: host, aliases: [host] }],
        });
      }
      const oidc = /^\/([^/]+)\/v2\.0\/\.well-known\/openid-configuration$/.exec(path);
      if (method === 'GET' && oidc) return openIdConfiguration(oidc[1]!);
      const token = /^\/([^/]+)\/oauth2\/v2\.0\/token$/.exec(path);
      if (method === 'POST' && token) return clientCredentials(token[1]!, body);
      return null;
    },
    tokenOwner: (token) => issued.get(token),
  };
}

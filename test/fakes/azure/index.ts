// A fake Cloud B on loopback HTTPS, speaking the wire protocol the real SDKs speak:
//   Resource Manager   GET  …/flexibleServers/{name}              api-version: FLEXIBLE_SERVER_API_VERSIONS
//                      GET  …/configurations (paged, nextLink)   GET …/configurations/{name}
//                      PUT|PATCH …/configurations/{name} → 202 + Azure-AsyncOperation + Location,
//                        then GET …/locations/{loc}/azureAsyncOperation/{id} (InProgress, then
//                        Succeeded or Failed) and GET …/operationResults/{id}
//                      POST …/restart (the same long-running operation)
//   Azure Monitor      GET  …/providers/Microsoft.Insights/metrics    api-version: MONITOR_API_VERSIONS
//   tokens             managed identity (IMDS and App Service forms), service principal
// Paths and names are case-insensitive, as Resource Manager's are. It checks every bearer token
// (issued here, for this endpoint), refuses denied role actions with 403 AuthorizationFailed,
// runs one operation at a time (operations.ts: a write takes effect when its operation
// completes; a restart takes time, PostgreSQL down meanwhile; others are refused as busy), and
// applies written server parameters to a real throwaway PostgreSQL cluster. That cluster accepts TLS only, as
// a flexible server with require_secure_transport = ON does; one test CA signs both its
// certificate and the fake's HTTPS one, and NODE_EXTRA_CA_CERTS = certFile trusts both.
import { setTimeout as sleep } from 'node:timers/promises';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { Cluster } from '../../../src/lab/cluster.ts';
import { FakeFlexibleServer, type Sku } from './flexible-server.ts';
import { armError, json, readBody, send, type Reply } from './http.ts';
import { createTokenIssuer, type ServicePrincipal, type WorkloadIdentity } from './identity-endpoints.ts';
import { answerMetrics, DEFAULT_METRIC_FIGURES, MONITOR_API_VERSIONS, type MetricFigures } from './monitor.ts';
import { ServerOperations, type Operation, type Outcome } from './operations.ts';

/** The api-version the agent and the SDK send. */
export const FLEXIBLE_SERVER_API_VERSION = '2025-08-01';
/** Every api-version of Microsoft.DBforPostgreSQL/flexibleServers (and its configurations) the
 * service documents, GA and preview: https://learn.microsoft.com/azure/templates/microsoft.dbforpostgresql/allversions,
 * and 2025-08-01 from the REST reference (https://learn.microsoft.com/rest/api/postgresql/configurations/put).
 * Resource Manager refuses any other with 400 InvalidApiVersionParameter, listing these. */
export const FLEXIBLE_SERVER_API_VERSIONS = [
  '2020-02-14-preview',
  '2021-06-01-preview',
  '2021-06-01',
  '2022-01-20-preview',
  '2022-03-08-preview',
  '2022-12-01',
  '2023-03-01-preview',
  '2023-06-01-preview',
  '2023-12-01-preview',
  '2024-03-01-preview',
  '2024-08-01',
  '2024-11-01-preview',
  '2025-01-01-preview',
  '2025-08-01',
] as const;

/** How long operations take. Small by default, so that tests stay fast; the SDK polls at the
 * Retry-After this fake sends (1 s), polling once at once first. Real ones take seconds (a
 * configuration) to a minute (a restart). */
export interface Timing {
  /** From a configuration write's 202 to its value in pg_settings and the operation Succeeded. */
  operationMs: number;
  /** How long PostgreSQL stays down in a restart, on top of stopping and starting it. */
  restartDownMs: number;
}
export const DEFAULT_TIMING: Timing = { operationMs: 300, restartDownMs: 300 };

/** How a busy server meets a configuration write: a 409 at once, or an accepted operation that fails. */
export type BusyStyle = 'conflict' | 'operation-failed';

export interface RecordedRequest {
  method: string;
  path: string;
  /** When the answer was sent (Date.now()). */
  at: number;
  query: Record<string, string>;
  status: number;
  /** Who the bearer token belongs to, for Resource Manager calls. */
  caller?: string;
  body?: string;
}

export interface FakeAzureOptions {
  /** Started with `tls` (src/lab/cluster.ts): the fake's HTTPS certificate comes from the same CA. */
  cluster: Cluster;
  subscriptionId?: string;
  resourceGroup?: string;
  serverName?: string;
  sku?: Sku;
  /** Value of the azure.extensions server parameter. */
  extensions?: string;
  servicePrincipal?: ServicePrincipal;
  identityHeader?: string;
  /** Client ids of user-assigned identities assigned to the VM (one by default). */
  userAssignedClientIds?: readonly string[];
  workloadIdentity?: WorkloadIdentity;
  /** Server name in the resource; the test points connection_url at 127.0.0.1. */
  fqdn?: string;
}

export interface FakeAzure {
  readonly url: string;
  /** The CA of the fake's HTTPS and PostgreSQL certificates: what NODE_EXTRA_CA_CERTS names. */
  readonly certFile: string;
  readonly subscriptionId: string;
  readonly resourceGroup: string;
  readonly serverName: string;
  readonly servicePrincipal: ServicePrincipal;
  readonly identityHeader: string;
  readonly userAssignedClientIds: readonly string[];
  readonly workloadIdentity: WorkloadIdentity;
  readonly server: FakeFlexibleServer;
  readonly requests: RecordedRequest[];
  /** Every long-running operation started, in order, with its start, end and outcome. */
  readonly operations: readonly Operation[];
  /** How long operations take; back to DEFAULT_TIMING on reset(). */
  timing: Timing;
  metricFigures: MetricFigures;
  /** Refuses this role action (403 AuthorizationFailed) until allowAll(). */
  deny(action: string): void;
  /** From now on every caller holds exactly this role: any other action answers 403
   * AuthorizationFailed (Azure's wildcards `*` allowed), until allowAll(). */
  useRole(actions: readonly string[]): void;
  allowAll(): void;
  /** The next `requests` Resource Manager and Azure Monitor requests (token requests aside)
   * answer 429, as Resource Manager throttles, with Retry-After: `retryAfterSeconds`. */
  throttle(options: { requests: number; retryAfterSeconds: number }): void;
  /** The next configuration writes meet a busy server, one style each. */
  busy(...styles: BusyStyle[]): void;
  /** The next configuration write is carried out, but its operation reports a failure: an
   * answer that cannot be trusted to say what the server holds. */
  failNextWriteAfterApplying(): void;
  /** Restarts the server as a user would from the portal (the same operation as POST …/restart);
   * resolves when the restart is over. */
  restart(): Promise<void>;
  /** Such a restart starts just before the next configuration write reaches the server. */
  restartBeforeNextWrite(): void;
  /** Clean state between tests: no operation running, server reset, nothing denied or busy,
   * requests forgotten. */
  reset(): Promise<void>;
  close(): Promise<void>;
}

const DB = 'Microsoft.DBforPostgreSQL';
const PAGE_SIZE = 150;

export async function startFakeAzure(options: FakeAzureOptions): Promise<FakeAzure> {
  const subscriptionId = options.subscriptionId ?? '7a3c1e55-2f4b-4d8e-9c61-0b5a7d2e4f10';
  const resourceGroup = options.resourceGroup ?? 'tuner-rg';
  const serverName = options.serverName ?? 'tuner-flex-1';
  const location = 'westeurope';
  const servicePrincipal = options.servicePrincipal ?? {
    tenantId: '5e0c2b7a-61f4-4c3a-9d2e-8b1f0a4c6e21',
    clientId: '2d9b6c1e-7f3a-4e55-8a20-c4b1e9d07f3a',
    clientSecret: 'sp-Secret~9QxT7vLm2KpW4',
  };
  const identityHeader = options.identityHeader ?? 'fake-identity-header-51c2';
  const serverId = `/subscriptions/${subscriptionId}/resourceGroups/${resourceGroup}/providers/${DB}/flexibleServers/${serverName}`;

  const ca = options.cluster.ca;
  if (!ca)
    throw new Error(
      'fake Cloud B: its PostgreSQL accepts TLS only, as require_secure_transport = ON does: start the cluster with tls: { ca }',
    );
  const certificate = ca.issue(['127.0.0.1', 'localhost']);
  let baseUrl = '';
  const userAssignedClientIds = options.userAssignedClientIds ?? ['8a4f2c1d-3b6e-4f70-9d15-e2c7b0a9f463'];
  const workloadIdentity = options.workloadIdentity ?? {
    tenantId: servicePrincipal.tenantId,
    clientId: '4c7e9a21-0d5b-4e83-b6f2-19a8c3d5e7f0',
    federatedToken: 'eyJhbGciOiJSUzI1NiJ9.fake-projected-service-account-token.c2ln',
  };
  const issuer = createTokenIssuer({ baseUrl: () => baseUrl, servicePrincipal, identityHeader, userAssignedClientIds, workloadIdentity });
  const server = await FakeFlexibleServer.create({
    cluster: options.cluster,
    id: serverId,
    name: serverName,
    location,
    fqdn: options.fqdn ?? `${serverName}.postgres.database.azure.com`,
    sku: options.sku ?? { name: 'Standard_D4ds_v5', tier: 'GeneralPurpose' },
    extensions: options.extensions ?? 'pgcrypto,pg_stat_statements',
  });

  const requests: RecordedRequest[] = [];
  const denied = new Set<string>();
  /** The role's actions as patterns, or null when every action is allowed. */
  let role: RegExp[] | null = null;
  const throttled = { requests: 0, retryAfterSeconds: 0 };
  const busyQueue: BusyStyle[] = [];
  let failAfterApplying = false;
  let restartBeforeWrite = false;
  const operations = new ServerOperations();
  let timing: Timing = { ...DEFAULT_TIMING };
  let metricFigures: MetricFigures = { ...DEFAULT_METRIC_FIGURES };

  const operationUrls = (id: string) => {
    const base = `${baseUrl}/subscriptions/${subscriptionId}/providers/${DB}/locations/${location}`;
    return {
      'Azure-AsyncOperation': `${base}/azureAsyncOperation/${id}?api-version=${FLEXIBLE_SERVER_API_VERSION}`,
      Location: `${base}/operationResults/${id}?api-version=${FLEXIBLE_SERVER_API_VERSION}`,
      'Retry-After': '1',
    };
  };
  const accepted = (op: Operation): Reply => json(202, undefined, operationUrls(op.id));

  // While an operation runs, the server is busy: a configuration write is refused at once with
  // 409 ServerIsBusy, the message the service sends
  // (https://github.com/Azure/azure-postgresql/issues/134; the flexible server states
  // https://learn.microsoft.com/rest/api/postgresql/servers/get, ServerState: Updating, Restarting).
  const serverIsBusy = (): Reply =>
    armError(
      409,
      'ServerIsBusy',
      `Cannot complete operation while server '${serverName}' is busy processing another operation. Try again later.`,
    );

  /** A configuration write's operation: the server is Updating, and the value reaches
   * PostgreSQL when the operation's time is up, not before. */
  const startConfigurationWrite = (name: string, value: string, source: string, reportFailure: boolean): Operation =>
    operations.start(
      'configuration',
      async (): Promise<Outcome> => {
        server.state = 'Updating';
        try {
          await sleep(timing.operationMs);
          const outcome = await server.write(name, value, source);
          if (!outcome.ok) return { status: 'Failed', error: { code: outcome.code, message: outcome.message } };
          if (reportFailure) {
            return {
              status: 'Failed',
              error: { code: 'InternalServerError', message: 'An unexpected error occured while processing the request.' },
            };
          }
          return { status: 'Succeeded', configuration: name.toLowerCase() };
        } finally {
          server.state = 'Ready';
        }
      },
      name.toLowerCase(),
    );

  /** POST …/restart. A restart asked for while another operation runs is accepted, and its
   * operation then fails with ServerIsNotReady: "Restart or Stop Server can only be performed on
   * Started servers" (seen through the SDK as a failed poll, not a refused request:
   * https://github.com/hashicorp/terraform-provider-azurerm/issues/29219, fixed by checking the
   * server's state first, https://github.com/hashicorp/terraform-provider-azurerm/pull/29221).
   * The restart itself takes time; PostgreSQL refuses connections meanwhile (ServerState
   * Restarting, https://learn.microsoft.com/rest/api/postgresql/servers/get). */
  const startRestart = (): Operation => {
    if (operations.running) {
      return operations.settled({
        status: 'Failed',
        error: {
          code: 'ServerIsNotReady',
          message: `Restart or Stop Server can only be performed on Started servers. Sever Name = ${serverName}, Current Server State = ${server.state}`,
        },
      });
    }
    return operations.start('restart', async () => {
      await server.restart(timing.restartDownMs);
      return { status: 'Succeeded' };
    });
  };

  const authorizationFailed = (caller: string, action: string, scope: string): Reply =>
    armError(
      403,
      'AuthorizationFailed',
      `The client '${caller}' with object id '0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b' does not have authorization to perform action '${action}' over scope '${scope}' or the scope is invalid. If access was recently granted, please refresh your credentials.`,
    );

  const writeConfiguration = async (name: string, body: string): Promise<Reply> => {
    if (restartBeforeWrite) {
      restartBeforeWrite = false;
      startRestart();
    }
    let parsed: { properties?: { value?: unknown; source?: unknown } };
    try {
      parsed = JSON.parse(body) as typeof parsed;
    } catch {
      return armError(400, 'InvalidRequestContent', 'The request content was invalid and could not be deserialized.');
    }
    const { value, source } = parsed.properties ?? {};
    if (typeof value !== 'string')
      return armError(400, 'InvalidParameterValue', `properties.value is required to update configuration '${name}'.`);
    if (operations.running) return serverIsBusy();
    const style = busyQueue.shift();
    if (style === 'conflict') return serverIsBusy();
    if (style === 'operation-failed') {
      // The other form of busy: accepted, then the operation fails with ServerBusy
      // (https://github.com/Azure/bicep-registry-modules/issues/4451).
      return accepted(
        operations.settled({
          status: 'Failed',
          error: { code: 'ServerBusy', message: `Server '${serverName}' is busy with another operation. Please try again later.` },
        }),
      );
    }
    const writtenSource = typeof source === 'string' ? source : 'user-override';
    const refused = await server.refusal(name, value, writtenSource);
    if (refused && !refused.ok) return armError(refused.status, refused.code, refused.message);
    const reportFailure = failAfterApplying;
    failAfterApplying = false;
    return accepted(startConfigurationWrite(name, value, writtenSource, reportFailure));
  };

  const listConfigurations = async (url: URL): Promise<Reply> => {
    const all = await server.configurations();
    const offset = Number(url.searchParams.get('$skipToken') ?? 0);
    const page = all.slice(offset, offset + PAGE_SIZE);
    const next =
      offset + PAGE_SIZE < all.length
        ? `${baseUrl}${serverId}/configurations?api-version=${url.searchParams.get('api-version')}&$skipToken=${offset + PAGE_SIZE}`
        : undefined;
    return json(200, { value: page, ...(next && { nextLink: next }) });
  };

  /** GET …/azureAsyncOperation/{id} (`results` false) or …/operationResults/{id} (true). */
  const operationStatus = async (id: string, results: boolean): Promise<Reply> => {
    const op = operations.get(id);
    if (!op) return armError(404, 'OperationNotFound', `The operation '${id}' was not found.`);
    const outcome = op.outcome;
    if (!outcome) {
      if (results) return json(202, undefined, operationUrls(id));
      return json(200, { name: id, status: 'InProgress', startTime: op.startTime }, { 'Retry-After': '1' });
    }
    if (results) {
      if (outcome.status === 'Failed') return armError(400, outcome.error.code, outcome.error.message);
      return outcome.configuration ? json(200, await server.configuration(outcome.configuration)) : json(204);
    }
    return json(200, {
      name: id,
      status: outcome.status,
      startTime: op.startTime,
      endTime: op.endTime,
      ...(outcome.status === 'Failed' && { error: outcome.error }),
    });
  };

  /** What Resource Manager answers for a path outside what exists
   * (https://learn.microsoft.com/azure/azure-resource-manager/troubleshooting/error-not-found):
   * the first missing scope, in its words. */
  const missing = (path: string): { answer: () => Reply } | null => {
    const scope = /^\/subscriptions\/([^/]+)(?:\/resourcegroups\/([^/]+)(?:\/providers\/([^/]+)\/([^/]+)\/([^/]+))?)?/i.exec(path);
    if (!scope) return null;
    const [, subscription, group, namespace, type, name] = scope;
    if (subscription!.toLowerCase() !== subscriptionId.toLowerCase())
      return { answer: () => armError(404, 'SubscriptionNotFound', `The subscription '${subscription}' could not be found.`) };
    if (group === undefined) return null;
    if (group.toLowerCase() !== resourceGroup.toLowerCase())
      return { answer: () => armError(404, 'ResourceGroupNotFound', `Resource group '${group}' could not be found.`) };
    if (name === undefined) return null;
    return {
      answer: () =>
        armError(
          404,
          'ResourceNotFound',
          `The Resource '${namespace}/${type}/${name}' under resource group '${group}' was not found. For more details please go to https://aka.ms/ARMResourceNotFoundFix`,
        ),
    };
  };

  /** Whether the caller may perform `action`: not denied, and in the role when one is given. */
  const allowed = (action: string): boolean => !denied.has(action) && (role === null || role.some((pattern) => pattern.test(action)));

  /** Resource Manager: the route, the role action it needs, and the answer. */
  const arm = (method: string, url: URL, body: string): { action?: string; answer: () => Promise<Reply> | Reply } | null => {
    const path = url.pathname;
    const lower = path.toLowerCase();
    const serverLower = serverId.toLowerCase();
    const ops = new RegExp(
      `^/subscriptions/${subscriptionId}/providers/${DB}/locations/${location}/(azureasyncoperation|operationresults)/([^/]+)$`,
      'i',
    ).exec(path);
    if (ops && method === 'GET') return { answer: () => operationStatus(ops[2]!, ops[1]!.toLowerCase() === 'operationresults') };
    if (!lower.startsWith(serverLower)) return missing(path);
    // Resource Manager's paths are case-insensitive: the segments after the server's id too.
    const rest = path.slice(serverId.length);
    const restLower = rest.toLowerCase();
    if (rest === '' && method === 'GET') return { action: `${DB}/flexibleServers/read`, answer: () => json(200, server.resource()) };
    if (restLower === '/restart' && method === 'POST')
      return { action: `${DB}/flexibleServers/restart/action`, answer: () => accepted(startRestart()) };
    if (restLower === '/configurations' && method === 'GET')
      return { action: `${DB}/flexibleServers/configurations/read`, answer: () => listConfigurations(url) };
    const one = /^\/configurations\/([^/]+)$/i.exec(rest);
    if (one) {
      const name = decodeURIComponent(one[1]!);
      if (method === 'GET') {
        return {
          action: `${DB}/flexibleServers/configurations/read`,
          answer: async () => {
            const configuration = await server.configuration(name);
            return configuration
              ? json(200, configuration)
              : armError(404, 'ConfigurationNotExists', `The configuration '${name}' does not exist for server '${serverName}'.`);
          },
        };
      }
      if (method === 'PUT' || method === 'PATCH')
        return { action: `${DB}/flexibleServers/configurations/write`, answer: () => writeConfiguration(name, body) };
    }
    if (restLower === '/providers/microsoft.insights/metrics' && method === 'GET') {
      return {
        action: 'Microsoft.Insights/metrics/read',
        answer: () => answerMetrics(url, serverId, location, metricFigures, options.cluster),
      };
    }
    if (restLower === '/providers/microsoft.insights/metricdefinitions' && method === 'GET') {
      return {
        action: `${DB}/flexibleServers/providers/Microsoft.Insights/metricDefinitions/read`,
        answer: () =>
          json(200, {
            value: Object.keys(DEFAULT_METRIC_FIGURES).map((n) => ({
              name: { value: n, localizedValue: n },
              resourceId: serverId,
              primaryAggregationType: 'Average',
            })),
          }),
      };
    }
    return null;
  };

  const handle = async (
    method: string,
    url: URL,
    headers: Record<string, string | string[] | undefined>,
    body: string,
  ): Promise<{ reply: Reply; caller?: string }> => {
    const token = issuer.handle(method, url, headers, body);
    if (token) return { reply: token };
    const route = arm(method, url, body);
    if (!route) return { reply: armError(404, 'NotFound', `fake Cloud B serves no ${method} ${url.pathname}`) };

    const auth = String(headers['authorization'] ?? '');
    const owner = issuer.tokenOwner(auth.replace(/^Bearer /, ''));
    if (!auth.startsWith('Bearer ') || !owner) {
      return {
        reply: armError(401, 'InvalidAuthenticationToken', 'The access token is invalid.', {
          'WWW-Authenticate': `Bearer authorization_uri="${baseUrl}/common", error="invalid_token"`,
        }),
      };
    }
    if (owner.resource.replace(/\/$/, '') !== baseUrl) {
      return {
        reply: armError(
          401,
          'InvalidAuthenticationTokenAudience',
          `The access token has been obtained for wrong audience or resource '${owner.resource}'.`,
        ),
        caller: owner.identity,
      };
    }
    const isMonitor = url.pathname.toLowerCase().includes('/providers/microsoft.insights/');
    const supported: readonly string[] = isMonitor ? MONITOR_API_VERSIONS : FLEXIBLE_SERVER_API_VERSIONS;
    const apiVersion = url.searchParams.get('api-version');
    if (!apiVersion || !supported.includes(apiVersion)) {
      return {
        reply: armError(
          400,
          'InvalidApiVersionParameter',
          `The api-version '${apiVersion ?? ''}' is invalid. The supported versions are '${supported.join(',')}'.`,
        ),
        caller: owner.identity,
      };
    }
    if (throttled.requests > 0) {
      throttled.requests--;
      // Resource Manager's throttling answer
      // (https://learn.microsoft.com/azure/azure-resource-manager/management/request-limits-and-throttling).
      return {
        reply: armError(
          429,
          'SubscriptionRequestsThrottled',
          `Number of '${method === 'GET' ? 'read' : 'write'}' requests for subscription '${subscriptionId}' actor '${owner.identity}' exceeded. Please try again after '${throttled.retryAfterSeconds}' seconds after additional '1' requests.`,
          { 'Retry-After': String(throttled.retryAfterSeconds) },
        ),
        caller: owner.identity,
      };
    }
    if (route.action && !allowed(route.action))
      return { reply: authorizationFailed(owner.identity, route.action, url.pathname), caller: owner.identity };
    return { reply: await route.answer(), caller: owner.identity };
  };

  const https: Server = createServer({ cert: certificate.cert, key: certificate.key }, (req, res) => {
    void (async () => {
      const url = new URL(req.url ?? '/', baseUrl);
      const body = await readBody(req);
      let result: { reply: Reply; caller?: string };
      try {
        result = await handle(req.method ?? 'GET', url, req.headers, body);
      } catch (err) {
        result = { reply: armError(500, 'InternalServerError', `fake Cloud B failed: ${(err as Error).message}`) };
      }
      requests.push({
        method: req.method ?? 'GET',
        path: url.pathname,
        at: Date.now(),
        query: Object.fromEntries(url.searchParams),
        status: result.reply.status,
        ...(result.caller && { caller: result.caller }),
        // The recorded form never holds the service principal's secret.
        ...(body && { body: body.replace(/client_secret=[^&]*/, 'client_secret=(hidden)') }),
      });
      send(res, result.reply);
    })();
  });
  await new Promise<void>((resolve) => https.listen(0, '127.0.0.1', resolve));
  baseUrl = `https://127.0.0.1:${(https.address() as AddressInfo).port}`;

  return {
    url: baseUrl,
    certFile: ca.certFile,
    subscriptionId,
    resourceGroup,
    serverName,
    servicePrincipal,
    identityHeader,
    userAssignedClientIds,
    workloadIdentity,
    server,
    requests,
    operations: operations.log,
    get timing() {
      return timing;
    },
    set timing(value: Timing) {
      timing = value;
    },
    get metricFigures() {
      return metricFigures;
    },
    set metricFigures(figures: MetricFigures) {
      metricFigures = figures;
    },
    deny: (action) => void denied.add(action),
    useRole(actions) {
      // An action in a role may hold `*` wildcards; actions compare case-insensitively.
      role = actions.map(
        (a) =>
          new RegExp(
            `^${a
              .split('*')
              .map((part) => part.replace(/[.+?^${}()|[\]\\/]/g, '\\$&'))
              .join('.*')}$`,
            'i',
          ),
      );
    },
    allowAll: () => {
      denied.clear();
      role = null;
    },
    throttle: ({ requests, retryAfterSeconds }) => Object.assign(throttled, { requests, retryAfterSeconds }),
    busy: (...styles) => void busyQueue.push(...styles),
    failNextWriteAfterApplying: () => void (failAfterApplying = true),
    async restart() {
      const op = startRestart();
      await operations.idle();
      if (op.outcome?.status !== 'Succeeded') throw new Error(`fake Cloud B: the restart failed: ${JSON.stringify(op.outcome)}`);
    },
    restartBeforeNextWrite: () => void (restartBeforeWrite = true),
    async reset() {
      await operations.idle();
      denied.clear();
      role = null;
      throttled.requests = 0;
      busyQueue.length = 0;
      failAfterApplying = false;
      restartBeforeWrite = false;
      requests.length = 0;
      operations.forget();
      timing = { ...DEFAULT_TIMING };
      metricFigures = { ...DEFAULT_METRIC_FIGURES };
      await server.reset();
    },
    async close() {
      https.closeAllConnections();
      await new Promise<void>((resolve) => https.close(() => resolve()));
    },
  };
}

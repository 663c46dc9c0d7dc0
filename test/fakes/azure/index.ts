// A fake Cloud B on loopback HTTPS, speaking the wire protocol the real SDKs speak:
//   Resource Manager   GET  …/flexibleServers/{name}                            api-version 2025-08-01
//                      GET  …/configurations (paged, nextLink)   GET …/configurations/{name}
//                      PUT|PATCH …/configurations/{name} → 202 + Azure-AsyncOperation + Location,
//                        then GET …/locations/{loc}/azureAsyncOperation/{id} (InProgress, then
//                        Succeeded or Failed) and GET …/operationResults/{id}
//                      POST …/restart (the same long-running operation)
//   Azure Monitor      GET  …/providers/Microsoft.Insights/metrics               api-version 2024-02-01
//   tokens             managed identity (IMDS and App Service forms), service principal
// It checks every bearer token (issued here, for this endpoint), refuses denied role actions
// with 403 AuthorizationFailed, meets writes with a busy server on demand, and applies written
// server parameters to a real throwaway PostgreSQL cluster. That cluster accepts TLS only, as
// a flexible server with require_secure_transport = ON does; one test CA signs both its
// certificate and the fake's HTTPS one, and NODE_EXTRA_CA_CERTS = certFile trusts both.
import { randomUUID } from 'node:crypto';
import { createServer, type Server } from 'node:https';
import type { AddressInfo } from 'node:net';
import type { Cluster } from '../../../src/lab/cluster.ts';
import { FakeFlexibleServer, type Sku } from './flexible-server.ts';
import { armError, json, readBody, send, type Reply } from './http.ts';
import { createTokenIssuer, type ServicePrincipal, type WorkloadIdentity } from './identity-endpoints.ts';
import { answerMetrics, DEFAULT_METRIC_FIGURES, MONITOR_API_VERSION, type MetricFigures } from './monitor.ts';

export const FLEXIBLE_SERVER_API_VERSION = '2025-08-01';

/** How a busy server meets a configuration write: a 409 at once, or an accepted operation that fails. */
export type BusyStyle = 'conflict' | 'operation-failed';

export interface RecordedRequest {
  method: string;
  path: string;
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
  metricFigures: MetricFigures;
  /** Refuses this role action (403 AuthorizationFailed) until allowAll(). */
  deny(action: string): void;
  allowAll(): void;
  /** The next configuration writes meet a busy server, one style each. */
  busy(...styles: BusyStyle[]): void;
  /** The next configuration write is carried out, but its operation reports a failure: an
   * answer that cannot be trusted to say what the server holds. */
  failNextWriteAfterApplying(): void;
  /** Clean state between tests: server reset, nothing denied or busy, requests forgotten. */
  reset(): Promise<void>;
  close(): Promise<void>;
}

interface Operation {
  pollsLeft: number;
  outcome?: { status: 'Succeeded' } | { status: 'Failed'; error: { code: string; message: string } };
  /** What operationResults returns once done. */
  resultPath?: string;
  startTime: string;
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
  const busyQueue: BusyStyle[] = [];
  let failAfterApplying = false;
  const operations = new Map<string, Operation>();
  let metricFigures: MetricFigures = { ...DEFAULT_METRIC_FIGURES };

  const operationUrls = (id: string) => {
    const base = `${baseUrl}/subscriptions/${subscriptionId}/providers/${DB}/locations/${location}`;
    return {
      'Azure-AsyncOperation': `${base}/azureAsyncOperation/${id}?api-version=${FLEXIBLE_SERVER_API_VERSION}`,
      Location: `${base}/operationResults/${id}?api-version=${FLEXIBLE_SERVER_API_VERSION}`,
      'Retry-After': '1',
    };
  };

  const startOperation = (op: Omit<Operation, 'startTime' | 'pollsLeft'>): Reply => {
    const id = randomUUID();
    operations.set(id, { ...op, pollsLeft: 1, startTime: new Date().toISOString() });
    return json(202, undefined, operationUrls(id));
  };

  const authorizationFailed = (caller: string, action: string, scope: string): Reply =>
    armError(
      403,
      'AuthorizationFailed',
      `The client '${caller}' with object id '0f1e2d3c-4b5a-6978-8a9b-0c1d2e3f4a5b' does not have authorization to perform action '${action}' over scope '${scope}' or the scope is invalid. If access was recently granted, please refresh your credentials.`,
    );

  const writeConfiguration = async (name: string, body: string): Promise<Reply> => {
    let parsed: { properties?: { value?: unknown; source?: unknown } };
    try {
      parsed = JSON.parse(body) as typeof parsed;
    } catch {
      return armError(400, 'InvalidRequestContent', 'The request content was invalid and could not be deserialized.');
    }
    const { value, source } = parsed.properties ?? {};
    if (typeof value !== 'string')
      return armError(400, 'InvalidParameterValue', `properties.value is required to update configuration '${name}'.`);
    const style = busyQueue.shift();
    if (style === 'conflict') {
      return armError(
        409,
        'ServerIsBusy',
        `Cannot complete operation while server '${serverName}' is busy processing another operation. Try again later.`,
      );
    }
    if (style === 'operation-failed') {
      const id = randomUUID();
      operations.set(id, {
        pollsLeft: 1,
        startTime: new Date().toISOString(),
        outcome: {
          status: 'Failed',
          error: { code: 'ServerBusy', message: `Server '${serverName}' is busy with another operation. Please try again later.` },
        },
      });
      return json(202, undefined, operationUrls(id));
    }
    const outcome = await server.write(name, value, typeof source === 'string' ? source : 'user-override');
    if (!outcome.ok) return armError(outcome.status, outcome.code, outcome.message);
    if (failAfterApplying) {
      failAfterApplying = false;
      return startOperation({
        outcome: {
          status: 'Failed',
          error: { code: 'InternalServerError', message: 'An unexpected error occured while processing the request.' },
        },
      });
    }
    return startOperation({ outcome: { status: 'Succeeded' }, resultPath: `configurations/${name}` });
  };

  const listConfigurations = async (url: URL): Promise<Reply> => {
    const all = await server.configurations();
    const offset = Number(url.searchParams.get('$skipToken') ?? 0);
    const page = all.slice(offset, offset + PAGE_SIZE);
    const next =
      offset + PAGE_SIZE < all.length
        ? `${baseUrl}${serverId}/configurations?api-version=${FLEXIBLE_SERVER_API_VERSION}&$skipToken=${offset + PAGE_SIZE}`
        : undefined;
    return json(200, { value: page, ...(next && { nextLink: next }) });
  };

  const operationStatus = (id: string, results: boolean): Promise<Reply> | Reply => {
    const op = operations.get(id);
    if (!op) return armError(404, 'OperationNotFound', `The operation '${id}' was not found.`);
    const running = op.outcome === undefined || op.pollsLeft > 0;
    if (running) {
      op.pollsLeft--;
      if (results) return json(202, undefined, operationUrls(id));
      return json(200, { name: id, status: 'InProgress', startTime: op.startTime }, { 'Retry-After': '1' });
    }
    const outcome = op.outcome!;
    if (results) {
      if (outcome.status === 'Failed') return armError(400, outcome.error.code, outcome.error.message);
      if (op.resultPath?.startsWith('configurations/')) {
        return server.configuration(op.resultPath.slice('configurations/'.length)).then((c) => json(200, c));
      }
      return json(204);
    }
    return json(200, {
      name: id,
      status: outcome.status,
      startTime: op.startTime,
      endTime: new Date().toISOString(),
      ...(outcome.status === 'Failed' && { error: outcome.error }),
    });
  };

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
    if (!lower.startsWith(serverLower)) return null;
    const rest = path.slice(serverId.length);
    if (rest === '' && method === 'GET')
      return { action: `${DB}/flexibleServers/read`, answer: async () => json(200, await server.resource()) };
    if (rest === '/restart' && method === 'POST') {
      return {
        action: `${DB}/flexibleServers/restart/action`,
        answer: () => {
          const id = randomUUID();
          const op: Operation = { pollsLeft: 1, startTime: new Date().toISOString() };
          operations.set(id, op);
          void server.restart().then(
            () => {
              op.outcome = { status: 'Succeeded' };
            },
            (err: unknown) => {
              op.outcome = { status: 'Failed', error: { code: 'InternalServerError', message: String(err) } };
            },
          );
          return json(202, undefined, operationUrls(id));
        },
      };
    }
    if (rest === '/configurations' && method === 'GET')
      return { action: `${DB}/flexibleServers/configurations/read`, answer: () => listConfigurations(url) };
    const one = /^\/configurations\/([^/]+)$/.exec(rest);
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
    if (rest.toLowerCase() === '/providers/microsoft.insights/metrics' && method === 'GET') {
      return {
        action: 'Microsoft.Insights/metrics/read',
        answer: () => answerMetrics(url, serverId, location, metricFigures, options.cluster),
      };
    }
    if (rest.toLowerCase() === '/providers/microsoft.insights/metricdefinitions' && method === 'GET') {
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
    const wanted = isMonitor ? MONITOR_API_VERSION : FLEXIBLE_SERVER_API_VERSION;
    const apiVersion = url.searchParams.get('api-version');
    if (apiVersion !== wanted) {
      return {
        reply: armError(
          400,
          'InvalidApiVersionParameter',
          `The api-version '${apiVersion}' is invalid. The supported versions are '${wanted}'.`,
        ),
        caller: owner.identity,
      };
    }
    if (route.action && denied.has(route.action))
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
    get metricFigures() {
      return metricFigures;
    },
    set metricFigures(figures: MetricFigures) {
      metricFigures = figures;
    },
    deny: (action) => void denied.add(action),
    allowAll: () => denied.clear(),
    busy: (...styles) => void busyQueue.push(...styles),
    failNextWriteAfterApplying: () => void (failAfterApplying = true),
    async reset() {
      denied.clear();
      busyQueue.length = 0;
      failAfterApplying = false;
      requests.length = 0;
      metricFigures = { ...DEFAULT_METRIC_FIGURES };
      await server.reset();
    },
    async close() {
      https.closeAllConnections();
      await new Promise<void>((resolve) => https.close(() => resolve()));
    },
  };
}

// A fake Cloud C (Google Cloud SQL for PostgreSQL) on loopback HTTP, speaking the wire protocol
// Google's clients speak, acting on a real throwaway PostgreSQL cluster:
//   Cloud SQL Admin API v1  GET   /v1/projects/{project}/instances/{instance}
//                           PATCH /v1/projects/{project}/instances/{instance} → an Operation
//                           GET   /v1/projects/{project}/operations/{operation}
//   Cloud Monitoring v3     GET   /v3/projects/{project}/timeSeries?filter=…&interval.startTime=…
//   Resource Manager v1     POST  /v1/projects/{project}:testIamPermissions
//   metadata server         GET   /computeMetadata/v1/… (GCE_METADATA_HOST): the service account's token
// Every API call carries a bearer token: one the metadata server here issued, or a JWT the
// service account key (keyFile) signed itself (RS256, iss = the account, scope cloud-platform),
// checked against the key's public half. A permission the configured role lacks answers 403
// PERMISSION_DENIED. Operations run one at a time (PENDING, RUNNING, DONE; a second PATCH meanwhile
// answers 409 operationInProgress); a PATCH with a stale settingsVersion answers 412; flags and
// values Cloud SQL does not allow answer 400 with Google's error body; throttle() answers 429.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { generateKeyPairSync, randomUUID, verify } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import type { Cluster } from '../../../src/lab/cluster.ts';
import { flagRefusal } from './flags.ts';
import { googleError, json, readBody, send, type Reply } from './http.ts';
import { FakeCloudSqlInstance, type Flag } from './instance.ts';

/** Flags a customer set on the instance themselves, which every change the agent makes must
 * keep (a patch replaces the whole list): the tests put these on before the agent starts. */
export const CUSTOMER_FLAGS: readonly Flag[] = [
  { name: 'log_min_duration_statement', value: '250' },
  { name: 'cloudsql.iam_authentication', value: 'on' },
];

/** agent.yaml's managed_c section that points the agent at this fake for every API it calls. */
export function managedCSection(cloud: Pick<FakeCloudSql, 'project' | 'region' | 'instanceName' | 'url'>): string[] {
  return [
    'managed_c:',
    `  project: ${cloud.project}`,
    `  region: ${cloud.region}`,
    `  instance: ${cloud.instanceName}`,
    `  sqladmin_endpoint: ${cloud.url}`,
    `  monitoring_endpoint: ${cloud.url}`,
    `  resource_manager_endpoint: ${cloud.url}`,
  ];
}

export const ALL_PERMISSIONS = [
  'cloudsql.instances.get',
  'cloudsql.instances.update',
  'cloudsql.instances.restart',
  'monitoring.timeSeries.list',
];

export interface RecordedRequest {
  method: string;
  path: string;
  query: Record<string, string>;
  status: number;
  at: number;
  caller?: string;
  /** The x-goog-api-client header: which Google client library sent it. */
  apiClient?: string;
  body?: string;
}

export interface FakeOperation {
  kind: 'sql#operation';
  name: string;
  operationType: 'UPDATE' | 'RESTART';
  status: 'PENDING' | 'RUNNING' | 'DONE';
  targetId: string;
  targetProject: string;
  insertTime: string;
  startTime?: string;
  endTime?: string;
  error?: { kind: 'sql#operationErrors'; errors: { kind: 'sql#operationError'; code: string; message: string }[] };
  /** The flag list the operation applies (UPDATE). */
  flags?: Flag[];
}

export interface Timing {
  /** PENDING before it runs. */
  pendingMs: number;
  /** RUNNING before the flags reach PostgreSQL. */
  runMs: number;
}
export const DEFAULT_TIMING: Timing = { pendingMs: 100, runMs: 200 };

export interface FakeCloudSql {
  readonly url: string;
  /** host:port for GCE_METADATA_HOST. */
  readonly metadataHost: string;
  /** A service account key file for GOOGLE_APPLICATION_CREDENTIALS. */
  readonly keyFile: string;
  readonly serviceAccount: string;
  readonly project: string;
  readonly region: string;
  readonly instanceName: string;
  readonly instance: FakeCloudSqlInstance;
  readonly requests: RecordedRequest[];
  readonly operations: readonly FakeOperation[];
  timing: Timing;
  /** Only these permissions are held, until allowAll(). */
  useRole(permissions: readonly string[]): void;
  allowAll(): void;
  /** The next `requests` API calls answer 429 RESOURCE_EXHAUSTED. */
  throttle(requests: number): void;
  /** The next UPDATE operation ends DONE with an error; with `afterApplying`, its flags reached
   * PostgreSQL first (an answer that cannot be trusted to say what the instance holds). */
  failNextOperation(options?: { afterApplying?: boolean }): void;
  /** Runs `edit` just before the next PATCH is answered (someone else's change in between). */
  beforeNextPatch(edit: () => Promise<void>): void;
  /** The customer changes the flag list (the console's, gcloud's whole-list patch). */
  customerPatch(flags: readonly Flag[]): Promise<void>;
  /** Waits until no operation runs. */
  idle(): Promise<void>;
  reset(): Promise<void>;
  close(): Promise<void>;
}

export interface FakeCloudSqlOptions {
  cluster: Cluster;
  /** The server CA the instance reports (serverCaCert.cert): the CA that signed the cluster's certificate. */
  serverCa: string;
  project?: string;
  region?: string;
  instance?: string;
  tier?: string;
  memoryBytes?: number;
}

const SCOPE = 'https://www.googleapis.com/auth/cloud-platform';

/** The part of instances.patch's DatabaseInstance body the fake reads. */
const PatchBody = z.object({
  settings: z
    .object({
      settingsVersion: z.union([z.string(), z.number()]).optional(),
      databaseFlags: z.array(z.object({ name: z.string(), value: z.string().optional() })).optional(),
    })
    .optional(),
});

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function b64json(part: string): Record<string, unknown> | null {
  try {
    return JSON.parse(Buffer.from(part, 'base64url').toString('utf8')) as Record<string, unknown>;
  } catch {
    return null;
  }
}

export async function startFakeCloudSql(options: FakeCloudSqlOptions): Promise<FakeCloudSql> {
  const project = options.project ?? 'tuner-project';
  const region = options.region ?? 'europe-west1';
  const instanceName = options.instance ?? 'tuner-sql-1';
  const serviceAccount = `tuner-agent@${project}.iam.gserviceaccount.com`;
  const instance = new FakeCloudSqlInstance({
    cluster: options.cluster,
    project,
    region,
    name: instanceName,
    tier: options.tier ?? 'db-custom-2-7680',
    memoryBytes: options.memoryBytes ?? 7680 * 2 ** 20,
    serverCa: options.serverCa,
  });

  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const keyId = randomUUID().replaceAll('-', '');
  const dir = mkdtempSync(join(tmpdir(), 'fake-cloud-sql-'));
  const keyFile = join(dir, 'service-account.json');

  const requests: RecordedRequest[] = [];
  const operations: FakeOperation[] = [];
  const metadataTokens = new Map<string, number>();
  let role: Set<string> | null = null;
  let throttled = 0;
  let failNext: { afterApplying: boolean } | null = null;
  let beforePatch: (() => Promise<void>) | null = null;
  let running: Promise<void> | null = null;
  let timing: Timing = { ...DEFAULT_TIMING };

  /** Who the bearer token belongs to, or null when it is not one this fake accepts. */
  const callerOf = (authorization: string | undefined): string | null => {
    const token = /^Bearer (.+)$/.exec(authorization ?? '')?.[1];
    if (!token) return null;
    const issued = metadataTokens.get(token);
    if (issued !== undefined) return issued > Date.now() ? `metadata ${serviceAccount}` : null;
    const [h, p, s] = token.split('.');
    if (!h || !p || !s) return null;
    const header = b64json(h);
    const claims = b64json(p);
    if (header?.['alg'] !== 'RS256' || header['kid'] !== keyId || !claims) return null;
    if (!verify('RSA-SHA256', Buffer.from(`${h}.${p}`), publicKey, Buffer.from(s, 'base64url'))) return null;
    if (claims['iss'] !== serviceAccount || typeof claims['exp'] !== 'number' || claims['exp'] * 1000 < Date.now()) return null;
    if (typeof claims['scope'] !== 'string' || !claims['scope'].split(' ').includes(SCOPE)) return null;
    return `key ${serviceAccount}`;
  };

  const denied = (permission: string): Reply | null =>
    role && !role.has(permission)
      ? googleError(403, 'PERMISSION_DENIED', 'notAuthorized', 'The client is not authorized to make this request.')
      : null;

  const operationOf = (op: FakeOperation): Record<string, unknown> => {
    const { flags: _flags, ...shown } = op;
    return {
      ...shown,
      selfLink: `${baseUrl}/v1/projects/${project}/operations/${op.name}`,
      targetLink: `${baseUrl}/v1/projects/${project}/instances/${instanceName}`,
      user: serviceAccount,
    };
  };

  /** Runs an operation to DONE, one at a time. */
  const run = (op: FakeOperation, work: () => Promise<void>): void => {
    running = (async () => {
      await sleep(timing.pendingMs);
      op.status = 'RUNNING';
      op.startTime = new Date().toISOString();
      await sleep(timing.runMs);
      try {
        await work();
      } catch (err) {
        op.error = { kind: 'sql#operationErrors', errors: [{ kind: 'sql#operationError', code: 'INTERNAL_ERROR', message: String(err) }] };
      }
      op.endTime = new Date().toISOString();
      op.status = 'DONE';
      running = null;
    })();
  };

  const newOperation = (type: FakeOperation['operationType']): FakeOperation => {
    const op: FakeOperation = {
      kind: 'sql#operation',
      name: randomUUID(),
      operationType: type,
      status: 'PENDING',
      targetId: instanceName,
      targetProject: project,
      insertTime: new Date().toISOString(),
    };
    operations.push(op);
    return op;
  };

  const busy = (): Reply =>
    googleError(
      409,
      'ABORTED',
      'operationInProgress',
      'Operation failed because another operation was already in progress. Try your request after the current operation is complete.',
    );

  const patchInstance = async (body: string): Promise<Reply> => {
    if (beforePatch) {
      const edit = beforePatch;
      beforePatch = null;
      await edit();
    }
    const parsed = PatchBody.safeParse(parseJson(body));
    if (!parsed.success) return googleError(400, 'INVALID_ARGUMENT', 'invalid', 'Invalid JSON payload received.');
    const settings = parsed.data.settings ?? {};
    if (running) return busy();
    if (settings.settingsVersion !== undefined && String(settings.settingsVersion) !== String(instance.settingsVersion))
      return googleError(412, 'FAILED_PRECONDITION', 'conditionNotMet', 'Precondition check failed.');
    if (!settings.databaseFlags) return json(200, operationOf(Object.assign(newOperation('UPDATE'), { status: 'DONE' as const })));
    const flags: Flag[] = settings.databaseFlags.map((f) => ({ ...f }));
    for (const f of flags) {
      const refusal = flagRefusal(f.name, f.value, instance.memoryBytes);
      if (refusal) return googleError(400, 'INVALID_ARGUMENT', 'invalidFlagValue', refusal);
    }
    instance.accept();
    const op = newOperation('UPDATE');
    op.flags = flags;
    const failure = failNext;
    failNext = null;
    run(op, async () => {
      if (failure && !failure.afterApplying) throw new Error('An internal error has occurred. Please retry the operation.');
      await instance.apply(flags);
      if (failure) throw new Error('An internal error has occurred. Please retry the operation.');
    });
    return json(200, operationOf(op));
  };

  const timeSeries = async (url: URL): Promise<Reply> => {
    const filter = url.searchParams.get('filter') ?? '';
    const type = /metric\.type\s*=\s*"([^"]+)"/.exec(filter)?.[1];
    const database = /resource\.labels\.database_id\s*=\s*"([^"]+)"/.exec(filter)?.[1];
    const end = url.searchParams.get('interval.endTime');
    if (!type || !end) return googleError(400, 'INVALID_ARGUMENT', 'badRequest', 'Field filter and interval.endTime are required.');
    if (database !== undefined && database !== `${project}:${instanceName}`) return json(200, {});
    let value: { doubleValue?: number; int64Value?: string } | undefined;
    switch (type) {
      case 'cloudsql.googleapis.com/database/cpu/utilization':
        value = { doubleValue: 0.25 };
        break;
      case 'cloudsql.googleapis.com/database/memory/utilization':
        value = { doubleValue: 0.5 };
        break;
      case 'cloudsql.googleapis.com/database/disk/read_ops_count':
        value = { int64Value: '120' };
        break;
      case 'cloudsql.googleapis.com/database/disk/write_ops_count':
        value = { int64Value: '80' };
        break;
      case 'cloudsql.googleapis.com/database/postgresql/num_backends': {
        const [row] = await options.cluster.sql<{ n: string }>('SELECT count(*)::text AS n FROM pg_stat_activity WHERE backend_type = $1', [
          'client backend',
        ]);
        value = { int64Value: row!.n };
        break;
      }
    }
    if (!value) return json(200, {});
    const at = new Date(Date.parse(end) - 60_000).toISOString();
    return json(200, {
      timeSeries: [
        {
          metric: { type, labels: {} },
          resource: { type: 'cloudsql_database', labels: { project_id: project, database_id: `${project}:${instanceName}`, region } },
          metricKind: 'GAUGE',
          valueType: value.doubleValue !== undefined ? 'DOUBLE' : 'INT64',
          points: [{ interval: { startTime: at, endTime: at }, value }],
        },
      ],
    });
  };

  const metadata = (path: string, headers: Record<string, string | string[] | undefined>): Reply | null => {
    if (!path.startsWith('/computeMetadata/v1/')) return null;
    if (headers['metadata-flavor'] !== 'Google') return { status: 403, body: 'Missing Metadata-Flavor:Google header.' };
    const flavor = { 'Metadata-Flavor': 'Google' };
    if (path === '/computeMetadata/v1/instance/service-accounts/default/token') {
      const token = `ya29.fake-${randomUUID()}`;
      metadataTokens.set(token, Date.now() + 3600_000);
      return json(200, { access_token: token, expires_in: 3599, token_type: 'Bearer' }, flavor);
    }
    if (path === '/computeMetadata/v1/instance/service-accounts/default/email')
      return { status: 200, body: serviceAccount, headers: flavor };
    if (path === '/computeMetadata/v1/project/project-id') return { status: 200, body: project, headers: flavor };
    return { status: 200, body: '', headers: flavor };
  };

  const route = async (method: string, url: URL, body: string, caller: string | null): Promise<Reply> => {
    const p = url.pathname;
    const instancePath = `/v1/projects/${project}/instances/${instanceName}`;
    if (!caller)
      return googleError(
        401,
        'UNAUTHENTICATED',
        'authError',
        'Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or other valid authentication credential.',
      );
    if (throttled > 0) {
      throttled -= 1;
      return googleError(
        429,
        'RESOURCE_EXHAUSTED',
        'rateLimitExceeded',
        "Quota exceeded for quota metric 'Queries' and limit 'Queries per minute per user' of service 'sqladmin.googleapis.com'.",
        { 'Retry-After': '1' },
      );
    }
    if (p === `/v1/projects/${project}:testIamPermissions` && method === 'POST') {
      const asked = ((JSON.parse(body || '{}') as { permissions?: string[] }).permissions ?? []).filter((x) => ALL_PERMISSIONS.includes(x));
      const held = asked.filter((x) => !role || role.has(x));
      return json(200, held.length > 0 ? { permissions: held } : {});
    }
    if (p === `/v3/projects/${project}/timeSeries` && method === 'GET') {
      return (
        (role && !role.has('monitoring.timeSeries.list')
          ? googleError(
              403,
              'PERMISSION_DENIED',
              'forbidden',
              `Permission monitoring.timeSeries.list denied (or the resource may not exist).`,
            )
          : null) ?? (await timeSeries(url))
      );
    }
    if (p === instancePath && method === 'GET') return denied('cloudsql.instances.get') ?? json(200, instance.resource());
    if (p === instancePath && method === 'PATCH') return denied('cloudsql.instances.update') ?? (await patchInstance(body));
    if (p === `/v1/projects/${project}/operations` && method === 'GET') {
      if (url.searchParams.get('instance') !== instanceName)
        return googleError(400, 'INVALID_ARGUMENT', 'invalid', 'Invalid request: instance is required.');
      const newest = [...operations].reverse().slice(0, Number(url.searchParams.get('maxResults') ?? 100));
      return denied('cloudsql.instances.get') ?? json(200, { kind: 'sql#operationsList', items: newest.map(operationOf) });
    }
    const opMatch = new RegExp(`^/v1/projects/${project}/operations/([^/]+)$`).exec(p);
    if (opMatch && method === 'GET') {
      const op = operations.find((o) => o.name === opMatch[1]);
      return (
        denied('cloudsql.instances.get') ??
        (op
          ? json(200, operationOf(op))
          : googleError(404, 'NOT_FOUND', 'operationDoesNotExist', 'The Cloud SQL instance operation does not exist.'))
      );
    }
    if (p.startsWith('/v1/projects/') && p.includes('/instances/'))
      return googleError(404, 'NOT_FOUND', 'instanceDoesNotExist', 'The Cloud SQL instance does not exist.');
    return googleError(404, 'NOT_FOUND', 'notFound', `${method} ${p} is not a method of this fake`);
  };

  let baseUrl = '';
  const server: Server = createServer((req, res) => {
    void (async () => {
      const url = new URL(req.url ?? '/', baseUrl);
      const body = await readBody(req);
      const meta = metadata(url.pathname, req.headers);
      const caller = meta ? undefined : callerOf(req.headers.authorization);
      let reply: Reply;
      try {
        reply = meta ?? (await route(req.method ?? 'GET', url, body, caller ?? null));
      } catch (err) {
        reply = googleError(500, 'INTERNAL', 'backendError', String(err));
      }
      requests.push({
        method: req.method ?? 'GET',
        path: url.pathname,
        query: Object.fromEntries(url.searchParams),
        status: reply.status,
        at: Date.now(),
        ...(caller && { caller }),
        ...(typeof req.headers['x-goog-api-client'] === 'string' && { apiClient: req.headers['x-goog-api-client'] }),
        ...(body && { body }),
      });
      if (typeof reply.body === 'string')
        res.writeHead(reply.status, { 'content-type': 'application/text', ...reply.headers }).end(reply.body);
      else send(res, reply);
    })();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  baseUrl = `http://127.0.0.1:${port}`;
  writeFileSync(
    keyFile,
    JSON.stringify({
      type: 'service_account',
      project_id: project,
      private_key_id: keyId,
      private_key: privateKey.export({ type: 'pkcs8', format: 'pem' }).toString(),
      client_email: serviceAccount,
      client_id: '104857600000000000001',
      auth_uri: 'https://accounts.google.com/o/oauth2/auth',
      token_uri: `${baseUrl}/token`,
    }),
    { mode: 0o600 },
  );

  const idle = async () => {
    while (running) await running;
  };

  return {
    url: `${baseUrl}/`,
    metadataHost: `127.0.0.1:${port}`,
    keyFile,
    serviceAccount,
    project,
    region,
    instanceName,
    instance,
    requests,
    operations,
    get timing() {
      return timing;
    },
    set timing(t: Timing) {
      timing = t;
    },
    useRole(permissions) {
      role = new Set(permissions);
    },
    allowAll() {
      role = null;
    },
    throttle(n) {
      throttled = n;
    },
    failNextOperation(o = {}) {
      failNext = { afterApplying: o.afterApplying ?? false };
    },
    beforeNextPatch(edit) {
      beforePatch = edit;
    },
    async customerPatch(flags) {
      await idle();
      instance.accept();
      await instance.apply(flags);
    },
    idle,
    async reset() {
      await idle();
      role = null;
      throttled = 0;
      failNext = null;
      beforePatch = null;
      timing = { ...DEFAULT_TIMING };
      await instance.reset();
      requests.length = 0;
      operations.length = 0;
    },
    async close() {
      await idle();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

// Google's clients for Cloud C, made once: the Cloud SQL Admin API v1 (@googleapis/sqladmin),
// Cloud Monitoring (@google-cloud/monitoring over its REST transport), and Resource Manager's
// testIamPermissions (through the authorized client, at its documented REST path). Credentials are Application Default
// Credentials: a service account key (GOOGLE_APPLICATION_CREDENTIALS), signed here as a
// self-signed JWT with the cloud-platform scope (no token exchange), or the metadata server's
// service account (GCE_METADATA_HOST). Answers are checked with zod; busy instances (409
// operationInProgress) and quotas (429) are waited out with backoff; operations are polled to DONE.
import { setTimeout as sleep } from 'node:timers/promises';
import { sqladmin, type sqladmin_v1 } from '@googleapis/sqladmin';
import { GoogleAuth, JWT } from 'google-auth-library';
import { MetricServiceClient } from '@google-cloud/monitoring';
import { z } from 'zod';
import type { Logger } from '../../base/log.ts';
import { DEFAULT_ENDPOINTS, type ManagedCConfig } from './config.ts';
import { describeFailure, googleFailure, isBusyOrThrottled, ManagedCError, type GoogleFailure } from './errors.ts';
import { PERMISSIONS } from './permissions.ts';

const SCOPE = 'https://www.googleapis.com/auth/cloud-platform';

const FlagSchema = z.object({ name: z.string(), value: z.string().optional() });
export type DatabaseFlag = z.infer<typeof FlagSchema>;

export const InstanceSchema = z.object({
  name: z.string().optional(),
  state: z.string(),
  databaseVersion: z.string().optional(),
  connectionName: z.string().optional(),
  settings: z.object({
    tier: z.string(),
    settingsVersion: z.string(),
    databaseFlags: z.array(FlagSchema).optional(),
    dataDiskSizeGb: z.string().optional(),
    dataDiskType: z.string().optional(),
  }),
  serverCaCert: z.object({ cert: z.string().optional(), commonName: z.string().optional() }).optional(),
});
export type Instance = z.infer<typeof InstanceSchema>;

const OperationSchema = z.object({
  name: z.string(),
  status: z.string(),
  operationType: z.string().optional(),
  error: z.object({ errors: z.array(z.object({ code: z.string().optional(), message: z.string().optional() })).optional() }).optional(),
});
export type Operation = z.infer<typeof OperationSchema>;

export interface MetricPoint {
  value: number;
  at: Date;
}

/** How a busy instance or a quota is waited out. */
const RETRIES = 8;
const FIRST_DELAY_MS = 500;
const MAX_DELAY_MS = 8_000;
/** Operations: a flag change takes seconds, one with a restart minutes. */
const OPERATION_TIMEOUT_MS = 15 * 60_000;

export class ManagedCApi {
  readonly project: string;
  readonly instance: string;
  readonly credentials: string;
  readonly #auth: GoogleAuth;
  readonly #log: Logger;
  readonly #config: ManagedCConfig;
  #client: Promise<{ auth: GoogleAuth; sql: sqladmin_v1.Sqladmin }> | undefined;
  #monitoring: MetricServiceClient | undefined;

  constructor(config: ManagedCConfig & { project: string; instance: string }, log: Logger, env: NodeJS.ProcessEnv = process.env) {
    this.project = config.project;
    this.instance = config.instance;
    this.#config = config;
    this.#log = log;
    this.#auth = new GoogleAuth({ scopes: [SCOPE] });
    this.credentials = env['GOOGLE_APPLICATION_CREDENTIALS']
      ? `the service account key in GOOGLE_APPLICATION_CREDENTIALS`
      : "the metadata server's service account (Application Default Credentials)";
  }

  async #clients(): Promise<{ auth: GoogleAuth; sql: sqladmin_v1.Sqladmin }> {
    this.#client ??= (async () => {
      // The client GoogleAuth keeps and signs every request with. A key's token exchange would go
      // to Google's fixed token endpoint; a JWT signed with the key for the cloud-platform scope
      // is accepted by Google's APIs as it is (a self-signed JWT).
      const client = await this.#auth.getClient();
      if (client instanceof JWT) client.useJWTAccessWithScope = true;
      const auth = this.#auth;
      // Busy instances and quotas are retried by #call alone (logged, with its backoff), not
      // also by the client's own retry of GETs.
      const sql = sqladmin({ version: 'v1', auth, rootUrl: this.#config.sqladminEndpoint ?? DEFAULT_ENDPOINTS.sqladmin, retry: false });
      return { auth, sql };
    })();
    try {
      return await this.#client;
    } catch (err) {
      this.#client = undefined;
      throw err;
    }
  }

  /** Who the agent is to Google: the service account's email, once a token can be made. */
  async checkCredentials(): Promise<string> {
    const { auth } = await this.#clients();
    await auth.getRequestHeaders('https://sqladmin.googleapis.com/');
    const client = await auth.getClient();
    if (client instanceof JWT && client.email) return `${client.email} (${this.credentials})`;
    return this.credentials;
  }

  /** The fix of a refusal: the permission this call needs (Google's 403 does not name it). */
  #needs(permission: string): (f: GoogleFailure) => string | undefined {
    return (f) =>
      f.status === 403
        ? `this call needs ${permission}: add it to the agent's custom role (tuner-agent permissions --managed-c)`
        : fixFor(f);
  }

  /** Calls `fn`, waiting out a busy instance and quotas with backoff; other failures are thrown
   * as ManagedCError naming what was done. */
  async #call<T>(what: string, fn: () => Promise<T>, fix: (f: GoogleFailure) => string | undefined = fixFor): Promise<T> {
    for (let attempt = 1; ; attempt++) {
      try {
        return await fn();
      } catch (err) {
        const failure = googleFailure(err);
        if (isBusyOrThrottled(failure) && attempt < RETRIES) {
          const delay = Math.min(MAX_DELAY_MS, FIRST_DELAY_MS * 2 ** (attempt - 1));
          this.#log.info(
            `Cloud C: ${what}: ${describeFailure(failure)}; trying again in ${(delay / 1000).toFixed(1)} s (attempt ${attempt + 1} of ${RETRIES})`,
          );
          await sleep(delay);
          continue;
        }
        throw new ManagedCError(what, failure, fix(failure));
      }
    }
  }

  async getInstance(): Promise<Instance> {
    const { sql } = await this.#clients();
    const res = await this.#call(
      `reading the Cloud SQL instance ${this.project}:${this.instance}`,
      () => sql.instances.get({ project: this.project, instance: this.instance }),
      this.#needs(PERMISSIONS.instanceGet),
    );
    return InstanceSchema.parse(res.data);
  }

  /** instances.patch with the whole flag list, guarded by the settings version read with it. A
   * stale version is thrown (isStaleSettings) for the caller to read again. */
  async patchFlags(flags: readonly DatabaseFlag[], settingsVersion: string): Promise<Operation> {
    const { sql } = await this.#clients();
    const res = await this.#call(
      `changing the database flags of ${this.project}:${this.instance}`,
      () =>
        sql.instances.patch({
          project: this.project,
          instance: this.instance,
          requestBody: { settings: { settingsVersion, databaseFlags: flags.map((f) => ({ ...f })) } },
        }),
      this.#needs(PERMISSIONS.instanceUpdate),
    );
    return OperationSchema.parse(res.data);
  }

  /** Polls the operation until DONE; its error, when it has one, is thrown. */
  async waitForOperation(op: Operation): Promise<Operation> {
    const { sql } = await this.#clients();
    const deadline = Date.now() + OPERATION_TIMEOUT_MS;
    let current = op;
    let delay = 200;
    while (current.status !== 'DONE') {
      if (Date.now() > deadline)
        throw new Error(`Cloud SQL operation ${op.name} is still ${current.status} after ${OPERATION_TIMEOUT_MS / 60_000} minutes`);
      await sleep(delay);
      delay = Math.min(2_000, delay * 2);
      const res = await this.#call(`reading the operation ${op.name}`, () =>
        sql.operations.get({ project: this.project, operation: op.name }),
      );
      current = OperationSchema.parse(res.data);
    }
    const errors = current.error?.errors ?? [];
    if (errors.length > 0) {
      const text = errors.map((e) => `${e.code ?? 'ERROR'}: ${e.message ?? ''}`.trim()).join('; ');
      throw new ManagedCError(`the Cloud SQL operation ${op.name} (${current.operationType ?? 'UPDATE'}) failed`, { message: text });
    }
    return current;
  }

  /** Waits for the operations that run on the instance (someone else's, or one of an agent
   * that was stopped mid-way): the flags read before they end would not be the flags after. */
  async settle(): Promise<void> {
    const { sql } = await this.#clients();
    const res = await this.#call(
      `listing the operations of ${this.project}:${this.instance}`,
      () => sql.operations.list({ project: this.project, instance: this.instance, maxResults: 10 }),
      this.#needs(PERMISSIONS.instanceGet),
    );
    const items = z.object({ items: z.array(OperationSchema).optional() }).parse(res.data).items ?? [];
    for (const op of items.filter((o) => o.status !== 'DONE')) {
      this.#log.info(`Cloud C: waiting for the operation ${op.name} (${op.operationType ?? 'UPDATE'}, ${op.status}) to end first`);
      await this.waitForOperation(op).catch(() => undefined);
    }
  }

  /** Cloud Monitoring's client over its REST transport (HTTP/JSON, not gRPC), made once. */
  #metricClient(): MetricServiceClient {
    if (!this.#monitoring) {
      const root = new URL(this.#config.monitoringEndpoint ?? DEFAULT_ENDPOINTS.monitoring);
      const https = root.protocol === 'https:';
      this.#monitoring = new MetricServiceClient({
        fallback: true,
        protocol: https ? 'https' : 'http',
        apiEndpoint: root.hostname,
        port: Number(root.port || (https ? 443 : 80)),
        auth: this.#auth,
      });
    }
    return this.#monitoring;
  }

  /** The points of one Cloud Monitoring metric of this instance over the last `minutes`. */
  async timeSeries(metricType: string, minutes: number): Promise<MetricPoint[]> {
    await this.#clients();
    const client = this.#metricClient();
    const end = Date.now();
    const seconds = (ms: number) => ({ seconds: Math.floor(ms / 1000) });
    const [series] = await this.#call(
      `reading ${metricType} from Cloud Monitoring`,
      () =>
        client.listTimeSeries(
          {
            name: `projects/${this.project}`,
            filter: `metric.type = "${metricType}" AND resource.labels.database_id = "${this.project}:${this.instance}"`,
            interval: { startTime: seconds(end - minutes * 60_000), endTime: seconds(end) },
            view: 'FULL',
          },
          { autoPaginate: false },
        ),
      this.#needs(PERMISSIONS.timeSeriesList),
    );
    return series.flatMap((s) =>
      (s.points ?? []).flatMap((p) => {
        const at = Number(p.interval?.endTime?.seconds ?? Number.NaN) * 1000;
        const raw = p.value?.doubleValue ?? p.value?.int64Value;
        const value = Number(typeof raw === 'object' && raw !== null ? String(raw) : raw);
        return Number.isFinite(at) && Number.isFinite(value) ? [{ value, at: new Date(at) }] : [];
      }),
    );
  }

  async close(): Promise<void> {
    await this.#monitoring?.close();
  }

  /** Which of `permissions` the caller holds on the project (Resource Manager's
   * projects.testIamPermissions, which needs no permission of its own). */
  async testPermissions(permissions: readonly string[]): Promise<string[]> {
    const { auth } = await this.#clients();
    const root = this.#config.resourceManagerEndpoint ?? DEFAULT_ENDPOINTS.resourceManager;
    const url = new URL(`v1/projects/${encodeURIComponent(this.project)}:testIamPermissions`, root);
    const res = await this.#call('testing the permissions of the role', () =>
      auth.request({ url: url.toString(), method: 'POST', data: { permissions } }),
    );
    return z.object({ permissions: z.array(z.string()).optional() }).parse(res.data).permissions ?? [];
  }
}

function fixFor(f: GoogleFailure): string | undefined {
  if (f.status === 403) return "add the permission Google names to the agent's custom role (tuner-agent permissions --managed-c)";
  if (f.status === 401) return 'check GOOGLE_APPLICATION_CREDENTIALS, or the service account of this host';
  if (f.status === 404) return 'check managed_c.project and managed_c.instance';
  return undefined;
}

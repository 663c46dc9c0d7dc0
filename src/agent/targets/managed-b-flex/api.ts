// Cloud B's management interface as the target uses it: the flexible server, its server
// parameters ("configurations"), one write at a time as a long-running operation, and Azure
// Monitor metrics. Clients are made once per process; every answer is checked (zod) before use;
// every failure is explained (errors.ts).
import { setTimeout as sleep } from 'node:timers/promises';
import { MonitorClient } from '@azure/arm-monitor';
import { PostgreSQLManagementFlexibleServerClient } from '@azure/arm-postgresql-flexible';
import { z } from 'zod';
import type { Logger } from '../../base/log.ts';
import { AGENT_VERSION } from '../../base/version.ts';
import { ManagedBFlexError, errorLabel, explainManagedBFlexError, isRetryable, retryAfterMs, type ErrorContext } from './errors.ts';
import type { ManagedBFlexIdentity, ResourceManager } from './identity.ts';
import { ACTIONS } from './permissions.ts';
import type { ManagedBFlexConfig } from './config.ts';

/** A GA api-version of Microsoft.DBforPostgreSQL/flexibleServers, pinned rather than left to the
 * SDK's default so that an SDK update cannot change the wire contract silently. */
export const FLEXIBLE_SERVER_API_VERSION = '2025-08-01';

const ServerSchema = z.object({
  id: z.string().optional(),
  location: z.string().optional(),
  sku: z.object({ name: z.string().min(1), tier: z.string().optional() }),
  version: z.string().optional(),
  minorVersion: z.string().optional(),
  state: z.string().optional(),
  fullyQualifiedDomainName: z.string().optional(),
  storage: z
    .object({ storageSizeGB: z.number().positive().optional(), type: z.string().optional(), tier: z.string().optional() })
    .optional(),
  highAvailability: z.object({ mode: z.string().optional(), state: z.string().optional() }).optional(),
  replica: z.object({ role: z.string().optional() }).optional(),
  replicationRole: z.string().optional(),
});
export type FlexibleServer = z.infer<typeof ServerSchema>;

const ParameterSchema = z.object({
  name: z.string().min(1),
  value: z.string().optional(),
  defaultValue: z.string().optional(),
  source: z.string().optional(),
  isDynamicConfig: z.boolean().optional(),
  isReadOnly: z.boolean().optional(),
  isConfigPendingRestart: z.boolean().optional(),
  allowedValues: z.string().optional(),
  unit: z.string().optional(),
  dataType: z.string().optional(),
});
export type ServerParameter = z.infer<typeof ParameterSchema>;

const MetricsSchema = z.object({
  value: z.array(
    z.object({
      name: z.object({ value: z.string() }),
      unit: z.string().optional(),
      timeseries: z
        .array(
          z.object({
            data: z
              .array(
                z.object({
                  timeStamp: z.date(),
                  average: z.number().optional(),
                  maximum: z.number().optional(),
                }),
              )
              .optional(),
          }),
        )
        .optional(),
    }),
  ),
});

export interface MetricPoint {
  at: Date;
  average?: number;
  maximum?: number;
}
export interface MetricSeries {
  name: string;
  unit: string;
  points: MetricPoint[];
}

/** Source of a value set through the management interface; the other one is `system-default`. */
export const USER_OVERRIDE = 'user-override';

export interface RetryPolicy {
  attempts: number;
  firstDelayMs: number;
  maxDelayMs: number;
}
/** A configuration write takes seconds; a busy server is free again when the operation it runs
 * ends: a configuration's some seconds later, a restart's about a minute later (the service's
 * activity log in https://github.com/crossplane-contrib/provider-upjet-azure/issues/811). Eight
 * attempts wait 1+2+4+8+16+30+30 s = 91 s in all, a restart's worth. */
export const WRITE_RETRY: RetryPolicy = { attempts: 8, firstDelayMs: 1_000, maxDelayMs: 30_000 };
/** The SDK polls a long-running operation for as long as it runs: the agent does not wait forever. */
const WRITE_TIMEOUT_MS = 10 * 60_000;

export interface ManagedBFlexApiDeps {
  config: ManagedBFlexConfig;
  identity: ManagedBFlexIdentity;
  resourceManager: ResourceManager;
  log: Logger;
  retry?: RetryPolicy;
}

/** The flexible server through Resource Manager and Azure Monitor: every answer zod-checked, every
 * failure explained, busy answers to a write retried. One per target, like Cloud A's adapters. */
export class ManagedBFlexApi {
  /** "flexible server NAME (resource group …, subscription …)", for messages. */
  readonly server: string;
  readonly identity: ManagedBFlexIdentity;
  readonly endpoint: string;
  readonly #resourceGroup: string;
  readonly #serverName: string;
  readonly #resourceId: string;
  readonly #scope: string;
  readonly #flex: PostgreSQLManagementFlexibleServerClient;
  readonly #monitor: MonitorClient;
  readonly #errorContext: ErrorContext;
  readonly #log: Logger;
  readonly #retry: RetryPolicy;

  constructor({ config, identity, resourceManager, log, retry = WRITE_RETRY }: ManagedBFlexApiDeps) {
    const subscriptionId = config.subscriptionId!;
    this.#resourceGroup = config.resourceGroupName!;
    this.#serverName = config.serverName!;
    this.#resourceId = `/subscriptions/${subscriptionId}/resourceGroups/${this.#resourceGroup}/providers/Microsoft.DBforPostgreSQL/flexibleServers/${this.#serverName}`;
    this.server = `flexible server ${this.#serverName} (resource group ${this.#resourceGroup}, subscription ${subscriptionId})`;
    this.identity = identity;
    this.endpoint = resourceManager.endpoint;
    this.#scope = resourceManager.scope;
    this.#log = log;
    this.#retry = retry;
    const userAgentOptions = { userAgentPrefix: `tuner-agent/${AGENT_VERSION}` };
    const endpoint = this.endpoint;
    this.#flex = new PostgreSQLManagementFlexibleServerClient(identity.credential, subscriptionId, {
      $host: endpoint,
      endpoint,
      credentialScopes: [this.#scope],
      apiVersion: FLEXIBLE_SERVER_API_VERSION,
      userAgentOptions,
    });
    this.#monitor = new MonitorClient(identity.credential, subscriptionId, {
      endpoint,
      credentials: { scopes: [this.#scope] },
      userAgentOptions,
    });
    this.#errorContext = { identity: identity.description, identityFix: identity.fix, endpoint, server: this.server };
  }

  getServer(): Promise<FlexibleServer> {
    return this.#explained(`reading the ${this.server}`, ACTIONS.serverRead, async () =>
      parse(ServerSchema, await this.#flex.servers.get(this.#resourceGroup, this.#serverName), 'the flexible server'),
    );
  }

  /** Every server parameter of the server, by name. */
  listParameters(): Promise<Map<string, ServerParameter>> {
    return this.#explained(`reading the server parameters of the ${this.server}`, ACTIONS.configurationsRead, async () => {
      const byName = new Map<string, ServerParameter>();
      for await (const item of this.#flex.configurations.listByServer(this.#resourceGroup, this.#serverName)) {
        const parameter = parse(ParameterSchema, item, 'a server parameter');
        byName.set(parameter.name.toLowerCase(), parameter);
      }
      return byName;
    });
  }

  /** Writes one parameter (a long-running operation), retrying while the server is busy, and
   * returns it as the server has it afterwards. */
  async writeParameter(name: string, value: string, source: string): Promise<ServerParameter> {
    const what = `setting server parameter ${name} of the ${this.server}`;
    const retry = this.#retry;
    for (let attempt = 1; ; attempt++) {
      const abortSignal = AbortSignal.timeout(WRITE_TIMEOUT_MS);
      try {
        const result = await this.#flex.configurations.beginUpdateAndWait(
          this.#resourceGroup,
          this.#serverName,
          name,
          { value, source },
          { abortSignal },
        );
        return parse(ParameterSchema, { ...result, name: result.name ?? name }, `server parameter ${name}`);
      } catch (err) {
        if (abortSignal.aborted) {
          throw new ManagedBFlexError(
            `${what}: the operation did not finish within ${WRITE_TIMEOUT_MS / 60_000} minutes`,
            `it may still complete: look at the server's activity log and at ${name} in the portal`,
            err,
          );
        }
        if (!isRetryable(err) || attempt >= retry.attempts)
          throw explainManagedBFlexError(err, what, ACTIONS.configurationsWrite, this.#errorContext);
        const backoff = Math.min(retry.firstDelayMs * 2 ** (attempt - 1), retry.maxDelayMs);
        const delay = Math.min(retryAfterMs(err) ?? backoff, 60_000);
        this.#log.warn(
          `${what}: the server is busy (${errorLabel(err)}); trying again in ${(delay / 1000).toFixed(1)} s (attempt ${attempt + 1} of ${retry.attempts})`,
        );
        await sleep(delay);
      }
    }
  }

  /** Azure Monitor series at `interval` over the last `minutes`. */
  metrics(names: readonly string[], minutes: number, interval: string): Promise<MetricSeries[]> {
    return this.#explained(`reading Azure Monitor metrics of the ${this.server}`, ACTIONS.metricsRead, async () => {
      const end = new Date();
      const start = new Date(end.getTime() - minutes * 60_000);
      const response = await this.#monitor.metrics.list(this.#resourceId.replace(/^\//, ''), {
        metricnames: names.join(','),
        timespan: `${start.toISOString()}/${end.toISOString()}`,
        interval,
        aggregation: 'Average,Maximum',
      });
      return parse(MetricsSchema, response, 'Azure Monitor metrics').value.map((m) => ({
        name: m.name.value,
        unit: m.unit ?? 'Unspecified',
        points: (m.timeseries ?? [])
          .flatMap((t) => t.data ?? [])
          .map((p) => ({
            at: p.timeStamp,
            ...(p.average !== undefined && { average: p.average }),
            ...(p.maximum !== undefined && { maximum: p.maximum }),
          })),
      }));
    });
  }

  /** Gets a token for the Resource Manager (preflight). */
  checkToken(): Promise<void> {
    return this.#explained(`asking for a token for ${this.#scope}`, 'a token', async () => {
      const token = await this.identity.credential.getToken(this.#scope);
      if (!token) throw new Error('the credential returned no token');
    });
  }

  async #explained<T>(what: string, action: string, call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (err) {
      throw explainManagedBFlexError(err, what, action, this.#errorContext);
    }
  }
}

function parse<T>(schema: z.ZodType<T>, value: unknown, what: string): T {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0];
  throw new Error(`${what}: Cloud B answered in an unexpected shape (${issue?.path.join('.') || 'root'}: ${issue?.message})`);
}

// Patroni's REST API, as the agent uses it: the dynamic configuration (GET and PATCH /config),
// the cluster's members (GET /cluster), one member's state (GET /patroni) and its restart
// (POST /restart). Every answer is checked with zod before it is believed. Reads go to the first
// configured member that answers, since any member serves the cluster's view; unsafe calls carry
// the basic-auth credentials of Patroni's restapi.authentication.
import { readFileSync } from 'node:fs';
import { Agent, fetch, type Dispatcher } from 'undici';
import { z } from 'zod';
import type { PatroniConfig } from './config.ts';
import { whyFetchFailed } from '../../sending/fetch-failure.ts';

const REQUEST_TIMEOUT_MS = 15_000;
/** POST /restart answers once the server is back (Patroni waits for it), which can take a while. */
const RESTART_TIMEOUT_MS = 300_000;

/** A parameter value as Patroni keeps it: YAML scalars (`work_mem: 4MB`, `max_connections: 100`). */
const ParameterValueSchema = z.union([z.string(), z.number(), z.boolean()]);
export type ParameterValue = z.infer<typeof ParameterValueSchema>;

export const DynamicConfigSchema = z
  .object({
    loop_wait: z.number().optional(),
    ttl: z.number().optional(),
    postgresql: z
      .object({ parameters: z.record(z.string(), ParameterValueSchema.nullable()).optional() })
      .passthrough()
      .optional(),
  })
  .passthrough();
export type DynamicConfig = z.infer<typeof DynamicConfigSchema>;

const MemberSchema = z
  .object({
    name: z.string(),
    role: z.string(),
    state: z.string(),
    api_url: z.string().optional(),
    host: z.string().optional(),
    port: z.number().optional(),
    timeline: z.number().optional(),
    // Bytes behind the leader, or "unknown" when Patroni cannot tell.
    lag: z.union([z.number(), z.string()]).optional(),
    pending_restart: z.boolean().optional(),
  })
  .passthrough();
export type ClusterMember = z.infer<typeof MemberSchema>;

const ClusterSchema = z.object({ members: z.array(MemberSchema), scope: z.string().optional() }).passthrough();
export type ClusterView = z.infer<typeof ClusterSchema>;

const MemberStatusSchema = z
  .object({
    state: z.string(),
    role: z.string(),
    timeline: z.number().optional(),
    pending_restart: z.boolean().optional(),
    dcs_last_seen: z.number().optional(),
    postmaster_start_time: z.string().nullable().optional(),
    patroni: z.object({ version: z.string(), scope: z.string() }).passthrough().optional(),
  })
  .passthrough();
export type MemberStatus = z.infer<typeof MemberStatusSchema>;

/** An answer that was not the expected one: `status` is the HTTP status, 0 when none came. */
export class PatroniApiError extends Error {
  override name = 'PatroniApiError';
  readonly status: number;
  /** Every member answered with a refusal (an HTTP error status): nothing was written. */
  readonly refusedEverywhere: boolean;
  constructor(message: string, status: number, refusedEverywhere = false) {
    super(message);
    this.status = status;
    this.refusedEverywhere = refusedEverywhere;
  }
}

/** A member's API root from /cluster's api_url (http://host:8008/patroni → http://host:8008). */
export function apiRootOf(member: ClusterMember): string | undefined {
  return member.api_url?.replace(/\/patroni\/?$/, '');
}

export class PatroniApi {
  readonly #urls: readonly string[];
  readonly #auth: string | undefined;
  readonly #dispatcher: Dispatcher | undefined;

  constructor(config: Pick<PatroniConfig, 'restApiUrls' | 'username' | 'password' | 'caFile' | 'certFile' | 'keyFile'>) {
    this.#urls = config.restApiUrls.map((u) => u.replace(/\/+$/, ''));
    this.#auth =
      config.username !== undefined && config.password !== undefined
        ? `Basic ${Buffer.from(`${config.username}:${config.password}`).toString('base64')}`
        : undefined;
    if (config.caFile || config.certFile) {
      this.#dispatcher = new Agent({
        connect: {
          ...(config.caFile && { ca: readFileSync(config.caFile) }),
          ...(config.certFile && { cert: readFileSync(config.certFile) }),
          ...(config.keyFile && { key: readFileSync(config.keyFile) }),
        },
      });
    }
  }

  get urls(): readonly string[] {
    return this.#urls;
  }

  /** One call to one member; the body parsed as JSON when it is JSON. */
  async request(
    root: string,
    method: string,
    path: string,
    body?: unknown,
    timeoutMs = REQUEST_TIMEOUT_MS,
  ): Promise<{ status: number; body: unknown }> {
    let res;
    try {
      res = await fetch(`${root}${path}`, {
        method,
        headers: {
          ...(this.#auth && { authorization: this.#auth }),
          ...(body !== undefined && { 'content-type': 'application/json' }),
        },
        ...(body !== undefined && { body: JSON.stringify(body) }),
        ...(this.#dispatcher && { dispatcher: this.#dispatcher }),
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch (err) {
      throw new PatroniApiError(`${method} ${root}${path}: ${whyFetchFailed(err)}`, 0);
    }
    const text = await res.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      // Patroni answers some calls with plain text ("restarted successfully").
    }
    return { status: res.status, body: parsed };
  }

  /** GET `path` from the first member that answers 200 (or `accept`), parsed with `schema`. */
  async #read<T>(path: string, schema: z.ZodType<T>): Promise<T> {
    const failures: string[] = [];
    for (const root of this.#urls) {
      try {
        const res = await this.request(root, 'GET', path);
        if (res.status !== 200) {
          failures.push(`${root}: HTTP ${res.status}`);
          continue;
        }
        const parsed = schema.safeParse(res.body);
        if (parsed.success) return parsed.data;
        failures.push(`${root}: unexpected answer to GET ${path}`);
      } catch (err) {
        failures.push((err as Error).message);
      }
    }
    throw new PatroniApiError(`no Patroni REST API answered GET ${path} (${failures.join('; ')})`, 0);
  }

  dynamicConfig(): Promise<DynamicConfig> {
    return this.#read('/config', DynamicConfigSchema);
  }

  cluster(): Promise<ClusterView> {
    return this.#read('/cluster', ClusterSchema);
  }

  /** PATCH /config: Patroni merges the body into the dynamic configuration (null removes a key). */
  async patchConfig(patch: Record<string, unknown>): Promise<DynamicConfig> {
    const failures: string[] = [];
    // A member that did not answer may have written the patch before the connection broke.
    let unanswered = false;
    for (const root of this.#urls) {
      let res;
      try {
        res = await this.request(root, 'PATCH', '/config', patch);
      } catch (err) {
        failures.push((err as Error).message);
        unanswered = true;
        continue;
      }
      if (res.status === 401 || res.status === 403) {
        throw new PatroniApiError(
          `PATCH /config was refused (HTTP ${res.status}): check patroni.username and patroni.password against restapi.authentication`,
          res.status,
          !unanswered,
        );
      }
      if (res.status !== 200) {
        failures.push(`${root}: HTTP ${res.status} ${typeof res.body === 'string' ? res.body.slice(0, 200) : ''}`.trim());
        continue;
      }
      const parsed = DynamicConfigSchema.safeParse(res.body);
      if (parsed.success) return parsed.data;
      failures.push(`${root}: unexpected answer to PATCH /config`);
      unanswered = true;
    }
    throw new PatroniApiError(`PATCH /config failed on every member (${failures.join('; ')})`, 0, !unanswered);
  }

  /** GET /patroni of one member (its own state, pending_restart included). */
  async memberStatus(root: string): Promise<MemberStatus> {
    const res = await this.request(root, 'GET', '/patroni');
    // A replica that is not running answers 503 with the same document.
    const parsed = MemberStatusSchema.safeParse(res.body);
    if (!parsed.success) throw new PatroniApiError(`${root}/patroni: HTTP ${res.status}, not a member status`, res.status);
    return parsed.data;
  }

  /** POST /restart on one member; Patroni answers when the server is back or the restart failed. */
  async restartMember(root: string): Promise<void> {
    const res = await this.request(root, 'POST', '/restart', {}, RESTART_TIMEOUT_MS);
    if (res.status !== 200) {
      const text = typeof res.body === 'string' ? res.body : JSON.stringify(res.body);
      throw new PatroniApiError(`POST ${root}/restart: HTTP ${res.status} ${text.slice(0, 200)}`, res.status);
    }
  }

  /** POST /reload on one member: Patroni rewrites its postgresql.conf from the configuration it
   * holds and reloads PostgreSQL in its next loop (it answers 202 at once). */
  async reloadMember(root: string): Promise<void> {
    const res = await this.request(root, 'POST', '/reload', {});
    if (res.status !== 200 && res.status !== 202) {
      const text = typeof res.body === 'string' ? res.body : JSON.stringify(res.body);
      throw new PatroniApiError(`POST ${root}/reload: HTTP ${res.status} ${text.slice(0, 200)}`, res.status);
    }
  }

  async close(): Promise<void> {
    await this.#dispatcher?.close();
  }
}

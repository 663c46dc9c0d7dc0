// Runs the real tuning service for tests: on loopback, on a free port, with either storage (PGlite
// in a temporary directory, or a database of its own on the shared PostgreSQL, dropped after).
// Clients: a person (cookie session + CSRF header) and an agent (protocol v1 over fetch).
import assert from 'node:assert/strict';
import { createHash, randomBytes } from 'node:crypto';
import { cpSync, existsSync, mkdtempSync, readFileSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import pg from 'pg';
import { ErrorResponseSchema, routes } from '../../src/protocol/v1.ts';
import { parseServiceArgs, type ServiceConfig } from '../../src/service/app/config.ts';
import { startService, type RunningService, type StartOptions } from '../../src/service/app/server.ts';
import { openStorage } from '../../src/service/storage/open.ts';
import type { SqlDriver } from '../../src/service/storage/driver.ts';
import type { Storage } from '../../src/service/storage/storage.ts';
import { openPgliteDriver } from '../../src/service/storage/pglite-driver.ts';
import { openPostgresDriver } from '../../src/service/storage/postgres-driver.ts';

export type StorageKind = 'pglite' | 'postgres';
export const STORAGE_KINDS: readonly StorageKind[] = ['pglite', 'postgres'];

/** The shared server of the machine (trust auth); tests only create and drop their own databases. */
export const SHARED_PG_ADMIN_URL = process.env['TUNER_TEST_PG_URL'] ?? 'postgresql://postgres@127.0.0.1:5432/postgres';

export const ADMIN_PASSWORD = 'admin-password-for-tests-1';

/** A database of its own on the shared PostgreSQL: its URL, and a function that drops it. */
export async function createScratchDatabase(prefix = 'tuner_test'): Promise<{ url: string; drop: () => Promise<void> }> {
  const name = `${prefix}_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: SHARED_PG_ADMIN_URL });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = new URL(SHARED_PG_ADMIN_URL);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    drop: async () => {
      const client = new pg.Client({ connectionString: SHARED_PG_ADMIN_URL });
      await client.connect();
      try {
        await client.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await client.end();
      }
    },
  };
}

/** Where one test service keeps its data; survives restarts of the service until disposed. */
export interface ServiceStore {
  kind: StorageKind;
  dataDir: string;
  databaseUrl: string | undefined;
  dispose(): Promise<void>;
}

/** A PGlite directory with every migration applied, made once per version of the migrations and
 * copied for each test service: creating one (initdb in WebAssembly, then the migrations) costs
 * about 4 s of CPU, a copy a quarter of that, and the fast tier opens dozens. The service opens the
 * copy as it would its own directory from an earlier run. */
async function migratedPgliteTemplate(): Promise<string> {
  const root = join(import.meta.dirname, '..', '..');
  const version = createHash('sha256')
    .update(readFileSync(join(root, 'src/service/storage/migrations.ts')))
    .update(readFileSync(join(root, 'node_modules/@electric-sql/pglite/package.json')))
    .digest('hex')
    .slice(0, 16);
  const template = join(tmpdir(), `tuner-test-pglite-${version}`);
  if (existsSync(template)) return template;
  const building = mkdtempSync(join(tmpdir(), 'tuner-test-pglite-building-'));
  const storage = await openStorage({ dataDir: building });
  await storage.close();
  try {
    renameSync(building, template); // atomic: another test process may have made it meanwhile
  } catch {
    rmSync(building, { recursive: true, force: true });
  }
  return template;
}

export async function createServiceStore(kind: StorageKind): Promise<ServiceStore> {
  const dataDir = mkdtempSync(join(tmpdir(), 'tuner-service-test-'));
  if (kind === 'pglite') cpSync(join(await migratedPgliteTemplate(), 'pglite'), join(dataDir, 'pglite'), { recursive: true });
  const scratch = kind === 'postgres' ? await createScratchDatabase() : null;
  return {
    kind,
    dataDir,
    databaseUrl: scratch?.url,
    dispose: async () => {
      await scratch?.drop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** The service's storage itself, on a store of its own (for tests of a port without the HTTP
 * server); dispose closes it and removes the store. */
export async function openTestStorage(kind: StorageKind): Promise<{ storage: Storage; dispose: () => Promise<void> }> {
  const store = await createServiceStore(kind);
  const storage = await openStorage({ dataDir: store.dataDir, databaseUrl: store.databaseUrl });
  return { storage, dispose: async () => (await storage.close(), await store.dispose()) };
}

export interface TestService extends RunningService {
  config: ServiceConfig;
  /** What the service printed at start (the admin login, on first start). */
  announced: string[];
  /** Every log line the service wrote. */
  logs: string[];
}

/** Starts the service the way the bin does: configuration from flags and environment. */
export async function startTestService(
  store: ServiceStore,
  env: Record<string, string> = {},
  listen = '127.0.0.1:0',
  options: Pick<StartOptions, 'requestTimeoutMs' | 'leaseClock' | 'watch' | 'advice'> = {},
): Promise<TestService> {
  const request = parseServiceArgs(['--listen', listen, '--data-dir', store.dataDir], {
    TUNER_ADMIN_PASSWORD: ADMIN_PASSWORD,
    TUNER_LOG_LEVEL: 'warn',
    ...(store.databaseUrl && { TUNER_DATABASE_URL: store.databaseUrl }),
    ...env,
  });
  if (request.kind !== 'run') throw new Error('expected a run configuration');
  const announced: string[] = [];
  const logs: string[] = [];
  const service = await startService(request.config, {
    ...options,
    announce: (text) => announced.push(text),
    logStream: { write: (line) => void logs.push(line) },
  });
  return { ...service, config: request.config, announced, logs };
}

export interface JsonResponse<T = unknown> {
  status: number;
  body: T;
  headers: Headers;
}

async function toJson<T>(response: Response): Promise<JsonResponse<T>> {
  const text = await response.text();
  let body: unknown = text;
  if (text !== '' && (response.headers.get('content-type') ?? '').includes('json')) body = JSON.parse(text);
  return { status: response.status, body: body as T, headers: response.headers };
}

/** A person using the JSON API: a session cookie and the CSRF token from the login answer. */
export class PersonClient {
  readonly baseUrl: string;
  cookie = '';
  csrfToken = '';

  constructor(baseUrl: string) {
    this.baseUrl = baseUrl;
  }

  static async login(baseUrl: string, username: string, password: string): Promise<PersonClient> {
    const client = new PersonClient(baseUrl);
    const response = await client.request<{ csrfToken: string }>('POST', '/api/manage/login', { username, password });
    if (response.status !== 200) throw new Error(`login failed: ${response.status} ${JSON.stringify(response.body)}`);
    client.csrfToken = response.body.csrfToken;
    return client;
  }

  async request<T = unknown>(method: string, path: string, body?: unknown, headers: Record<string, string> = {}): Promise<JsonResponse<T>> {
    const response = await fetch(`${this.baseUrl}${path}`, {
      method,
      headers: {
        ...(body !== undefined && { 'content-type': 'application/json' }),
        ...(this.cookie && { cookie: this.cookie }),
        ...(method !== 'GET' && this.csrfToken && { 'x-csrf-token': this.csrfToken }),
        ...headers,
      },
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });
    const setCookie = response.headers.getSetCookie().find((c) => c.startsWith('tuner_session='));
    if (setCookie) this.cookie = setCookie.split(';')[0]!;
    return toJson<T>(response);
  }

  get<T = unknown>(path: string) {
    return this.request<T>('GET', path);
  }
  post<T = unknown>(path: string, body?: unknown) {
    return this.request<T>('POST', path, body);
  }
  patch<T = unknown>(path: string, body?: unknown) {
    return this.request<T>('PATCH', path, body);
  }
  delete<T = unknown>(path: string) {
    return this.request<T>('DELETE', path);
  }

  /** Creates a database and its first key: what the setup page does. */
  async createDatabase(name: string, target = 'local'): Promise<{ databaseId: string; apiKey: string; apiKeyId: string }> {
    const response = await this.post<{ database: { id: string }; apiKey: string; apiKeyId: string }>('/api/manage/databases', {
      name,
      target,
    });
    if (response.status !== 201) throw new Error(`create database failed: ${response.status} ${JSON.stringify(response.body)}`);
    return { databaseId: response.body.database.id, apiKey: response.body.apiKey, apiKeyId: response.body.apiKeyId };
  }
}

/** An agent speaking protocol v1 with plain fetch, gzip optional. */
export class AgentClient {
  readonly baseUrl: string;
  readonly databaseId: string;
  readonly apiKey: string;

  constructor(baseUrl: string, databaseId: string, apiKey: string) {
    this.baseUrl = baseUrl;
    this.databaseId = databaseId;
    this.apiKey = apiKey;
  }

  async post<T = unknown>(
    path: string,
    body: unknown,
    options: { gzip?: boolean; headers?: Record<string, string> } = {},
  ): Promise<JsonResponse<T>> {
    const json = JSON.stringify(body);
    const response = await fetch(`${this.baseUrl}${path}`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${this.apiKey}`,
        'content-type': 'application/json',
        ...(options.gzip && { 'content-encoding': 'gzip' }),
        ...options.headers,
      },
      body: options.gzip ? gzipSync(json) : json,
    });
    return toJson<T>(response);
  }

  start<T = unknown>(body: unknown, options?: { gzip?: boolean }) {
    return this.post<T>(routes.agentStart(this.databaseId), body, options);
  }
  report<T = unknown>(body: unknown, options?: { gzip?: boolean }) {
    return this.post<T>(routes.report(this.databaseId), body, options);
  }
  ack<T = unknown>(commandId: string, body: unknown) {
    return this.post<T>(routes.ack(this.databaseId, commandId), body);
  }
  stop<T = unknown>(body: unknown) {
    return this.post<T>(routes.agentStop(this.databaseId), body);
  }
}

/** A 4xx with an error body `{ error: { code, message } }` of this code, whose message mentions `mentions` when given. */
export function assertClientError(response: JsonResponse, status: number, code: string, mentions?: string | RegExp): void {
  const context = `${response.status} ${JSON.stringify(response.body).slice(0, 500)}`;
  assert.equal(response.status, status, context);
  const parsed = ErrorResponseSchema.safeParse(response.body);
  assert.ok(parsed.success, `error body is { error: { code, message } }: ${context}`);
  assert.equal(parsed.data.error.code, code, context);
  if (mentions === undefined) return;
  if (typeof mentions === 'string') assert.ok(parsed.data.error.message.includes(mentions), `message mentions ${mentions}: ${context}`);
  else assert.match(parsed.data.error.message, mentions, context);
}

/** A raw storage driver on a storage of its own (a scratch database, or a PGlite folder), for tests
 * that write an older schema by hand before migrating it. */
export async function openScratchDriver(
  kind: (typeof STORAGE_KINDS)[number],
): Promise<{ driver: SqlDriver; dispose: () => Promise<void> }> {
  if (kind === 'postgres') {
    const scratch = await createScratchDatabase();
    const driver = await openPostgresDriver({ url: scratch.url, poolSize: 2 });
    return { driver, dispose: async () => (await driver.close(), await scratch.drop()) };
  }
  const dir = mkdtempSync(join(tmpdir(), 'tuner-migration-'));
  const driver = await openPgliteDriver(dir);
  return { driver, dispose: async () => (await driver.close(), rmSync(dir, { recursive: true, force: true })) };
}

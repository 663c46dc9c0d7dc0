// The "service + admin" fixture most service tests start from: the real service on a storage of
// its own (PGlite unless told), on an address that stays across restarts, with the admin it
// created at first start logged in; databases with their API key and an agent client on demand.
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after } from 'node:test';
import { freePort } from '../../src/lab/cluster.ts';
import type { StartOptions } from '../../src/service/app/server.ts';
import {
  ADMIN_PASSWORD,
  AgentClient,
  PersonClient,
  createServiceStore,
  startTestService,
  type ServiceStore,
  type StorageKind,
  type TestService,
} from './service.ts';

export interface AdminServiceOptions {
  /** Service configuration from the environment, as the bin reads it. */
  env?: Record<string, string>;
  /** Test-only start options (the watch's and the advice refresh's shorter periods among them: server.ts StartOptions). */
  start?: Pick<StartOptions, 'requestTimeoutMs' | 'leaseClock' | 'advice' | 'watch'>;
  /** Downloads of its own (TUNER_DOWNLOADS_DIR), whatever dist/ holds: a build's output as the
   * pages see it, one binary named in SHA256SUMS. */
  fakeDownloads?: boolean;
}

export interface AdminService {
  readonly store: ServiceStore;
  /** host:port, the same across restarts. */
  readonly listen: string;
  /** Whether the service runs (false after `stop`). */
  readonly running: boolean;
  /** The running service (a new one after `restart`); throws while it is stopped. */
  readonly service: TestService;
  /** The admin, logged in to the running service. */
  readonly admin: PersonClient;
  /** A database of the admin's, its first key, and an agent client holding that key. */
  database(name: string, target?: string): Promise<{ databaseId: string; apiKey: string; apiKeyId: string; agent: AgentClient }>;
  /** Stops the service (its storage stays). */
  stop(): Promise<void>;
  /** Starts it again on the same storage and address, the admin logged in again; with `env`
   * instead of the environment it was first started with, when given (an operator's change). */
  start(env?: Record<string, string>): Promise<void>;
  restart(env?: Record<string, string>): Promise<void>;
  close(): Promise<void>;
}

export async function startAdminService(kind: StorageKind = 'pglite', options: AdminServiceOptions = {}): Promise<AdminService> {
  const store = await createServiceStore(kind);
  const listen = `127.0.0.1:${await freePort()}`;
  const downloads = options.fakeDownloads ? fakeDownloads() : undefined;
  const environment = (env: Record<string, string> | undefined) => ({ ...env, ...(downloads && { TUNER_DOWNLOADS_DIR: downloads }) });
  let service: TestService | undefined;
  let admin: PersonClient;
  const stop = async () => {
    await service?.close();
    service = undefined;
  };
  const close = async () => {
    await stop();
    await store.dispose();
    if (downloads) rmSync(downloads, { recursive: true, force: true });
  };
  const running = (): TestService => {
    if (!service) throw new Error('the test service is stopped');
    return service;
  };
  const start = async (env = options.env) => {
    service = await startTestService(store, environment(env), listen, options.start);
    admin = await PersonClient.login(service.url, 'admin', ADMIN_PASSWORD);
  };
  try {
    await start();
  } catch (error) {
    await close();
    throw error;
  }
  return {
    store,
    listen,
    get running() {
      return service !== undefined;
    },
    get service() {
      return running();
    },
    get admin() {
      return admin;
    },
    async database(name, target = 'local') {
      const created = await admin.createDatabase(name, target);
      return { ...created, agent: new AgentClient(running().url, created.databaseId, created.apiKey) };
    },
    stop,
    start,
    async restart(env) {
      await stop();
      await start(env);
    },
    close,
  };
}

function fakeDownloads(): string {
  const dir = mkdtempSync(join(tmpdir(), 'tuner-test-downloads-'));
  const binary = Buffer.from('not a real binary');
  writeFileSync(join(dir, 'tuner-agent-linux-x64'), binary);
  writeFileSync(join(dir, 'SHA256SUMS'), `${createHash('sha256').update(binary).digest('hex')}  tuner-agent-linux-x64\n`);
  return dir;
}

/** For a file that starts several services, each on PGlite of its own with the environment it
 * is given (nobody logged in): a function that starts one, all closed after the file's tests. */
export function serviceStarter(): (env?: Record<string, string>) => Promise<TestService> {
  const running: Array<{ service: TestService; store: ServiceStore }> = [];
  after(async () => {
    for (const { service, store } of running) {
      await service.close();
      await store.dispose();
    }
  });
  return async (env = {}) => {
    const store = await createServiceStore('pglite');
    const service = await startTestService(store, env);
    running.push({ service, store });
    return service;
  };
}

/** The service's lease clock in a test: the real time, shifted by the test. A lease granted or
 * renewed counts from this clock, so a test shifts it back instead of waiting for a lease to lapse. */
export class LeaseClock {
  private offsetMs = 0;
  readonly now = (): Date => new Date(Date.now() + this.offsetMs);
  shift(ms: number): void {
    this.offsetMs += ms;
  }
}

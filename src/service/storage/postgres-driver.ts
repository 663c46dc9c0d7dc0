// Production storage: a PostgreSQL server through a pg connection pool. Several service
// replicas may share it; they take turns through advisory locks where it matters.
// TUNER_DATABASE_URL means what it means to libpq (src/postgres/connect.ts), several hosts and
// target_session_attrs included (postgres-hosts.ts): the pool is on the first host that answers
// and is what target_session_attrs asks for. When a statement finds the host lost (a failover:
// the connection dropped, or the server no longer takes writes), the statement fails (the request
// that ran it fails, and an agent sends its report again with the same seq, stored once) and the
// choice is made again in the background, host by host, until one answers: a new pool on it
// replaces the old one. Until then statements fail at once, and /healthz says degraded.
import pg from 'pg';
import { connectClient, planConnection, type ConnectionPlan } from '../../postgres/connect.ts';
import type { Attempt } from '../../postgres/connection-plan.ts';
import type { Queryable, SqlDriver, SqlConnection } from './driver.ts';
import { isHostLost, sessionMismatch, splitStorageHosts, type StorageHosts } from './postgres-hosts.ts';

export interface PostgresDriverOptions {
  url: string;
  /** Connections in the pool. */
  poolSize?: number;
  /** Between two rounds over the hosts while none answers (default 500 ms). */
  rechooseIntervalMs?: number;
}

const SETTING = 'TUNER_DATABASE_URL';
const APPLICATION_NAME = 'tuner-service';
/** A host that does not answer in this time is passed over (a failover must not hang on it). The
 * pool applies it to a request waiting for a free client too: long enough not to fail a busy one. */
const CONNECT_TIMEOUT_MS = 10_000;

/** Refused while the storage's host is being chosen again (after a failover). */
export class StorageHostLostError extends Error {
  override name = 'StorageHostLostError';
  constructor() {
    super('the storage lost its host (a failover?): choosing the host again');
  }
}

/** pg-pool (3.14) waits for what onConnect returns before it hands the client out; @types/pg
 * still declares it void. */
const noJit = (async (client: pg.ClientBase) => void (await client.query('SET jit = off').catch(() => undefined))) as (
  client: pg.ClientBase,
) => void;

function wrap(client: pg.Pool | pg.PoolClient): Queryable {
  return {
    async query<T extends object>(text: string, params: readonly unknown[] = [], options: { name?: string } = {}): Promise<T[]> {
      const result = await client.query<T>({ text, values: params as unknown[], ...(options.name && { name: options.name }) });
      return result.rows;
    },
  };
}

async function inTransaction<R>(client: pg.PoolClient, fn: (tx: Queryable) => Promise<R>): Promise<R> {
  await client.query('BEGIN');
  try {
    const result = await fn(wrap(client));
    await client.query('COMMIT');
    return result;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  }
}

/** The first host, in order, that answers and is what target_session_attrs asks for: the connection
 * attempt that worked there (prefer's and allow's choice between TLS and plain settled). Throws
 * naming each host's reason, the first host's own message when it is the only one. */
async function chooseHost(hosts: StorageHosts, plans: readonly ConnectionPlan[]): Promise<{ attempt: Attempt; index: number }> {
  const reasons: string[] = [];
  for (const [index, plan] of plans.entries()) {
    try {
      const { client, attempt } = await connectClient(plan, {
        application_name: APPLICATION_NAME,
        connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
      });
      try {
        const mismatch = await sessionMismatch(client, hosts.targetSessionAttrs);
        if (mismatch === null) return { attempt, index };
        reasons.push(`${hosts.names[index]}: ${mismatch}, not ${hosts.targetSessionAttrs}`);
      } finally {
        await client.end().catch(() => undefined);
      }
    } catch (err) {
      if (plans.length === 1) throw err;
      reasons.push(`${hosts.names[index]}: ${(err as Error).message}`);
    }
  }
  throw new Error(`no host is ${hosts.targetSessionAttrs === 'any' ? 'reachable' : hosts.targetSessionAttrs}: ${reasons.join('; ')}`);
}

export async function openPostgresDriver(options: PostgresDriverOptions): Promise<SqlDriver> {
  const hosts = splitStorageHosts(options.url, SETTING);
  const plans = hosts.urls.map((url) => planConnection(url, { setting: SETTING }));
  // Fail at start, with the cause and its fix, rather than on the first request.
  const first = await chooseHost(hosts, plans).catch((err: unknown) => {
    throw new Error(`cannot connect to ${SETTING}: ${(err as Error).message}`, { cause: err });
  });
  const newPool = (attempt: Attempt): pg.Pool => {
    const created = new pg.Pool({
      ...attempt.config,
      max: options.poolSize ?? 10,
      application_name: APPLICATION_NAME,
      connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
      // No JIT compilation: the service's statements are many short lookups, which JIT makes
      // slower. The fleet's statement at 10,000 databases is costed high enough to be compiled,
      // and compiling it cost 130-170 ms (EXPLAIN ANALYZE). Before the client is handed out; a
      // server that refuses it keeps its own setting.
      onConnect: noJit,
    });
    // An idle client that loses its connection emits 'error'; without a listener it would crash
    // the process. The pool replaces the client on the next query; the host may have failed over.
    created.on('error', () => hostLost(created));
    return created;
  };
  let pool = newPool(first.attempt);
  let closed = false;
  /** The choice being made again, while it runs: one at a time. */
  let rechoosing: Promise<void> | null = null;
  // With one host and no target_session_attrs, pg's pool reconnects to it by itself.
  const mayMove = plans.length > 1 || hosts.targetSessionAttrs !== 'any';

  function hostLost(on: pg.Pool): void {
    if (!mayMove || closed || rechoosing || on !== pool) return;
    rechoosing = (async () => {
      while (!closed) {
        try {
          const chosen = await chooseHost(hosts, plans);
          if (closed) return;
          const old = pool;
          pool = newPool(chosen.attempt);
          // Clients checked out of the old pool finish (or fail) their statement first.
          void old.end().catch(() => undefined);
          return;
        } catch {
          await new Promise((resolve) => setTimeout(resolve, options.rechooseIntervalMs ?? 500));
        }
      }
    })().finally(() => (rechoosing = null));
  }

  /** Runs work on the pool of now; a lost host starts the choice again, and the error goes on.
   * While the choice is being made, work fails at once rather than wait on a host that is gone. */
  async function onPool<R>(work: (p: pg.Pool) => Promise<R>): Promise<R> {
    if (rechoosing) throw new StorageHostLostError();
    const current = pool;
    try {
      return await work(current);
    } catch (err) {
      if (isHostLost(err)) hostLost(current);
      throw err;
    }
  }

  const withClient = <R>(fn: (client: pg.PoolClient) => Promise<R>): Promise<R> =>
    onPool(async (p) => {
      const client = await p.connect();
      let failed: unknown;
      try {
        return await fn(client);
      } catch (err) {
        failed = err;
        throw err;
      } finally {
        // A client whose connection is gone is not handed out again.
        client.release(failed !== undefined && isHostLost(failed) ? (failed as Error) : undefined);
      }
    });

  return {
    kind: 'postgres',
    query: (text, params, queryOptions) => onPool((p) => wrap(p).query(text, params, queryOptions)),
    exec: (text) => onPool(async (p) => void (await p.query(text))),
    transaction: (fn) => withClient((client) => inTransaction(client, fn)),
    withAdvisoryLock: (key, fn) =>
      withClient(async (client) => {
        await client.query('SELECT pg_advisory_lock($1)', [key]);
        try {
          const connection: SqlConnection = {
            ...wrap(client),
            exec: async (text) => void (await client.query(text)),
            transaction: (inner) => inTransaction(client, inner),
          };
          return await fn(connection);
        } finally {
          await client.query('SELECT pg_advisory_unlock($1)', [key]);
        }
      }),
    close: async () => {
      closed = true;
      await rechoosing;
      await pool.end();
    },
  };
}

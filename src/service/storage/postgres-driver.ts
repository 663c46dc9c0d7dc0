// Production storage: a PostgreSQL server through a pg connection pool. Several service
// replicas may share it; they take turns through advisory locks where it matters.
// TUNER_DATABASE_URL means what it means to libpq (src/postgres/connect.ts).
import pg from 'pg';
import { connectClient, planConnection } from '../../postgres/connect.ts';
import type { Queryable, SqlDriver, SqlConnection } from './driver.ts';

export interface PostgresDriverOptions {
  url: string;
  /** Connections in the pool. */
  poolSize?: number;
}

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

export async function openPostgresDriver(options: PostgresDriverOptions): Promise<SqlDriver> {
  const plan = planConnection(options.url, { setting: 'TUNER_DATABASE_URL' });
  // Fail at start, with the cause and its fix, rather than on the first request. The first
  // connection also settles prefer's and allow's choice between TLS and plain: the pool keeps
  // the attempt that worked, as the server will answer the same way again.
  const { client: probe, attempt } = await connectClient(plan, { application_name: 'tuner-service' }).catch((err: unknown) => {
    throw new Error(`cannot connect to TUNER_DATABASE_URL: ${(err as Error).message}`, { cause: err });
  });
  await probe.end();
  const pool = new pg.Pool({
    ...attempt.config,
    max: options.poolSize ?? 10,
    application_name: 'tuner-service',
  });
  // An idle client that loses its connection emits 'error'; without a listener it would crash
  // the process. The pool replaces the client on the next query.
  pool.on('error', () => undefined);

  async function withClient<R>(fn: (client: pg.PoolClient) => Promise<R>): Promise<R> {
    const client = await pool.connect();
    try {
      return await fn(client);
    } finally {
      client.release();
    }
  }

  return {
    kind: 'postgres',
    ...wrap(pool),
    exec: async (text) => void (await pool.query(text)),
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
    close: () => pool.end(),
  };
}

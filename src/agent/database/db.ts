// The agent's own PostgreSQL session. Every statement it sends is tagged three ways so that it
// never mistakes its own work for the workload's: `application_name` (pg_stat_activity), a
// marker comment at both ends of the text (pg_stat_statements keeps the first text it saw for a
// queryid; from PostgreSQL 18 on it keeps it from the statement's first token, so a leading
// comment alone is lost there, and the trailing one is what remains), and a
// `statement_timeout` so that a slow catalog read can never pile up on a busy server.
// The session survives server restarts: after the connection dies, the next call reconnects.
// A failed statement is never retried here; callers decide what is safe to repeat.
// The connection URL means what it means to libpq (src/postgres/connect.ts), with the target's
// TLS defaults when it names no sslmode.
import type pg from 'pg';
import { connectClient, planConnection, type ConnectionContext, type ConnectionSecurity } from '../../postgres/connect.ts';
import type { Db } from '../../target/database.ts';

export type { Db };

export const AGENT_APPLICATION_NAME = 'tuner-agent';
/** Begins and ends every statement the agent sends; collectors drop statements whose text starts
 * or ends with it. */
export const AGENT_QUERY_MARKER = '/* tuner-agent */';

/** The statement as the agent sends it: marked at both ends (the newline keeps the trailing marker
 * out of a `--` comment that ends the text). */
export function markStatement(text: string): string {
  return `${AGENT_QUERY_MARKER} ${text}\n${AGENT_QUERY_MARKER}`;
}
export const DEFAULT_STATEMENT_TIMEOUT_MS = 5_000;

export interface DbOptions {
  statementTimeoutMs?: number;
  connectTimeoutMs?: number;
  /** Where the URL comes from and the target's TLS defaults; default: libpq's, for postgresql.connection_url. */
  connection?: ConnectionContext;
}

/** Throws ConnectionSettingError for TLS parameters that mean nothing, PostgresConnectError when the server is not reached. */
export async function connectDb(connectionUrl: string, options: DbOptions = {}): Promise<Db> {
  const plan = planConnection(connectionUrl, options.connection ?? { setting: 'postgresql.connection_url' });
  let client: pg.Client | null = null;
  let backendPid = 0;
  let security: ConnectionSecurity | undefined;
  let closed = false;

  const open = async (): Promise<pg.Client> => {
    const connected = await connectClient(plan, {
      application_name: AGENT_APPLICATION_NAME,
      statement_timeout: options.statementTimeoutMs ?? DEFAULT_STATEMENT_TIMEOUT_MS,
      connectionTimeoutMillis: options.connectTimeoutMs ?? 10_000,
    });
    const c = connected.client;
    // A client whose server goes away emits 'error'; without a listener Node would crash.
    const drop = () => {
      if (client === c) client = null;
    };
    c.on('error', drop);
    c.on('end', drop);
    security = connected.security;
    try {
      const rows = await c.query<{ pid: number }>(markStatement('SELECT pg_backend_pid() AS pid'));
      backendPid = rows.rows[0]?.pid ?? 0;
    } catch (err) {
      await c.end().catch(() => undefined);
      throw err;
    }
    client = c;
    return c;
  };

  /** The connection being opened: callers that find none while one is opened wait for that one.
   * Each opening its own (a report collected while a revert reads back, both after the server
   * went away) left all but the last open and unowned, and an agent with an open connection
   * never exits. */
  let opening: Promise<pg.Client> | null = null;
  const current = async (): Promise<pg.Client> => {
    if (closed) throw new Error('the database session is closed');
    if (client) return client;
    opening ??= open().finally(() => {
      opening = null;
    });
    return opening;
  };

  await current();
  return {
    get backendPid() {
      return backendPid;
    },
    get security() {
      return security!;
    },
    async query<T extends object>(text: string, params?: readonly unknown[]): Promise<T[]> {
      const c = await current();
      const result = await c.query<T>(markStatement(text), params ? [...params] : undefined);
      return result.rows;
    },
    async waitUntilReachable(timeoutMs: number) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        try {
          const c = await current();
          await c.query(markStatement('SELECT 1'));
          return;
        } catch (err) {
          const dead = client;
          client = null;
          await dead?.end().catch(() => undefined);
          if (Date.now() > deadline) throw err;
          await new Promise((r) => setTimeout(r, 250));
        }
      }
    },
    async close() {
      closed = true;
      // A connection still being opened is ended too, once it is.
      await opening?.catch(() => undefined);
      await client?.end().catch(() => undefined);
      client = null;
    },
  };
}

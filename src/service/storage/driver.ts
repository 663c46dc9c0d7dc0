// The little that the service needs from a SQL database, so that one set of SQL runs on both
// storages: embedded PGlite (the default, no setup) and a PostgreSQL server (production).

export interface Queryable {
  /** One statement with $1.. parameters; rows as objects keyed by column name. A `name` makes it
   * a prepared statement on PostgreSQL (parsed and planned once per connection): for the hot
   * statements of the agent API. */
  query<T extends object>(text: string, params?: readonly unknown[], options?: { name?: string }): Promise<T[]>;
}

export interface SqlDriver extends Queryable {
  readonly kind: 'pglite' | 'postgres';
  /** Several statements without parameters (migrations). */
  exec(text: string): Promise<void>;
  /** Runs fn in one transaction on one connection: committed if it resolves, rolled back if it throws. */
  transaction<R>(fn: (tx: Queryable) => Promise<R>): Promise<R>;
  /** Runs fn on one connection while holding a session-level advisory lock, so that replicas
   * starting at the same time take turns (migrations, the first admin). */
  withAdvisoryLock<R>(key: number, fn: (conn: SqlConnection) => Promise<R>): Promise<R>;
  close(): Promise<void>;
}

/** One connection: plain statements, several-statement scripts and transactions on it. */
export interface SqlConnection extends Queryable {
  exec(text: string): Promise<void>;
  transaction<R>(fn: (tx: Queryable) => Promise<R>): Promise<R>;
}

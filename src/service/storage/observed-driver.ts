// A SQL driver that tells someone about each storage failure (for the storage-errors counter):
// a statement that failed, or a transaction that could not begin or commit. What the caller's own
// code throws inside a transaction (a refused request, a busy tuning session) is not the storage's fault
// and is not told.
import type { Queryable, SqlDriver, SqlConnection } from './driver.ts';

export function observeDriverErrors(driver: SqlDriver, onError: (err: unknown) => void): SqlDriver {
  /** Errors already told (a failed statement also fails its transaction) or thrown by callers. */
  const seen = new WeakSet<object>();
  const mark = (err: unknown) => {
    if (typeof err === 'object' && err !== null) seen.add(err);
  };
  const tell = (err: unknown) => {
    if (typeof err === 'object' && err !== null && seen.has(err)) return;
    mark(err);
    onError(err);
  };
  const watched = <R>(work: Promise<R>): Promise<R> =>
    work.catch((err: unknown) => {
      tell(err);
      throw err;
    });
  const observedQueryable = (q: Queryable): Queryable => ({
    query: (text, params, options) => watched(q.query(text, params, options)),
  });
  /** The caller's function: what it throws of its own is marked as the caller's. */
  const callerFn =
    <T, R>(fn: (arg: T) => Promise<R>, wrap: (arg: T) => T) =>
    async (arg: T): Promise<R> => {
      try {
        return await fn(wrap(arg));
      } catch (err) {
        mark(err);
        throw err;
      }
    };
  const observedConnection = (conn: SqlConnection): SqlConnection => ({
    ...observedQueryable(conn),
    exec: (text) => watched(conn.exec(text)),
    transaction: (fn) => watched(conn.transaction(callerFn(fn, observedQueryable))),
  });
  return {
    kind: driver.kind,
    ...observedQueryable(driver),
    exec: (text) => watched(driver.exec(text)),
    transaction: (fn) => watched(driver.transaction(callerFn(fn, observedQueryable))),
    withAdvisoryLock: (key, fn) => watched(driver.withAdvisoryLock(key, callerFn(fn, observedConnection))),
    close: () => driver.close(),
  };
}

/** One call that goes to the storage and waits for its answer: a statement, a script, or a whole
 * transaction (whose statements are counted apart, in `statements`). */
export interface StorageCall {
  kind: 'query' | 'exec' | 'transaction' | 'advisory_lock';
  /** The prepared statement's name, or the statement's first line (a transaction's first statement). */
  label: string;
  /** The statements it ran: 1 for a query, those inside for a transaction. */
  statements: number;
}

/** A SQL driver that tells `onCall` of each call the service makes to the storage when the call
 * is done: what a request costs in storage round-trips (test/report-roundtrips.test.ts). */
export function observeDriverCalls(driver: SqlDriver, onCall: (call: StorageCall) => void): SqlDriver {
  const labelOf = (text: string, name?: string) => name ?? text.trim().split('\n')[0]!.slice(0, 80);
  /** Counts the statements a transaction runs, and names it by its first. */
  const inside = async <R>(tx: Queryable, fn: (tx: Queryable) => Promise<R>): Promise<R> => {
    let statements = 0;
    let label = '';
    try {
      return await fn({
        query: <T extends object>(text: string, params?: readonly unknown[], options?: { name?: string }) => {
          statements += 1;
          if (statements === 1) label = labelOf(text, options?.name);
          return tx.query<T>(text, params, options);
        },
      });
    } finally {
      onCall({ kind: 'transaction', label, statements });
    }
  };
  return {
    kind: driver.kind,
    query: <T extends object>(text: string, params?: readonly unknown[], options?: { name?: string }) =>
      driver.query<T>(text, params, options).finally(() => onCall({ kind: 'query', label: labelOf(text, options?.name), statements: 1 })),
    exec: (text) => driver.exec(text).finally(() => onCall({ kind: 'exec', label: labelOf(text), statements: 1 })),
    transaction: (fn) => driver.transaction((tx) => inside(tx, fn)),
    withAdvisoryLock: (key, fn) =>
      driver.withAdvisoryLock(key, fn).finally(() => onCall({ kind: 'advisory_lock', label: `${key}`, statements: 1 })),
    close: () => driver.close(),
  };
}

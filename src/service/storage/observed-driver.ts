// A SQL driver that tells someone about each storage failure (for the storage-errors counter):
// a statement that failed, or a transaction that could not begin or commit. What the caller's own
// code throws inside a transaction (a refused request, a busy session) is not the storage's fault
// and is not told.
import type { Queryable, SqlDriver, SqlDriverSession } from './driver.ts';

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
  const observedSession = (conn: SqlDriverSession): SqlDriverSession => ({
    ...observedQueryable(conn),
    exec: (text) => watched(conn.exec(text)),
    transaction: (fn) => watched(conn.transaction(callerFn(fn, observedQueryable))),
  });
  return {
    kind: driver.kind,
    ...observedQueryable(driver),
    exec: (text) => watched(driver.exec(text)),
    transaction: (fn) => watched(driver.transaction(callerFn(fn, observedQueryable))),
    withAdvisoryLock: (key, fn) => watched(driver.withAdvisoryLock(key, callerFn(fn, observedSession))),
    close: () => driver.close(),
  };
}

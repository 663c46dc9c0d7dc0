// The login throttle's counts (people/store.ts LoginFailureStore): one row per key, shared by
// every replica on the storage; rows whose window has ended are removed by prune.
import type { LoginFailureCount, LoginFailureStore } from '../people/store.ts';
import type { Queryable, SqlDriver } from './driver.ts';

interface FailureRow {
  key: string;
  failures: number;
  expires_at: Date;
}

const live = (rows: FailureRow[], at: Date) =>
  new Map<string, LoginFailureCount>(
    rows.filter((r) => r.expires_at >= at && r.failures > 0).map((r) => [r.key, { failures: r.failures, expiresAt: r.expires_at }]),
  );

async function readCounts(q: Queryable, keys: readonly string[], at: Date): Promise<Map<string, LoginFailureCount>> {
  const rows = await q.query<FailureRow>('SELECT key, failures, expires_at FROM login_failures WHERE key = ANY($1::text[])', [keys], {
    name: 'login_failures_read',
  });
  return live(rows, at);
}

/** The counts of the keys with their rows locked until the transaction ends. A key with no row
 * gets one counting nothing yet, so that there is a row to lock: two first attempts from a new
 * address take turns too (the second's insert waits for the first's). In key order on every
 * replica, so that two locking the same keys wait for each other rather than deadlock. */
async function lockCounts(q: Queryable, keys: readonly string[], at: Date, windowMs: number): Promise<Map<string, LoginFailureCount>> {
  await q.query(
    `INSERT INTO login_failures (key, failures, expires_at)
     SELECT DISTINCT k, 0, $2::timestamptz + make_interval(secs => $3::double precision / 1000) FROM unnest($1::text[]) AS k ORDER BY k
     ON CONFLICT (key) DO NOTHING`,
    [keys, at, windowMs],
    { name: 'login_failures_hold' },
  );
  const rows = await q.query<FailureRow>(
    'SELECT key, failures, expires_at FROM login_failures WHERE key = ANY($1::text[]) ORDER BY key FOR UPDATE',
    [keys],
    { name: 'login_failures_lock' },
  );
  return live(rows, at);
}

/** One failure more under each key, in one statement: the keys in one order on every replica (no
 * deadlock), and ON CONFLICT makes a second replica's insert of the same key an update. A count
 * whose window has ended, or that counts nothing (lockCounts' row), starts at 1 with a new window. */
async function count(q: Queryable, keys: readonly string[], at: Date, windowMs: number): Promise<void> {
  await q.query(
    `INSERT INTO login_failures AS f (key, failures, expires_at)
     SELECT DISTINCT k, 1, $2::timestamptz + make_interval(secs => $3::double precision / 1000)
       FROM unnest($1::text[]) AS k ORDER BY k
     ON CONFLICT (key) DO UPDATE SET
       failures = CASE WHEN f.expires_at < $2::timestamptz OR f.failures = 0 THEN 1 ELSE f.failures + 1 END,
       expires_at = CASE WHEN f.expires_at < $2::timestamptz OR f.failures = 0 THEN EXCLUDED.expires_at ELSE f.expires_at END`,
    [keys, at, windowMs],
    { name: 'login_failures_count' },
  );
}

export function createLoginFailureStore(driver: SqlDriver): LoginFailureStore {
  const db: Queryable = driver;
  return {
    loginFailures: (keys, at) => readCounts(db, keys, at),

    countLoginFailure: (keys, at, windowMs) => count(db, keys, at, windowMs),

    countLoginAttempt: (keys, at, windowMs, decide) =>
      driver.transaction(async (tx) => {
        const counts = await lockCounts(tx, keys, at, windowMs);
        const counted = decide(counts);
        if (counted.length > 0) await count(tx, counted, at, windowMs);
        return counts;
      }),

    async uncountLoginFailure(keys, at) {
      await db.query(
        'UPDATE login_failures SET failures = greatest(failures - 1, 0) WHERE key = ANY($1::text[]) AND expires_at >= $2::timestamptz',
        [keys, at],
        { name: 'login_failures_uncount' },
      );
    },

    async forgetLoginFailures(keys) {
      await db.query('DELETE FROM login_failures WHERE key = ANY($1::text[])', [keys], { name: 'login_failures_forget' });
    },
  };
}

// Embedded storage: PGlite (PostgreSQL compiled to WebAssembly) in a directory, one process only.
// A lock file keeps a second service from opening the same directory, which would corrupt it.
import { closeSync, mkdirSync, openSync, readFileSync, rmSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { PGlite, type Transaction } from '@electric-sql/pglite';
import type { Queryable, SqlDriver, SqlConnection } from './driver.ts';

const LOCK_FILE = 'tuner-service.lock';

function processAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/** Takes the data directory for this process; a lock left by a process that died is taken over. */
function lockDataDir(dataDir: string): () => void {
  const path = join(dataDir, LOCK_FILE);
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(path, 'wx', 0o600);
      writeSync(fd, `${process.pid}\n`);
      closeSync(fd);
      return () => rmSync(path, { force: true });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const holder = Number.parseInt(readFileSync(path, 'utf8'), 10);
      if (Number.isInteger(holder) && holder !== process.pid && processAlive(holder)) {
        throw new Error(
          `data directory ${dataDir} is in use by another tuner-service (pid ${holder}); PGlite storage serves one process: use TUNER_DATABASE_URL for several replicas`,
          { cause: err },
        );
      }
      rmSync(path, { force: true });
    }
  }
  throw new Error(`cannot lock data directory ${dataDir}`);
}

function wrap(q: PGlite | Transaction): Queryable {
  return {
    async query<T extends object>(text: string, params: readonly unknown[] = []): Promise<T[]> {
      const result = await q.query<T>(text, params as unknown[]);
      return result.rows;
    },
  };
}

export async function openPgliteDriver(dataDir: string): Promise<SqlDriver> {
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const unlock = lockDataDir(dataDir);
  let db: PGlite;
  try {
    db = await PGlite.create(join(dataDir, 'pglite'));
  } catch (err) {
    unlock();
    throw err;
  }
  const base = wrap(db);
  const connection: SqlConnection = {
    query: (text, params) => base.query(text, params),
    exec: async (text) => void (await db.exec(text)),
    transaction: (fn) => db.transaction((tx) => fn(wrap(tx))),
  };
  return {
    kind: 'pglite',
    ...connection,
    // One process owns the directory, so there is nobody to take turns with; the lock is still
    // taken so the SQL is the same as on PostgreSQL.
    async withAdvisoryLock(key, fn) {
      await db.query('SELECT pg_advisory_lock($1)', [key]);
      try {
        return await fn(connection);
      } finally {
        await db.query('SELECT pg_advisory_unlock($1)', [key]);
      }
    },
    async close() {
      try {
        await db.close();
      } finally {
        unlock();
      }
    },
  };
}

// Opens the storage the configuration names, brings its schema up to date, and hands back the
// Storage interface: PostgreSQL when a URL is given, else PGlite in the data directory.
import type { SqlDriver } from './driver.ts';
import { migrate } from './migrations.ts';
import { observeDriverErrors } from './observed-driver.ts';
import { openPgliteDriver } from './pglite-driver.ts';
import { openPostgresDriver } from './postgres-driver.ts';
import { createSqlStorage } from './sql-storage.ts';
import type { Storage } from './storage.ts';

export interface StorageOptions {
  /** PostgreSQL connection URL; when absent, PGlite in dataDir. */
  databaseUrl?: string | undefined;
  dataDir: string;
  poolSize?: number | undefined;
  /** Told of each storage failure (the metrics' storage-errors counter). */
  onError?: ((err: unknown) => void) | undefined;
}

export async function openStorage(options: StorageOptions): Promise<Storage> {
  const driver: SqlDriver = options.databaseUrl
    ? await openPostgresDriver({ url: options.databaseUrl, poolSize: options.poolSize })
    : await openPgliteDriver(options.dataDir);
  try {
    await migrate(driver);
  } catch (err) {
    await driver.close().catch(() => undefined);
    throw err;
  }
  return createSqlStorage(options.onError ? observeDriverErrors(driver, options.onError) : driver);
}

// The hosts of a storage URL, as libpq reads a multi-host one: postgresql://u@h1:p1,h2:p2/db
// with target_session_attrs (any, read-write, primary). node-postgres and pg-connection-string
// take one host only, so the choice is made here: the URL is split into one URL per host, tried
// in order at connect time, and the first that answers and is what target_session_attrs asks
// for is used (postgres-driver.ts); after a failover the choice is made again.
import type pg from 'pg';

export const TARGET_SESSION_ATTRS = ['any', 'read-write', 'primary'] as const;
export type TargetSessionAttrs = (typeof TARGET_SESSION_ATTRS)[number];

export interface StorageHosts {
  /** One URL per host, in the order given, each otherwise as typed. */
  urls: string[];
  /** host:port of each, for messages (never the credentials). */
  names: string[];
  targetSessionAttrs: TargetSessionAttrs;
}

export class StorageHostsError extends Error {
  override name = 'StorageHostsError';
}

/** Splits `scheme://[userinfo@]host[:port],host[:port]…[/db][?query]` into one URL per host. A
 * one-host URL comes back as it is (without target_session_attrs). */
export function splitStorageHosts(url: string, setting: string): StorageHosts {
  const schemeEnd = url.indexOf('://');
  if (schemeEnd < 0) throw new StorageHostsError(`${setting}: expected a URL, postgresql://user:password@host:5432/dbname`);
  const scheme = url.slice(0, schemeEnd + 3);
  const rest = url.slice(schemeEnd + 3);
  const queryAt = rest.indexOf('?');
  const beforeQuery = queryAt < 0 ? rest : rest.slice(0, queryAt);
  const params = new URLSearchParams(queryAt < 0 ? '' : rest.slice(queryAt + 1));
  // The user information ends at the last @ before the path (a password may hold an encoded @).
  const at = beforeQuery.lastIndexOf('@');
  const slash = beforeQuery.indexOf('/', at + 1);
  const userinfo = at < 0 ? '' : beforeQuery.slice(0, at + 1);
  const hostList = beforeQuery.slice(at + 1, slash < 0 ? undefined : slash);
  const path = slash < 0 ? '' : beforeQuery.slice(slash);

  const given = params.get('target_session_attrs');
  params.delete('target_session_attrs');
  if (given !== null && !(TARGET_SESSION_ATTRS as readonly string[]).includes(given)) {
    throw new StorageHostsError(
      `${setting}: target_session_attrs=${given} is not supported: the service writes to its storage; use read-write (or primary, or any)`,
    );
  }
  const query = params.size > 0 ? `?${params.toString()}` : '';
  const hosts = hostList.split(',');
  if (hosts.some((h) => h === '')) throw new StorageHostsError(`${setting}: an empty host in the host list (host1:port1,host2:port2)`);
  return {
    urls: hosts.map((host) => `${scheme}${userinfo}${host}${path}${query}`),
    names: hosts.map((host) => (/:\d+$/.test(host) ? host : `${host}:5432`)),
    targetSessionAttrs: (given ?? 'any') as TargetSessionAttrs,
  };
}

/** Why a connected session is not what target_session_attrs asks for, or null when it is.
 * read-write: accepts writes by default (libpq's test: transaction_read_only off); primary: not
 * in recovery. */
export async function sessionMismatch(client: pg.Client, wanted: TargetSessionAttrs): Promise<string | null> {
  if (wanted === 'any') return null;
  const { rows } = await client.query<{ recovery: boolean; read_only: string }>(
    "SELECT pg_is_in_recovery() AS recovery, current_setting('transaction_read_only') AS read_only",
  );
  const row = rows[0]!;
  if (row.recovery) return 'a standby (in recovery)';
  if (wanted === 'read-write' && row.read_only === 'on') return 'read-only (default_transaction_read_only)';
  return null;
}

/** An error after which the storage's host may have changed (a failover, a switchover, a server
 * that went away): the connection was lost or refused, the server is shutting down or starting,
 * or it no longer takes writes (a primary demoted to a standby). */
export function isHostLost(err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown };
  const code = typeof e?.code === 'string' ? e.code : '';
  if (/^08/.test(code) || ['57P01', '57P02', '57P03', '25006'].includes(code)) return true;
  if (['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'ENOTFOUND'].includes(code)) return true;
  const message = typeof e?.message === 'string' ? e.message : '';
  // Not pg-pool's "timeout exceeded when trying to connect": that is also a wait for a free client
  // of a busy pool, which is load, not a lost host.
  return /Connection terminated|connection error|Client was closed/i.test(message);
}

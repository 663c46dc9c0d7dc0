// pg_settings rows as a fresh PostgreSQL 15 shows them: every knob of the catalog, and the rows
// the checks read besides (max_connections, wal_segment_size, the server version, a durability
// setting and a planner switch that are no knobs). test/knobs-pg.test.ts checks the catalog
// against real servers; these rows are for tests that need no server.
import { getKnob, type PgSettingRow } from '../../src/knobs/index.ts';
import type { Setting } from '../../src/protocol/v1.ts';

export type Pg15Row = [
  name: string,
  setting: string,
  unit: string | null,
  context: string,
  vartype: string,
  min: string | null,
  max: string | null,
  enumvals?: string[],
];
export const PG15_ROWS: readonly Pg15Row[] = [
  ['shared_buffers', '16384', '8kB', 'postmaster', 'integer', '16', '1073741823'],
  ['work_mem', '4096', 'kB', 'user', 'integer', '64', '2147483647'],
  ['hash_mem_multiplier', '2', null, 'user', 'real', '1', '1000'],
  ['maintenance_work_mem', '65536', 'kB', 'user', 'integer', '1024', '2147483647'],
  ['effective_cache_size', '524288', '8kB', 'user', 'integer', '1', '2147483647'],
  ['wal_buffers', '512', '8kB', 'postmaster', 'integer', '-1', '262143'],
  ['max_worker_processes', '8', null, 'postmaster', 'integer', '0', '262143'],
  ['max_parallel_workers', '8', null, 'user', 'integer', '0', '1024'],
  ['max_parallel_workers_per_gather', '2', null, 'user', 'integer', '0', '1024'],
  ['max_parallel_maintenance_workers', '2', null, 'user', 'integer', '0', '1024'],
  ['random_page_cost', '4', null, 'user', 'real', '0', '1.79769e+308'],
  ['seq_page_cost', '1', null, 'user', 'real', '0', '1.79769e+308'],
  ['effective_io_concurrency', '1', null, 'user', 'integer', '0', '1000'],
  ['default_statistics_target', '100', null, 'user', 'integer', '1', '10000'],
  ['jit', 'on', null, 'user', 'bool', null, null],
  ['jit_above_cost', '100000', null, 'user', 'real', '-1', '1.79769e+308'],
  ['max_wal_size', '1024', 'MB', 'sighup', 'integer', '2', '2147483647'],
  ['min_wal_size', '80', 'MB', 'sighup', 'integer', '2', '2147483647'],
  ['checkpoint_completion_target', '0.9', null, 'sighup', 'real', '0', '1'],
  ['checkpoint_timeout', '300', 's', 'sighup', 'integer', '30', '86400'],
  ['wal_writer_delay', '200', 'ms', 'sighup', 'integer', '1', '10000'],
  ['commit_delay', '0', null, 'superuser', 'integer', '0', '100000'],
  ['commit_siblings', '5', null, 'user', 'integer', '0', '1000'],
  ['wal_writer_flush_after', '128', '8kB', 'sighup', 'integer', '0', '2147483647'],
  ['checkpoint_flush_after', '32', '8kB', 'sighup', 'integer', '0', '256'],
  ['backend_flush_after', '0', '8kB', 'user', 'integer', '0', '256'],
  ['wal_compression', 'off', null, 'superuser', 'enum', null, null, ['pglz', 'lz4', 'zstd', 'on', 'off']],
  ['bgwriter_delay', '200', 'ms', 'sighup', 'integer', '10', '10000'],
  ['bgwriter_lru_maxpages', '100', null, 'sighup', 'integer', '0', '1073741823'],
  ['bgwriter_lru_multiplier', '2', null, 'sighup', 'real', '0', '10'],
  ['max_connections', '100', null, 'postmaster', 'integer', '1', '262143'],
  ['autovacuum_max_workers', '3', null, 'postmaster', 'integer', '1', '262143'],
  ['autovacuum_work_mem', '-1', 'kB', 'sighup', 'integer', '-1', '2147483647'],
  ['wal_segment_size', '16777216', 'B', 'internal', 'integer', '1048576', '1073741824'],
  ['server_version_num', '150020', null, 'internal', 'integer', '150020', '150020'],
  ['fsync', 'on', null, 'sighup', 'bool', null, null],
  ['enable_seqscan', 'on', null, 'user', 'bool', null, null],
];

/** The rows by name, each overridable. */
export function pg15Settings(overrides: Record<string, Partial<PgSettingRow>> = {}): Record<string, PgSettingRow> {
  const out: Record<string, PgSettingRow> = {};
  for (const [name, setting, unit, context, vartype, min_val, max_val, enumvals] of PG15_ROWS) {
    out[name] = { name, setting, unit, context, vartype, min_val, max_val, enumvals: enumvals ?? null, ...overrides[name] };
  }
  return out;
}

/** The catalog's knobs as the agent reports them to the service. */
export const PG15_KNOB_SETTINGS: Setting[] = PG15_ROWS.filter(([name]) => getKnob(name) !== undefined)
  .map(([name, setting, unit, context]) => ({ name, setting, unit, context, source: 'default', pendingRestart: false }))
  .sort((a, b) => (a.name < b.name ? -1 : 1));

// Cloud SQL's database flags that the agent tunes, with Cloud SQL's own ranges (in the unit
// pg_settings shows) and whether Cloud SQL restarts the instance to apply one. Cloud SQL refuses a
// flag not on its list and a value outside its range (some ranges depend on the machine's
// memory); the agent tunes only the flags here and checks the ranges before anything is written,
// so that a refusal changes nothing. A knob of the catalog not here is never tuned on Cloud C
// (leaving one out is the safe direction): the *_flush_after knobs, and commit_delay and
// commit_siblings, which the agent tunes only where it has measured them (self-hosted, RDS). Plain data: the definition (kinds.ts) reads it.

export interface CloudSqlFlag {
  /** Cloud SQL restarts the instance (and its replicas) to apply it. */
  readonly restart: boolean;
  /** Inclusive range for a number; absent for on/off flags. */
  readonly range?: { readonly min: number; readonly max: number };
  /** The largest value as a fraction of the machine's memory (a memory flag in its unit). */
  readonly maxMemoryFraction?: number;
  readonly onOff?: boolean;
}

const INT_MAX = 2147483647;
const n = (min: number, max: number, restart = false): CloudSqlFlag => ({ restart, range: { min, max } });
const onOff: CloudSqlFlag = { restart: false, onOff: true };

export const CLOUD_SQL_FLAGS: Readonly<Record<string, CloudSqlFlag>> = {
  shared_buffers: { restart: true, range: { min: 13107, max: INT_MAX }, maxMemoryFraction: 0.6 },
  work_mem: n(64, INT_MAX),
  hash_mem_multiplier: n(1, 1000),
  maintenance_work_mem: n(1024, INT_MAX),
  effective_cache_size: { restart: false, range: { min: 1, max: INT_MAX }, maxMemoryFraction: 0.7 },
  wal_buffers: n(-1, 262143, true),
  max_worker_processes: n(8, 4096, true),
  max_parallel_workers: n(0, 1024),
  max_parallel_workers_per_gather: n(0, 1024),
  max_parallel_maintenance_workers: n(0, 1024),
  random_page_cost: n(0, INT_MAX),
  seq_page_cost: n(0, INT_MAX),
  effective_io_concurrency: n(0, 1000),
  default_statistics_target: n(1, 10000),
  jit: onOff,
  jit_above_cost: n(-1, INT_MAX),
  max_wal_size: n(2, INT_MAX),
  min_wal_size: n(32, INT_MAX),
  checkpoint_completion_target: n(0, 1),
  checkpoint_timeout: n(30, 86400),
  wal_writer_delay: n(1, 10000),
  wal_compression: onOff,
  bgwriter_delay: n(10, 10000),
  bgwriter_lru_maxpages: n(0, 1073741823),
  bgwriter_lru_multiplier: n(0, 10),
};

/** Bytes of one unit of a memory flag, for maxMemoryFraction. */
const UNIT_BYTES: Readonly<Record<string, number>> = { shared_buffers: 8192, effective_cache_size: 8192 };

/** Why Cloud SQL would refuse `value` for `name` on a machine of `memoryBytes`, or null. */
export function flagValueProblem(name: string, value: string, memoryBytes: number | undefined): string | null {
  const flag = CLOUD_SQL_FLAGS[name];
  if (!flag) return `${name} is not a flag the agent tunes on Cloud SQL`;
  if (flag.onOff) return ['on', 'off'].includes(value.trim().toLowerCase()) ? null : 'expected on or off';
  const x = Number(value);
  if (value.trim() === '' || !Number.isFinite(x)) return 'expected a number';
  let max = flag.range!.max;
  if (flag.maxMemoryFraction !== undefined && memoryBytes !== undefined)
    max = Math.min(max, Math.floor((memoryBytes * flag.maxMemoryFraction) / (UNIT_BYTES[name] ?? 1)));
  const { min } = flag.range!;
  return x >= min && x <= max ? null : `expected a number from ${min} to ${max}`;
}

// The flags the fake Cloud SQL accepts, as Google's table of supported flags lists them: a range
// or on/off, whether setting one restarts the instance, and the memory-dependent maximum of
// shared_buffers and effective_cache_size. The fake's own table, apart from the agent's: any flag
// not here is refused as Cloud SQL refuses an unsupported one. Customer-only flags (logging,
// Cloud SQL's own cloudsql.*) are here too, since the agent must keep them.
export interface FakeFlag {
  restart?: boolean;
  min?: number;
  max?: number;
  onOff?: boolean;
  /** Largest value as a fraction of memory, in 8 kB pages. */
  memoryPagesFraction?: number;
}

const INT_MAX = 2147483647;
const r = (min: number, max: number, restart = false): FakeFlag => ({ min, max, restart });
const onOff: FakeFlag = { onOff: true };

export const FAKE_FLAGS: Readonly<Record<string, FakeFlag>> = {
  shared_buffers: { min: 13107, max: INT_MAX, restart: true, memoryPagesFraction: 0.6 },
  work_mem: r(64, INT_MAX),
  hash_mem_multiplier: r(1, 1000),
  maintenance_work_mem: r(1024, INT_MAX),
  effective_cache_size: { min: 1, max: INT_MAX, memoryPagesFraction: 0.7 },
  wal_buffers: r(-1, 262143, true),
  max_worker_processes: r(8, 4096, true),
  max_connections: r(14, 262143, true),
  max_parallel_workers: r(0, 1024),
  max_parallel_workers_per_gather: r(0, 1024),
  max_parallel_maintenance_workers: r(0, 1024),
  random_page_cost: r(0, INT_MAX),
  seq_page_cost: r(0, INT_MAX),
  effective_io_concurrency: r(0, 1000),
  default_statistics_target: r(1, 10000),
  jit: onOff,
  jit_above_cost: r(-1, INT_MAX),
  max_wal_size: r(2, INT_MAX),
  min_wal_size: r(32, INT_MAX),
  checkpoint_completion_target: r(0, 1),
  checkpoint_timeout: r(30, 86400),
  wal_writer_delay: r(1, 10000),
  commit_delay: r(0, 100000),
  commit_siblings: r(0, 1000),
  wal_compression: onOff,
  bgwriter_delay: r(10, 10000),
  bgwriter_lru_maxpages: r(0, 1073741823),
  bgwriter_lru_multiplier: r(0, 10),
  log_min_duration_statement: r(-1, INT_MAX),
  log_checkpoints: onOff,
  'cloudsql.iam_authentication': onOff,
};

/** Google's message for a refused flag, or null. */
export function flagRefusal(name: string, value: string | undefined, memoryBytes: number): string | null {
  const f = FAKE_FLAGS[name];
  if (!f) return `Invalid flag name: ${name}.`;
  const v = (value ?? '').trim();
  if (f.onOff) return ['on', 'off'].includes(v.toLowerCase()) ? null : `Invalid flag value: ${name}=${v}. Allowed values: on, off.`;
  const x = Number(v);
  let max = f.max!;
  if (f.memoryPagesFraction !== undefined) max = Math.min(max, Math.floor((memoryBytes * f.memoryPagesFraction) / 8192));
  if (v === '' || !Number.isFinite(x) || x < f.min! || x > max)
    return `Invalid flag value: ${name}=${v}. The value must be between ${f.min} and ${max}.`;
  return null;
}

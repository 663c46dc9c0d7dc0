// The spec's reload-only parameters for Cloud B, in its order: the knobs the definition's
// capabilities tune there (the catalog's `spec` knobs) are exactly these, and the writes refuse
// any other name.
export const MANAGED_B_FLEX_KNOBS: readonly string[] = [
  'work_mem',
  'random_page_cost',
  'seq_page_cost',
  'checkpoint_completion_target',
  'effective_io_concurrency',
  'max_parallel_workers_per_gather',
  'max_parallel_workers',
  'max_wal_size',
  'min_wal_size',
  'bgwriter_lru_maxpages',
  'bgwriter_delay',
  'default_statistics_target',
  'max_parallel_maintenance_workers',
];

// The catalog's parameters the planner alone reads: they change what a statement runs only by
// changing its plan, so a candidate that moves only these and changes no plan of the statements
// carrying the time cannot change their runtime (a plan-aware session skips it unmeasured).
// Not here, though the planner reads them too: work_mem and hash_mem_multiplier (the executor
// sizes its sorts and hashes by them), effective_io_concurrency (the executor's prefetching),
// default_statistics_target (it acts through ANALYZE, not on the plan the probe can ask for) and
// max_parallel_workers (workers launched, not planned).
export const PLANNER_ONLY_KNOBS: ReadonlySet<string> = new Set([
  'random_page_cost',
  'seq_page_cost',
  'effective_cache_size',
  // JIT is compiled only where the plan says so (the fingerprint's jit).
  'jit',
  'jit_above_cost',
  // Workers planned per Gather (the fingerprint's workersPlanned).
  'max_parallel_workers_per_gather',
]);

export const isPlannerOnly = (name: string): boolean => PLANNER_ONLY_KNOBS.has(name);

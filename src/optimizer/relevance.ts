// Which knobs can matter for this workload at all, from what its baseline showed: a step of the
// trust region spends one live window, and a model fitted on a handful of noisy windows cannot
// yet tell a knob that matters from one that does not (in bench/tuning, read-heavy's steps moved
// min_wal_size, on a workload that writes nothing). The signals can: knobs that only govern how
// WAL and dirty pages are written are left for later when the baseline hardly writes.
import type { WorkloadSignals } from './signals.ts';
import type { SearchSpace } from './types.ts';

/** Knobs that only change how WAL and dirty buffers are written and flushed. */
const WRITE_PATH_KNOBS = new Set([
  'max_wal_size',
  'min_wal_size',
  'checkpoint_timeout',
  'checkpoint_completion_target',
  'checkpoint_flush_after',
  'wal_buffers',
  'wal_compression',
  'wal_writer_delay',
  'wal_writer_flush_after',
  'backend_flush_after',
  'commit_delay',
  'commit_siblings',
  'bgwriter_delay',
  'bgwriter_lru_maxpages',
  'bgwriter_lru_multiplier',
  'bgwriter_flush_after',
]);

/** WAL per second under which the write path is not where a workload's time goes (1 MB/s: a
 * few hundred small transactions a second). */
const WRITING_BYTES_PER_SECOND = 1024 * 1024;

/** How much less often a step moves a knob the signals say cannot matter (never zero: the
 * signals cover one window, and a knob left out entirely could never be found to matter). */
export const IRRELEVANT_WEIGHT = 0.1;

/** Whether the baseline wrote enough WAL, or forced checkpoints, for the write path to matter;
 * true when the signals cannot say (no pg_stat_wal). */
export function writes(signals: WorkloadSignals): boolean {
  if (signals.checkpointsRequested > 0 || signals.walBytes === null) return true;
  return signals.walBytes / Math.max(1, signals.seconds) >= WRITING_BYTES_PER_SECOND;
}

/** A factor per dimension of the space: 1 where the knob may matter for this workload,
 * IRRELEVANT_WEIGHT where the signals say it cannot; all 1 without signals. */
export function relevance(space: SearchSpace, signals: WorkloadSignals | undefined): number[] {
  const quiet = signals !== undefined && !writes(signals);
  return space.dimensions.map((dim) => (quiet && WRITE_PATH_KNOBS.has(dim.name) ? IRRELEVANT_WEIGHT : 1));
}

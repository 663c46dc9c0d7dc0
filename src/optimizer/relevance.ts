// Which knobs can matter for this workload at all, from what its baseline showed: a step of the
// trust region spends one live window, and a model fitted on a handful of noisy windows cannot
// yet tell a knob that matters from one that does not (in bench/tuning, read-heavy's steps moved
// min_wal_size, on a workload that writes nothing). The signals can: knobs that only govern how
// WAL and dirty pages are written are left for later when the baseline hardly writes, and the
// JIT knobs when it compiled nothing, and the maintenance knobs always. The model's steps pay for
// such a knob too (bayes.ts).
import { MiB } from '../knobs/index.ts';
import type { WorkloadSignals } from './signals.ts';
import { currentValue } from './space.ts';
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
const WRITING_BYTES_PER_SECOND = MiB;

/** How much less often a step moves a knob the signals say cannot matter (never zero: the
 * signals cover one window, and a knob left out entirely could never be found to matter). */
export const IRRELEVANT_WEIGHT = 0.1;

/** Whether the baseline wrote enough WAL, or forced checkpoints, for the write path to matter;
 * true when the signals cannot say (no pg_stat_wal). */
export function writes(signals: WorkloadSignals): boolean {
  if (signals.checkpointsRequested > 0 || signals.walBytes === null) return true;
  return signals.walBytes / Math.max(1, signals.seconds) >= WRITING_BYTES_PER_SECOND;
}

/** Knobs that size VACUUM, CREATE INDEX and autovacuum: no statement of a workload's query mix
 * runs faster for them, so a live window cannot show what they do (in bench/tuning, read-heavy's
 * steps moved maintenance_work_mem on a workload of point reads). */
const MAINTENANCE_KNOBS = new Set(['maintenance_work_mem', 'max_parallel_maintenance_workers']);

/** Knobs that only decide whether and when statements are compiled with JIT. */
const JIT_KNOBS = new Set(['jit', 'jit_above_cost']);

/** Whether JIT is on and the baseline compiled nothing: then turning it off changes nothing, and
 * neither does a higher threshold (a lower one would only start compiling what runs well
 * without). False when the signals cannot say (pg_stat_statements before 1.10). */
export function compilesNothing(space: SearchSpace, signals: WorkloadSignals): boolean {
  const jit = space.dimensions.find((d) => d.name === 'jit');
  return jit !== undefined && currentValue(space, jit) === 'on' && signals.jitMs === 0;
}

/** A factor per dimension of the space: 1 where the knob may matter for this workload,
 * IRRELEVANT_WEIGHT where the signals say it cannot (and for the maintenance knobs, which no
 * window of statements shows); all 1 without signals. */
export function relevance(space: SearchSpace, signals: WorkloadSignals | undefined): number[] {
  if (signals === undefined) return space.dimensions.map(() => 1);
  const quiet = !writes(signals);
  const noJit = compilesNothing(space, signals);
  return space.dimensions.map((dim) =>
    (quiet && WRITE_PATH_KNOBS.has(dim.name)) || (noJit && JIT_KNOBS.has(dim.name)) || MAINTENANCE_KNOBS.has(dim.name)
      ? IRRELEVANT_WEIGHT
      : 1,
  );
}

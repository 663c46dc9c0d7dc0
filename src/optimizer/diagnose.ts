// The first steps on a live database are argued from its own statistics, as a DBA would argue
// them, not drawn at random: temporary files say work_mem is short, JIT compilation that eats
// the statements' time says jit does not pay, checkpoints forced by WAL volume say max_wal_size
// is short, reads that miss a small buffer cache say shared_buffers is. Each
// diagnosis moves one or two knobs, says why in words the dashboard shows, and sets a floor
// under what it raised: a value below the one that already spills is not worth a trial.
import { describeValue, getKnob, formatQuantity, KiB, MiB, PAGE_BYTES, type KnobValue } from '../knobs/index.ts';
import type { WorkloadSignals } from './signals.ts';
import { clipNumber, currentValue } from './space.ts';
import type { Config, NumericDimension, SearchSpace } from './types.ts';

export interface Diagnosis {
  /** What was found, for tests and logs. */
  readonly finding: 'temp-files' | 'jit-compilation' | 'wal-checkpoints' | 'buffer-misses';
  /** The knobs it changes, and to what (pg_settings units). */
  readonly changes: Readonly<Config>;
  /** One sentence for the dashboard: the evidence, then the change. */
  readonly reason: string;
  /** Lower bounds the search keeps from now on (pg_settings units). */
  readonly floors: Readonly<Record<string, number>>;
}

// Thresholds below which a finding is noise rather than a cause worth a trial.
/** Temporary files: at least this much per minute, and a statement spilling this much per call. */
const TEMP_BYTES_PER_MINUTE = 8 * MiB;
const SPILL_BYTES_PER_CALL = 256 * KiB;
/** A sort or hash held in memory takes more room than its temporary file: about twice. */
const IN_MEMORY_FACTOR = 2;
/** WAL written per checkpoint_timeout above this share of max_wal_size forces checkpoints early
 * (PostgreSQL starts one when max_wal_size / (1 + checkpoint_completion_target) is written). */
const WAL_SHARE_FORCING_CHECKPOINTS = 0.5;
/** Buffer cache: a hit ratio below this, with at least this many reads per second. */
const HIT_RATIO = 0.98;
const READS_PER_SECOND = 200;
/** JIT compilation above this share of the statements' execution time costs more than it can
 * save: the queries it compiles are too short to win it back. */
const JIT_SHARE = 0.1;
/** pgtune's share of RAM for shared_buffers. */
const SHARED_BUFFERS_SHARE = 0.25;

const nextPowerOfTwo = (x: number) => 2 ** Math.ceil(Math.log2(Math.max(1, x)));

function numericDim(space: SearchSpace, name: string): NumericDimension | undefined {
  const dim = space.dimensions.find((d) => d.name === name);
  return dim?.kind === 'numeric' ? dim : undefined;
}

function describe(name: string, value: KnobValue): string {
  const knob = getKnob(name);
  return knob ? describeValue(knob, value) : String(value);
}

const megabytes = (bytes: number) => formatQuantity(Math.max(1, Math.round(bytes / MiB)), 'MB');

/** The value the server runs with now, for a numeric knob of the space. */
function now(space: SearchSpace, name: string): number | undefined {
  const dim = numericDim(space, name);
  return dim ? Number(currentValue(space, dim)) : undefined;
}

/** A raise of `name` from its current value to `wanted` (clipped to the space), or undefined
 * when that is no raise. */
function raise(space: SearchSpace, name: string, wanted: number): { from: number; to: number } | undefined {
  const dim = numericDim(space, name);
  if (!dim) return undefined;
  const from = Number(currentValue(space, dim));
  const to = clipNumber(dim, wanted);
  return to > from ? { from, to } : undefined;
}

function tempFiles(space: SearchSpace, s: WorkloadSignals): Diagnosis | undefined {
  const perMinute = s.seconds > 0 ? (s.tempBytes * 60) / s.seconds : 0;
  const spilling = s.spillers.filter((x) => x.tempBytesPerCall >= SPILL_BYTES_PER_CALL);
  if (perMinute < TEMP_BYTES_PER_MINUTE || spilling.length === 0) return undefined;
  // work_mem in kB: room for the largest per-call spill in memory, at least twice the current.
  const largest = Math.max(...spilling.map((x) => x.tempBytesPerCall));
  const current = now(space, 'work_mem');
  if (current === undefined) return undefined;
  const step = raise(space, 'work_mem', Math.max(2 * current, nextPowerOfTwo((IN_MEMORY_FACTOR * largest) / KiB)));
  if (!step) return undefined;
  const statements = `${spilling.length} statement${spilling.length === 1 ? '' : 's'}`;
  return {
    finding: 'temp-files',
    changes: { work_mem: step.to },
    reason:
      `${megabytes(perMinute)} of temporary files per minute from ${statements} (the largest spills ${megabytes(largest)} per call): ` +
      `work_mem ${describe('work_mem', step.from)}→${describe('work_mem', step.to)}`,
    floors: { work_mem: step.from },
  };
}

function jitCompilation(space: SearchSpace, s: WorkloadSignals): Diagnosis | undefined {
  const dim = space.dimensions.find((d) => d.name === 'jit');
  if (dim?.kind !== 'categorical' || currentValue(space, dim) !== 'on' || !s.jitMs || !s.execMs) return undefined;
  const share = s.jitMs / s.execMs;
  if (share < JIT_SHARE) return undefined;
  const statements = `${s.jitStatements ?? 0} statement${s.jitStatements === 1 ? '' : 's'}`;
  return {
    finding: 'jit-compilation',
    changes: { jit: 'off' },
    reason:
      `JIT compilation took ${Math.round(100 * share)} % of the statements' execution time (${(s.jitMs / 1000).toFixed(1)} s of ${(s.execMs / 1000).toFixed(1)} s, ${statements}): ` +
      `jit on→off`,
    floors: {},
  };
}

function walCheckpoints(space: SearchSpace, s: WorkloadSignals): Diagnosis | undefined {
  const current = now(space, 'max_wal_size');
  if (current === undefined || s.walBytes === null || s.seconds <= 0) return undefined;
  // checkpoint_timeout is no dimension on Cloud B: then PostgreSQL's default, 5 minutes.
  const timeoutSeconds = now(space, 'checkpoint_timeout') ?? 300;
  const walPerTimeout = (s.walBytes / s.seconds) * timeoutSeconds;
  const share = walPerTimeout / (current * MiB);
  if (s.checkpointsRequested === 0 && share < WAL_SHARE_FORCING_CHECKPOINTS) return undefined;
  // Room for two checkpoint intervals of WAL at this rate: checkpoints come by time again.
  const step = raise(space, 'max_wal_size', Math.max(2 * current, nextPowerOfTwo((2 * walPerTimeout) / MiB)));
  if (!step) return undefined;
  const fpi = s.walFpi !== null && s.walRecords ? ` (${Math.round((100 * s.walFpi) / s.walRecords)} % of records full-page images)` : '';
  const requested =
    s.checkpointsRequested > 0
      ? `${s.checkpointsRequested} checkpoint${s.checkpointsRequested === 1 ? '' : 's'} forced by WAL volume in the baseline, `
      : '';
  return {
    finding: 'wal-checkpoints',
    changes: { max_wal_size: step.to },
    reason:
      `${requested}${megabytes(walPerTimeout)} of WAL per ${describe('checkpoint_timeout', timeoutSeconds)} checkpoint interval${fpi} against max_wal_size ${describe('max_wal_size', step.from)}: ` +
      `max_wal_size ${describe('max_wal_size', step.from)}→${describe('max_wal_size', step.to)}`,
    floors: { max_wal_size: step.from },
  };
}

function bufferMisses(space: SearchSpace, s: WorkloadSignals): Diagnosis | undefined {
  const blocks = s.blksHit + s.blksRead;
  if (!numericDim(space, 'shared_buffers') || blocks === 0 || s.seconds <= 0) return undefined;
  const hitRatio = s.blksHit / blocks;
  if (hitRatio >= HIT_RATIO || s.blksRead / s.seconds < READS_PER_SECOND) return undefined;
  const pages = (SHARED_BUFFERS_SHARE * space.machine.memoryBytes) / PAGE_BYTES;
  const step = raise(space, 'shared_buffers', pages);
  if (!step || step.to < 1.5 * step.from) return undefined;
  return {
    finding: 'buffer-misses',
    changes: { shared_buffers: step.to },
    reason:
      `buffer cache hit ratio ${(100 * hitRatio).toFixed(1)} % with ${Math.round(s.blksRead / s.seconds)} reads per second and shared_buffers ${describe('shared_buffers', step.from)}: ` +
      `shared_buffers ${describe('shared_buffers', step.from)}→${describe('shared_buffers', step.to)} (a restart)`,
    floors: { shared_buffers: step.from },
  };
}

/** What the baseline's signals argue for, strongest first, each from the server's current
 * settings. The session tries each once, on top of its best configuration so far. */
export function diagnose(space: SearchSpace, signals: WorkloadSignals): Diagnosis[] {
  return [tempFiles, jitCompilation, walCheckpoints, bufferMisses].flatMap((rule) => rule(space, signals) ?? []);
}

/** The space with the diagnoses' floors: values under them are no longer points of it. */
export function withFloors(space: SearchSpace, diagnoses: readonly Diagnosis[]): SearchSpace {
  const floors = new Map<string, number>();
  for (const d of diagnoses) for (const [name, min] of Object.entries(d.floors)) floors.set(name, Math.max(min, floors.get(name) ?? min));
  if (floors.size === 0) return space;
  return {
    ...space,
    dimensions: space.dimensions.map((dim) => {
      const floor = floors.get(dim.name);
      return dim.kind === 'numeric' && floor !== undefined && floor > dim.min ? { ...dim, min: Math.min(floor, dim.max) } : dim;
    }),
  };
}

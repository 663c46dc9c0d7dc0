// The knob catalog: the agent's allow-list. The agent only ever sets a parameter listed here,
// on a target listed for it, within the bounds computed here for the machine, whatever the
// tuning service asks for. The optimizer builds its search space from the same entries.
//
// Values are numbers in the pg_settings unit (shared_buffers in 8 kB pages, work_mem in kB,
// max_wal_size in MB, bgwriter_delay in ms), exactly as pg_settings.setting shows them.
// Contexts and units are PostgreSQL 15's; a test checks them against a real server.
import type { ApplyContext, Bounds, Knob, KnobContext, KnobUnit, Machine, NumericKnob, TuningMode } from './types.ts';
import type { KnobReach, TargetCapabilities } from '../target/capabilities.ts';
import { bytesPerUnit, formatBytes, GiB, INT_MAX, KiB, MiB } from './units.ts';

/** `postmaster` settings are read at server start only; every other context takes a reload. */
export function applyContextOf(context: string): ApplyContext {
  return context === 'postmaster' ? 'restart' : 'reload';
}

// What a knob acts on; each target's capabilities (src/agent/targets/*/index.ts) choose by it
// which knobs it tunes: Cloud B the spec's parameters only, Aurora none of the storage ones. The
// catalog is given a target's capabilities as data; it never looks a target up.
// `spec`: one of the spec's parameters every managed service lets a user set.
// `storage`: acts on PostgreSQL's own writing of pages and WAL (checkpoints, background writer,
// WAL), which Aurora does through its own storage layer. The cloud targets also check the
// parameter's own modifiability (a parameter group's IsModifiable) at run time.
interface Reach {
  readonly spec: boolean;
  readonly storage: boolean;
}
const SPEC: Reach = { spec: true, storage: false };
const SPEC_STORAGE: Reach = { spec: true, storage: true };
const BEYOND_SPEC: Reach = { spec: false, storage: false };
const BEYOND_SPEC_STORAGE: Reach = { spec: false, storage: true };

const REACH = new Map<string, KnobReach>();

/** What the knob acts on, as the targets' capabilities choose by it. */
export function reachOf(knob: Knob): KnobReach {
  return REACH.get(knob.name) ?? { name: knob.name, spec: false, storage: false };
}

/** Throws unless the machine description can bound anything. */
export function assertMachine(machine: Machine): void {
  const { memoryBytes, vcpus, storageBytes, storage } = machine;
  if (typeof memoryBytes !== 'number' || !Number.isFinite(memoryBytes) || memoryBytes < 256 * MiB) {
    throw new RangeError(`machine memoryBytes must be a number of bytes, at least 256 MiB (got ${String(memoryBytes)})`);
  }
  if (typeof vcpus !== 'number' || !Number.isInteger(vcpus) || vcpus < 1 || vcpus > 4096) {
    throw new RangeError(`machine vcpus must be a whole number from 1 to 4096 (got ${String(vcpus)})`);
  }
  if (storageBytes !== undefined && (typeof storageBytes !== 'number' || !Number.isFinite(storageBytes) || storageBytes <= 0)) {
    throw new RangeError(`machine storageBytes must be a positive number of bytes when given (got ${String(storageBytes)})`);
  }
  if (storage !== undefined && storage !== 'ssd' && storage !== 'hdd') {
    throw new RangeError(`machine storage must be 'ssd' or 'hdd' when given (got ${String(storage)})`);
  }
}

/** "16 GiB RAM and 4 vCPUs" for messages. */
export function describeMachine(machine: Machine): string {
  return `${formatBytes(machine.memoryBytes)} RAM and ${machine.vcpus} vCPU${machine.vcpus === 1 ? '' : 's'}`;
}

/**
 * Memory bounds in bytes → integer bounds in `unit`: the minimum rounds up and the maximum
 * down, so both stay inside what was asked; capped at PostgreSQL's integer range.
 */
function memoryBounds(unit: '8kB' | 'kB' | 'MB', minBytes: number, maxBytes: number, pgMax = INT_MAX): Bounds {
  const per = bytesPerUnit(unit);
  const max = Math.min(Math.floor(maxBytes / per), pgMax);
  const min = Math.min(Math.ceil(minBytes / per), max);
  return { min, max };
}

const clamp = (x: number, lo: number, hi: number) => Math.min(Math.max(x, lo), hi);

/**
 * Largest max_wal_size the agent allows. WAL can grow to max_wal_size between checkpoints, so
 * it must stay far from filling the disk: a tenth of the volume when its size is known, and
 * otherwise 4 × RAM (at least 2 GB, at most 64 GB) as a stand-in for a disk that fits the machine.
 */
function maxWalCapBytes(machine: Machine): number {
  const byRam = clamp(4 * machine.memoryBytes, 2 * GiB, 64 * GiB);
  return machine.storageBytes === undefined ? byRam : Math.min(byRam, machine.storageBytes / 10);
}

/** A knob as written below: everything but `apply`, which derives from `context`. */
type KnobDefinition = Knob extends infer K ? (K extends Knob ? Omit<K, 'apply'> & Reach : never) : never;

function define({ spec, storage, ...def }: KnobDefinition): Knob {
  const reach: KnobReach = Object.freeze({ name: def.name, spec, storage });
  REACH.set(def.name, reach);
  return Object.freeze({ ...def, apply: applyContextOf(def.context) });
}

const integer = (
  name: string,
  context: KnobContext,
  unit: KnobUnit | null,
  scale: 'log' | 'linear',
  reach: Reach,
  bounds: (m: Machine, t: TargetCapabilities) => Bounds,
  summary: string,
): Knob => define({ name, type: 'integer', context, unit, scale, ...reach, bounds, summary });

const real = (name: string, context: KnobContext, reach: Reach, bounds: Bounds, summary: string): Knob =>
  define({ name, type: 'real', context, unit: null, scale: 'linear', ...reach, bounds: () => bounds, summary });

export const KNOBS: readonly Knob[] = Object.freeze([
  // ---- Memory ----
  integer(
    'shared_buffers',
    'postmaster',
    '8kB',
    'log',
    BEYOND_SPEC,
    (m, t) =>
      // Below 128 MB only on small machines (then 5 % of RAM). Up to 40 % of RAM: beyond that
      // PostgreSQL double-buffers against the OS page cache. Aurora has no OS page cache in the
      // data path and defaults to about 75 % of RAM, so there the range reaches 80 %.
      memoryBounds('8kB', Math.min(128 * MiB, 0.05 * m.memoryBytes), t.sharedBuffersMaxFraction * m.memoryBytes, 1073741823),
    'shared buffer cache; the largest single memory setting',
  ),
  integer(
    'work_mem',
    'user',
    'kB',
    'log',
    SPEC,
    (m) =>
      // Per sort or hash node, per backend: the memory budget (constraints.ts) bounds the total.
      // Below 1 MB only on small machines (RAM / 4096, down to PostgreSQL's 64 kB): on 24 GB a
      // search chasing noise proposed 150 kB for a workload of point reads, which no DBA would
      // run (docs/benchmarks.md, read-heavy's seventh run).
      memoryBounds('kB', Math.max(64 * KiB, Math.min(MiB, m.memoryBytes / 4096)), m.memoryBytes / 4),
    'memory per sort/hash operation before spilling to disk',
  ),
  define({
    name: 'hash_mem_multiplier',
    type: 'real',
    context: 'user',
    unit: null,
    scale: 'log',
    ...BEYOND_SPEC,
    // Hash tables may take work_mem times this (PostgreSQL 15's default 2): a hash that spills
    // costs more than a sort that does. The memory budget (constraints.ts) counts one work_mem
    // per backend, not this multiple, so the range stops at 8.
    bounds: () => ({ min: 1, max: 8 }),
    summary: 'multiple of work_mem a hash table may use before spilling',
  }),
  integer(
    'maintenance_work_mem',
    'user',
    'kB',
    'log',
    BEYOND_SPEC,
    (m) => memoryBounds('kB', 16 * MiB, m.memoryBytes / 4),
    'memory for VACUUM, CREATE INDEX and autovacuum (when autovacuum_work_mem is -1)',
  ),
  integer(
    'effective_cache_size',
    'user',
    '8kB',
    'log',
    BEYOND_SPEC,
    (m) =>
      // A planner estimate, allocates nothing: between a quarter and nine tenths of RAM.
      memoryBounds('8kB', 0.25 * m.memoryBytes, 0.9 * m.memoryBytes),
    'planner estimate of the cache available to one query',
  ),
  integer(
    'wal_buffers',
    'postmaster',
    '8kB',
    'log',
    BEYOND_SPEC_STORAGE,
    (m) =>
      // From 1 MB to 256 MB (at most 1/32 of RAM): the automatic value (-1) caps at one 16 MB
      // segment, and more only helps heavy concurrent writers. -1 itself is not offered: it
      // reads back as the computed size, never as -1.
      memoryBounds('8kB', 1 * MiB, Math.min(256 * MiB, m.memoryBytes / 32)),
    'shared memory for WAL not yet written to disk',
  ),

  // ---- Parallelism and workers ----
  integer(
    'max_worker_processes',
    'postmaster',
    null,
    'linear',
    BEYOND_SPEC,
    (m) =>
      // Never below the default 8: logical replication and extensions take worker slots too.
      // Above: room for max_parallel_workers (≤ vCPUs) plus those.
      ({ min: 8, max: 8 + 2 * m.vcpus }),
    'background worker slots, parallel workers included',
  ),
  integer(
    'max_parallel_workers',
    'user',
    null,
    'linear',
    SPEC,
    (m) =>
      // More parallel workers than vCPUs only contend for them.
      ({ min: 0, max: Math.max(2, m.vcpus) }),
    'parallel workers the whole server may run at once',
  ),
  integer(
    'max_parallel_workers_per_gather',
    'user',
    null,
    'linear',
    SPEC,
    (m) => ({ min: 0, max: Math.max(1, Math.ceil(m.vcpus / 2)) }),
    'parallel workers one query node may use',
  ),
  integer(
    'max_parallel_maintenance_workers',
    'user',
    null,
    'linear',
    SPEC,
    (m) => ({ min: 0, max: Math.max(1, Math.ceil(m.vcpus / 2)) }),
    'parallel workers one CREATE INDEX or VACUUM may use',
  ),

  // ---- Planner ----
  real(
    'random_page_cost',
    'user',
    SPEC,
    { min: 1, max: 10 },
    'planner cost of a non-sequential page read (1.1 suits SSDs, 4 spinning disks)',
  ),
  real('seq_page_cost', 'user', SPEC, { min: 0.1, max: 2 }, 'planner cost of a sequential page read; the base of the cost scale'),
  integer(
    'effective_io_concurrency',
    'user',
    null,
    'log',
    SPEC,
    (m) =>
      // Prefetch depth for bitmap heap scans. Its useful range depends on storage: SSD and cloud
      // block storage serve hundreds of requests in parallel, a spinning disk a handful. Sampled
      // on a log scale although it is a count: its useful values span orders of magnitude.
      // (On platforms without posix_fadvise PostgreSQL allows only 0; its max_val then refuses.)
      ({ min: 1, max: m.storage === 'hdd' ? 16 : 512 }),
    'concurrent I/O requests the executor may issue for prefetching',
  ),
  integer(
    'default_statistics_target',
    'user',
    null,
    'log',
    SPEC,
    () =>
      // A sample size (300 × target rows per column): log scale, like the other sizes. Beyond
      // 1000 ANALYZE and planning get slow for little gain.
      ({ min: 10, max: 1000 }),
    'statistics detail ANALYZE collects per column',
  ),
  define({
    name: 'jit',
    type: 'bool',
    context: 'user',
    unit: null,
    ...BEYOND_SPEC,
    summary: 'JIT compilation of expressions; often a loss for short OLTP queries',
  }),
  define({
    name: 'jit_above_cost',
    type: 'real',
    context: 'user',
    unit: null,
    scale: 'log',
    ...BEYOND_SPEC,
    // The plan cost from which a query is JIT-compiled (default 100,000): mid-size analytic
    // queries often pay more to compile than they save. From 10,000 to 10,000,000; -1 (never)
    // is what jit = off says, so it is not a point of this range.
    bounds: () => ({ min: 1e4, max: 1e7 }),
    summary: 'plan cost from which a query is JIT-compiled',
  }),

  // ---- Checkpoints and WAL ----
  integer(
    'max_wal_size',
    'sighup',
    'MB',
    'log',
    SPEC_STORAGE,
    (m) => memoryBounds('MB', 256 * MiB, Math.max(256 * MiB, maxWalCapBytes(m))),
    'WAL volume that triggers a checkpoint',
  ),
  integer(
    'min_wal_size',
    'sighup',
    'MB',
    'log',
    SPEC_STORAGE,
    (m) =>
      // From two 16 MB segments (constraints.ts checks the server's real segment size).
      memoryBounds('MB', 32 * MiB, Math.max(32 * MiB, maxWalCapBytes(m) / 4)),
    'WAL kept for recycling instead of removed',
  ),
  real(
    'checkpoint_completion_target',
    'sighup',
    SPEC_STORAGE,
    { min: 0.5, max: 0.95 },
    'share of the checkpoint interval over which checkpoint writes are spread',
  ),
  integer(
    'checkpoint_timeout',
    'sighup',
    's',
    'log',
    BEYOND_SPEC_STORAGE,
    () =>
      // Up to an hour: a longer interval means a longer crash recovery.
      ({ min: 60, max: 3600 }),
    'time between automatic checkpoints',
  ),
  integer(
    'wal_writer_delay',
    'sighup',
    'ms',
    'log',
    BEYOND_SPEC_STORAGE,
    () => ({ min: 10, max: 1000 }),
    'how often the WAL writer flushes asynchronous commits',
  ),
  integer(
    'commit_delay',
    'superuser',
    null,
    'linear',
    BEYOND_SPEC_STORAGE,
    () =>
      // Microseconds a committing backend waits for others to join its WAL flush (group
      // commit), when at least commit_siblings transactions are open. Durability is unchanged:
      // every commit is still flushed before it returns. PostgreSQL's docs put the best value
      // near half the time of one 8 kB flush (pg_test_fsync); on the SSD-backed storage of
      // managed databases a flush takes well under 2 ms, so 0 (off, the default) to 1 ms. A
      // longer wait makes every commit slower than the flush it is meant to share: at up to 10
      // ms, random search's trials ran write-heavy up to 11× slower (docs/benchmarks.md).
      ({ min: 0, max: 1_000 }),
    'wait before a commit flush, so that concurrent commits share it',
  ),
  integer(
    'commit_siblings',
    'user',
    null,
    'linear',
    BEYOND_SPEC_STORAGE,
    () => ({ min: 1, max: 50 }),
    'open transactions needed before commit_delay waits',
  ),
  integer(
    'wal_writer_flush_after',
    'sighup',
    '8kB',
    'linear',
    BEYOND_SPEC_STORAGE,
    () =>
      // WAL the WAL writer lets pile up before it flushes (default 1 MB); 0 flushes at once.
      // Up to 16 MB. Only asynchronous commits wait on it, and those the agent never turns on.
      ({ min: 0, max: 2048 }),
    'WAL written by the WAL writer before it flushes',
  ),
  integer(
    'checkpoint_flush_after',
    'sighup',
    '8kB',
    'linear',
    BEYOND_SPEC_STORAGE,
    () =>
      // Asks the kernel to write back checkpoint writes after this much (default 256 kB);
      // 0 leaves it to the kernel. PostgreSQL's own range, 0 to 2 MB.
      ({ min: 0, max: 256 }),
    'checkpoint writes after which the kernel is asked to write back',
  ),
  integer(
    'backend_flush_after',
    'user',
    '8kB',
    'linear',
    BEYOND_SPEC_STORAGE,
    () =>
      // The same for writes by backends (default 0: off), 0 to 2 MB.
      ({ min: 0, max: 256 }),
    'backend writes after which the kernel is asked to write back',
  ),
  define({
    name: 'wal_compression',
    type: 'enum',
    context: 'superuser',
    unit: null,
    ...BEYOND_SPEC_STORAGE,
    // Compresses full-page images in WAL: less WAL and I/O for more CPU. Durability is unchanged.
    values: ['off', 'pglz', 'lz4', 'zstd'],
    // PostgreSQL accepts these spellings and then shows the value on the right.
    aliases: { on: 'pglz', true: 'pglz', yes: 'pglz', '1': 'pglz', false: 'off', no: 'off', '0': 'off' },
    summary: 'compression of full-page images written to WAL',
  }),

  // ---- Background writer ----
  integer('bgwriter_delay', 'sighup', 'ms', 'log', SPEC_STORAGE, () => ({ min: 10, max: 2000 }), 'sleep between background writer rounds'),
  integer(
    'bgwriter_lru_maxpages',
    'sighup',
    null,
    'linear',
    SPEC_STORAGE,
    () =>
      // 0 turns background writing off, a legitimate point of the space; hence linear.
      ({ min: 0, max: 1000 }),
    'most buffers the background writer writes per round',
  ),
  real(
    'bgwriter_lru_multiplier',
    'sighup',
    BEYOND_SPEC_STORAGE,
    { min: 1, max: 10 },
    'how far ahead of recent demand the background writer cleans buffers',
  ),
]);

const BY_NAME: ReadonlyMap<string, Knob> = new Map(KNOBS.map((k) => [k.name, k]));

/** The catalog entry for `name` (case-insensitive, as PostgreSQL treats setting names). */
export function getKnob(name: string): Knob | undefined {
  return BY_NAME.get(name.toLowerCase());
}

/** On a target the agent never restarts (its capabilities say why), restart mode is reload-only. */
export function effectiveMode(target: TargetCapabilities, mode: TuningMode): TuningMode {
  return target.restart.mode === 'never' ? 'reload-only' : mode;
}

/** The knobs the agent may change on a target with these capabilities in `mode`, in catalog order. */
export function catalogFor(target: TargetCapabilities, mode: TuningMode): Knob[] {
  const m = effectiveMode(target, mode);
  return KNOBS.filter((k) => target.tunes(reachOf(k)) && (m === 'restart' || k.apply === 'reload'));
}

/** Bounds of a numeric knob on this machine and target, after checking the machine. */
export function boundsFor(knob: NumericKnob, machine: Machine, target: TargetCapabilities): Bounds {
  assertMachine(machine);
  return knob.bounds(machine, target);
}

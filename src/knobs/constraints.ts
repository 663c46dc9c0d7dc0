// Cross-knob constraints, evaluated on the full effective configuration: the current
// pg_settings values overlaid with the change. Each knob can be within its own bounds while the
// combination is unsafe (too much memory) or incoherent (min_wal_size above max_wal_size).
//
// A constraint is only held against a change that touches one of its knobs. A configuration
// the server already runs with is the operator's; refusing every unrelated change because of it
// would stop tuning without making anything safer.
import type { Machine } from './types.ts';
import { formatBytes, formatQuantity, GiB, KiB, MiB, toBaseQuantity } from './units.ts';

/** A setting's value in its pg_settings unit. */
export interface Quantity {
  readonly value: number;
  readonly unit: string | null;
}

export interface ConstraintInput {
  readonly machine: Machine;
  /** Values from pg_settings. */
  readonly current: ReadonlyMap<string, Quantity>;
  /** `current` overlaid with the change. */
  readonly proposed: ReadonlyMap<string, Quantity>;
  /** Names the change sets. */
  readonly changed: ReadonlySet<string>;
  /** `server_version_num`, when known (the autovacuum memory cap depends on it). */
  readonly serverVersionNum?: number;
}

export interface ConstraintViolation {
  /** The knobs of the change the violation is about (the first is the one to blame). */
  readonly knobs: readonly string[];
  readonly message: string;
}

// ---------------------------------------------------------------------------------------------
// Memory budget
//
// Worst-case memory PostgreSQL may claim, in bytes:
//
//     shared_buffers + wal_buffers
//   + (max_connections + max_parallel_workers) × work_mem
//   + autovacuum_max_workers × min(autovacuum_work_mem, or maintenance_work_mem when it is -1;
//                                  1 GB before PostgreSQL 17)
//   + maintenance_work_mem
//
// must stay within MEMORY_BUDGET_SHARE of RAM.
//
// - Every connection and every parallel worker may hold one work_mem-sized sort or hash at the
//   same time. A query can hold several, and hash nodes hash_mem_multiplier times more, while
//   most connections hold none: this is a budget that keeps tuning away from the cliff, not an
//   exact bound.
// - Each autovacuum worker uses its work memory for dead tuples only, and before PostgreSQL 17
//   never more than 1 GB of it.
// - One manual maintenance command (CREATE INDEX, VACUUM) at a time; its parallel workers share
//   its maintenance_work_mem, as the PostgreSQL documentation of max_parallel_maintenance_workers
//   says.
// - The remaining tenth is for the operating system, the per-backend overhead (catalog caches,
//   plans), and page cache.
// ---------------------------------------------------------------------------------------------

export const MEMORY_BUDGET_SHARE = 0.9;

const AUTOVACUUM_MEMORY_CAP_BEFORE_17 = 1 * GiB;

/** Settings the budget reads; changing one of the first five re-evaluates it. */
export const MEMORY_KNOBS: readonly string[] = [
  'shared_buffers',
  'wal_buffers',
  'work_mem',
  'maintenance_work_mem',
  'max_parallel_workers',
];
const MEMORY_INPUTS: readonly string[] = [...MEMORY_KNOBS, 'max_connections', 'autovacuum_max_workers', 'autovacuum_work_mem'];

export interface MemoryBudget {
  readonly totalBytes: number;
  readonly limitBytes: number;
  /** The formula with the numbers filled in, for messages. */
  readonly breakdown: string;
}

const bytes = (q: Quantity) => toBaseQuantity(q.value, q.unit);
const human = (b: number) => formatQuantity(b, 'B');

/** The worst-case memory of `config`, or the settings it lacks to compute it. */
export function memoryBudget(
  config: ReadonlyMap<string, Quantity>,
  machine: Machine,
  serverVersionNum?: number,
): MemoryBudget | { readonly missing: string[] } {
  const missing = MEMORY_INPUTS.filter((n) => !config.has(n));
  if (missing.length > 0) return { missing };
  const get = (n: string) => config.get(n) as Quantity;

  const sharedBuffers = bytes(get('shared_buffers'));
  let walBuffers = bytes(get('wal_buffers'));
  // -1 is "automatic": 1/32 of shared_buffers, between 64 kB and one 16 MB WAL segment
  // (pg_settings shows the computed size, so this only matters for hand-made inputs).
  if (get('wal_buffers').value === -1) walBuffers = Math.min(Math.max(sharedBuffers / 32, 64 * KiB), 16 * MiB);
  const workMem = bytes(get('work_mem'));
  const maintenanceWorkMem = bytes(get('maintenance_work_mem'));
  const connections = get('max_connections').value;
  const parallelWorkers = get('max_parallel_workers').value;
  const autovacuumWorkers = get('autovacuum_max_workers').value;
  const avSetting = get('autovacuum_work_mem');
  let autovacuumMem = avSetting.value === -1 ? maintenanceWorkMem : bytes(avSetting);
  // Unknown version: no cap, the larger estimate.
  if (serverVersionNum !== undefined && serverVersionNum < 170000) autovacuumMem = Math.min(autovacuumMem, AUTOVACUUM_MEMORY_CAP_BEFORE_17);

  const totalBytes =
    sharedBuffers + walBuffers + (connections + parallelWorkers) * workMem + autovacuumWorkers * autovacuumMem + maintenanceWorkMem;
  const limitBytes = MEMORY_BUDGET_SHARE * machine.memoryBytes;
  const breakdown =
    `shared_buffers ${human(sharedBuffers)} + wal_buffers ${human(walBuffers)}` +
    ` + (${connections} max_connections + ${parallelWorkers} max_parallel_workers) × work_mem ${human(workMem)}` +
    ` + ${autovacuumWorkers} autovacuum workers × ${human(autovacuumMem)}` +
    ` + maintenance_work_mem ${human(maintenanceWorkMem)}`;
  return { totalBytes, limitBytes, breakdown };
}

function checkMemoryBudget(input: ConstraintInput): ConstraintViolation[] {
  const touched = MEMORY_KNOBS.filter((n) => input.changed.has(n));
  if (touched.length === 0) return [];
  const proposed = memoryBudget(input.proposed, input.machine, input.serverVersionNum);
  if ('missing' in proposed) {
    return [
      {
        knobs: touched,
        message: `${touched.join(', ')}: cannot check the memory budget, pg_settings has no ${proposed.missing.join(', ')}`,
      },
    ];
  }
  if (proposed.totalBytes <= proposed.limitBytes) return [];
  const current = memoryBudget(input.current, input.machine, input.serverVersionNum);
  // Over budget already: a change that lowers (or keeps) the worst case is still a step toward
  // safety, and refusing it would pin the server where it is.
  if (!('missing' in current) && proposed.totalBytes <= current.totalBytes) return [];
  const share = `${Math.round(MEMORY_BUDGET_SHARE * 100)} % of ${formatBytes(input.machine.memoryBytes)} RAM`;
  const now = 'missing' in current ? '' : ` (now ${human(current.totalBytes)})`;
  const given = touched.map((n) => {
    const q = input.proposed.get(n) as Quantity;
    return `${n} = ${formatQuantity(q.value, q.unit)}`;
  });
  return [
    {
      knobs: touched,
      message:
        `${given.join(', ')} would raise worst-case memory to ${human(proposed.totalBytes)}${now}, ` +
        `above the budget of ${human(proposed.limitBytes)} (${share}): ${proposed.breakdown}`,
    },
  ];
}

// ---------------------------------------------------------------------------------------------
// Orderings
// ---------------------------------------------------------------------------------------------

interface Ordering {
  readonly lower: string;
  readonly upper: string;
  readonly why: string;
}

export const ORDERINGS: readonly Ordering[] = [
  { lower: 'min_wal_size', upper: 'max_wal_size', why: 'WAL kept for recycling cannot exceed the size that triggers a checkpoint' },
  {
    lower: 'max_parallel_workers_per_gather',
    upper: 'max_parallel_workers',
    why: 'one query node cannot use more workers than the server allows',
  },
  { lower: 'max_parallel_maintenance_workers', upper: 'max_parallel_workers', why: 'maintenance workers come out of max_parallel_workers' },
  { lower: 'max_parallel_workers', upper: 'max_worker_processes', why: 'parallel workers take worker process slots' },
  { lower: 'seq_page_cost', upper: 'random_page_cost', why: 'a random page read is never cheaper than a sequential one' },
  { lower: 'shared_buffers', upper: 'effective_cache_size', why: 'the cache the planner assumes includes shared_buffers' },
];

/** Every setting the constraints read: the agent reports them beside its knobs, so that a space
 * can be checked on a target that tunes only some of them (Cloud B tunes work_mem, but the memory
 * budget reads shared_buffers too). */
export const CONSTRAINT_INPUTS: readonly string[] = [
  ...new Set([...MEMORY_INPUTS, ...ORDERINGS.flatMap((o) => [o.lower, o.upper]), 'wal_segment_size']),
];

function describe(input: ConstraintInput, name: string): string {
  const q = input.proposed.get(name) as Quantity;
  const v = formatQuantity(q.value, q.unit);
  return input.changed.has(name) ? `${name} = ${v}` : `${name} = ${v} (current setting)`;
}

function checkOrderings(input: ConstraintInput): ConstraintViolation[] {
  const out: ConstraintViolation[] = [];
  for (const o of ORDERINGS) {
    const knobs = [o.lower, o.upper].filter((n) => input.changed.has(n));
    if (knobs.length === 0) continue;
    const lower = input.proposed.get(o.lower);
    const upper = input.proposed.get(o.upper);
    if (!lower || !upper) {
      const absent = [o.lower, o.upper].filter((n) => !input.proposed.has(n));
      out.push({ knobs, message: `${knobs.join(', ')}: cannot check ${o.lower} ≤ ${o.upper}, pg_settings has no ${absent.join(', ')}` });
      continue;
    }
    if (toBaseQuantity(lower.value, lower.unit) > toBaseQuantity(upper.value, upper.unit)) {
      out.push({ knobs, message: `${describe(input, o.lower)} must not be above ${describe(input, o.upper)}: ${o.why}` });
    }
  }
  return out;
}

/**
 * PostgreSQL refuses to start when min_wal_size or max_wal_size is below two WAL segments
 * (checked at startup only, so a reload would accept it and the next restart fail). Managed
 * services may use larger segments than 16 MB, so the real wal_segment_size decides.
 */
function checkWalSegments(input: ConstraintInput): ConstraintViolation[] {
  const out: ConstraintViolation[] = [];
  for (const name of ['min_wal_size', 'max_wal_size']) {
    if (!input.changed.has(name)) continue;
    const segment = input.proposed.get('wal_segment_size');
    const q = input.proposed.get(name) as Quantity;
    if (!segment) {
      out.push({ knobs: [name], message: `${name}: cannot check it against the WAL segment size, pg_settings has no wal_segment_size` });
    } else if (toBaseQuantity(q.value, q.unit) < 2 * bytes(segment)) {
      out.push({
        knobs: [name],
        message: `${name} = ${formatQuantity(q.value, q.unit)} is below two WAL segments (${human(2 * bytes(segment))}): the server would not start`,
      });
    }
  }
  return out;
}

/** Every violated constraint that the change is responsible for. */
export function checkConstraints(input: ConstraintInput): ConstraintViolation[] {
  return [...checkMemoryBudget(input), ...checkOrderings(input), ...checkWalSegments(input)];
}

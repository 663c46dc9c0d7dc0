// Which configurations the agent will accept, decided by the catalog's own constraint code so
// that the optimizer and the agent agree exactly; and a repair that pulls a configuration back
// inside the constraints (for the heuristic, and for random points that land just outside).
import {
  checkConstraints,
  memoryBudget,
  ORDERINGS,
  validateChange,
  type ConstraintViolation,
  type Quantity,
  type ValidationResult,
} from '../knobs/index.ts';
import { baseUnitsPer, currentQuantities, toBase } from './quantities.ts';
import { capabilitiesOf, clipNumber } from './space.ts';
import type { Config, NumericDimension, SearchSpace } from './types.ts';

interface SpaceContext {
  readonly current: ReadonlyMap<string, Quantity>;
  readonly numeric: ReadonlyMap<string, NumericDimension>;
  readonly serverVersionNum: number | undefined;
}

// Spaces are immutable plain data: what is derived from one is computed once per object.
const contexts = new WeakMap<SearchSpace, SpaceContext>();

function contextOf(space: SearchSpace): SpaceContext {
  let ctx = contexts.get(space);
  if (!ctx) {
    const current = currentQuantities(space.settings);
    const numeric = new Map(space.dimensions.filter((d): d is NumericDimension => d.kind === 'numeric').map((d) => [d.name, d]));
    ctx = { current, numeric, serverVersionNum: current.get('server_version_num')?.value };
    contexts.set(space, ctx);
  }
  return ctx;
}

function proposedOf(space: SearchSpace, config: Readonly<Config>): Map<string, Quantity> {
  const { current, numeric } = contextOf(space);
  const proposed = new Map(current);
  for (const [name, dim] of numeric) {
    const v = config[name];
    if (typeof v === 'number') proposed.set(name, { value: v, unit: dim.unit });
  }
  return proposed;
}

/** The constraints a full configuration of the space breaks, as the agent would report them. */
export function violations(space: SearchSpace, config: Readonly<Config>): ConstraintViolation[] {
  const { current, serverVersionNum } = contextOf(space);
  return checkConstraints({
    machine: space.machine,
    current,
    proposed: proposedOf(space, config),
    changed: new Set(space.dimensions.map((d) => d.name)),
    ...(serverVersionNum === undefined ? {} : { serverVersionNum }),
  });
}

export function isFeasible(space: SearchSpace, config: Readonly<Config>): boolean {
  return violations(space, config).length === 0;
}

/** The agent's own gate, run on a suggestion before it leaves the optimizer. */
export function validateSuggestion(space: SearchSpace, config: Readonly<Config>): ValidationResult {
  return validateChange(config, {
    machine: space.machine,
    mode: space.mode,
    target: space.target,
    capabilities: capabilitiesOf(space),
    settings: space.settings,
  });
}

// ---- repair ----

/** The largest value of the dimension at or below `base` (bytes, ms, or a plain number). */
function atMost(dim: NumericDimension, base: number): number {
  const inUnit = base / baseUnitsPer(dim.unit);
  if (dim.type === 'integer') return clipNumber(dim, Math.floor(inUnit + 1e-9));
  const v = clipNumber(dim, inUnit);
  if (v <= inUnit) return v;
  // Rounded up to three significant digits: one step of the third digit down.
  return clipNumber(dim, v - 10 ** (Math.floor(Math.log10(Math.abs(v))) - 2));
}

/** The smallest value of the dimension at or above `base`. */
function atLeast(dim: NumericDimension, base: number): number {
  const inUnit = base / baseUnitsPer(dim.unit);
  return clipNumber(dim, dim.type === 'integer' ? Math.ceil(inUnit - 1e-9) : inUnit * (1 + 1e-3));
}

function quantityIn(space: SearchSpace, config: Config, name: string): Quantity | undefined {
  const dim = contextOf(space).numeric.get(name);
  const v = config[name];
  if (dim && typeof v === 'number') return { value: v, unit: dim.unit };
  return contextOf(space).current.get(name);
}

/** Lowers the lower knob of each broken ordering (or raises the upper when the lower cannot move). */
function repairOrderings(space: SearchSpace, config: Config): void {
  const { numeric } = contextOf(space);
  for (let pass = 0; pass < ORDERINGS.length; pass++) {
    let moved = false;
    for (const o of ORDERINGS) {
      const lowerDim = numeric.get(o.lower);
      const upperDim = numeric.get(o.upper);
      if (!lowerDim && !upperDim) continue;
      const lower = quantityIn(space, config, o.lower);
      const upper = quantityIn(space, config, o.upper);
      if (!lower || !upper || toBase(lower) <= toBase(upper)) continue;
      if (lowerDim) config[o.lower] = atMost(lowerDim, toBase(upper));
      const lowerNow = quantityIn(space, config, o.lower) as Quantity;
      if (upperDim && toBase(lowerNow) > toBase(upper)) config[o.upper] = atLeast(upperDim, toBase(lowerNow));
      moved = true;
    }
    if (!moved) return;
  }
}

// What gives way when memory is over budget, first to last: per-connection memory before the
// shared cache, because it is multiplied by every connection.
const SHRINK_ORDER = ['work_mem', 'maintenance_work_mem', 'shared_buffers', 'wal_buffers', 'max_parallel_workers'] as const;

function repairMemory(space: SearchSpace, config: Config): void {
  const { numeric, current, serverVersionNum } = contextOf(space);
  const count = (name: string) => quantityIn(space, config, name)?.value ?? 0;
  for (let step = 0; step < 4 * SHRINK_ORDER.length; step++) {
    const budget = memoryBudget(proposedOf(space, config), space.machine, serverVersionNum);
    if ('missing' in budget) return;
    const excess = budget.totalBytes - budget.limitBytes;
    if (excess <= 0) return;
    const name = SHRINK_ORDER.find((n) => {
      const dim = numeric.get(n);
      return dim !== undefined && (config[n] as number) > dim.min;
    });
    if (name === undefined) return;
    const dim = numeric.get(name) as NumericDimension;
    const now = quantityIn(space, config, name) as Quantity;
    if (name === 'max_parallel_workers') {
      const workMem = toBase(quantityIn(space, config, 'work_mem') as Quantity);
      config[name] = clipNumber(dim, now.value - Math.max(1, Math.ceil(excess / workMem)));
      continue;
    }
    // How many copies of this setting the budget counts.
    let copies = 1;
    if (name === 'work_mem') copies = count('max_connections') + count('max_parallel_workers');
    if (name === 'maintenance_work_mem' && current.get('autovacuum_work_mem')?.value === -1) copies = 1 + count('autovacuum_max_workers');
    config[name] = atMost(dim, toBase(now) - excess / Math.max(1, copies));
  }
}

/**
 * The configuration moved inside the constraints where it can be: orderings first, then memory
 * (which may lower max_parallel_workers, so orderings again). The result may still be
 * infeasible when nothing left can move; callers check.
 */
export function repair(space: SearchSpace, config: Readonly<Config>): Config {
  const out = { ...config };
  repairOrderings(space, out);
  repairMemory(space, out);
  repairOrderings(space, out);
  return out;
}

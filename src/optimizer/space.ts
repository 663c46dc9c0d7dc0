// The search space: one dimension per knob the agent may change on this target, in this mode,
// on this server, with the bounds the agent itself enforces. Points live in a normalized space
// (numeric knobs in [0, 1], on a log scale for sizes and delays; categorical knobs by index);
// configurations are what the agent receives, in pg_settings units, rounded as PostgreSQL
// stores them.
import {
  boundsFor,
  catalogFor,
  effectiveApply,
  effectiveMode,
  enumValues,
  getKnob,
  memoryBudget,
  ORDERINGS,
  parseSetting,
  parseValue,
  rint,
  type Knob,
  type KnobValue,
  type Machine,
  type PgSettingRow,
  type TargetKind,
  type TuningMode,
} from '../knobs/index.ts';
import type { TargetCapabilities } from '../target/capabilities.ts';
import { currentQuantities } from './quantities.ts';
import type { Config, Dimension, NumericDimension, Point, SearchSpace, SpaceCapabilities } from './types.ts';

/** A setting as the agent reports it: pg_settings columns, the range columns optional, and why
 * the target will not write it, if it will not. */
export type SettingInput = Pick<PgSettingRow, 'name' | 'setting' | 'unit' | 'context'> &
  Partial<PgSettingRow> & { readonly unwritable?: string | undefined };

export interface SpaceInput {
  readonly target: TargetKind;
  /** What the target allows (its definition's capabilities), given as data. */
  readonly capabilities: TargetCapabilities;
  /** Default reload-only: restart-context knobs are tuned only when asked. */
  readonly mode?: TuningMode;
  readonly machine: Machine;
  /** Current pg_settings rows, by name or as a list. */
  readonly settings: Readonly<Record<string, SettingInput | undefined>> | readonly SettingInput[];
}

/** Rows with every column the knob catalog reads; the catalog's type fills a missing vartype. */
function completeRows(input: SpaceInput['settings']): Record<string, PgSettingRow> {
  const list = Array.isArray(input) ? (input as readonly SettingInput[]) : Object.values(input as Record<string, SettingInput | undefined>);
  const rows: Record<string, PgSettingRow> = {};
  for (const s of list) {
    if (!s) continue;
    const knob = getKnob(s.name);
    const numeric = s.setting.trim() !== '' && Number.isFinite(Number(s.setting));
    const guessed = /^-?\d+$/.test(s.setting) ? 'integer' : numeric ? 'real' : 'string';
    rows[s.name] = {
      name: s.name,
      setting: s.setting,
      unit: s.unit,
      context: s.context,
      vartype: s.vartype ?? knob?.type ?? guessed,
      min_val: s.min_val ?? null,
      max_val: s.max_val ?? null,
      enumvals: s.enumvals ?? null,
    };
  }
  return rows;
}

/** Knobs the target will not write, with the reason the agent gave. */
function unwritableOf(input: SpaceInput['settings']): Map<string, string> {
  const list = Array.isArray(input) ? (input as readonly SettingInput[]) : Object.values(input as Record<string, SettingInput | undefined>);
  return new Map(list.flatMap((s) => (s?.unwritable ? [[s.name, s.unwritable] as const] : [])));
}

const bound = (text: string | null): number => (text === null || text.trim() === '' ? NaN : Number(text));

/** The dimension for `knob` on this server, or why it cannot be tuned here. */
function dimensionFor(knob: Knob, row: PgSettingRow | undefined, input: SpaceInput, mode: TuningMode): Dimension | string {
  if (!row) return `pg_settings has no ${knob.name}`;
  try {
    parseSetting(knob, row);
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
  const apply = effectiveApply(knob, row.context);
  if (apply === 'not-settable') return `this server reports context '${row.context}', which cannot be set`;
  if (apply === 'restart' && mode === 'reload-only')
    return `needs a restart on this server (context '${row.context}') and the mode is reload-only`;

  switch (knob.type) {
    case 'integer':
    case 'real': {
      const b = boundsFor(knob, input.machine, input.capabilities);
      // validateChange also holds the server's own min_val/max_val.
      const lo = bound(row.min_val);
      const hi = bound(row.max_val);
      let min = Number.isFinite(lo) ? Math.max(b.min, lo) : b.min;
      let max = Number.isFinite(hi) ? Math.min(b.max, hi) : b.max;
      if (knob.type === 'integer') {
        min = Math.ceil(min);
        max = Math.floor(max);
      }
      if (min > max) return `the catalog's bounds and the server's range do not overlap`;
      // A log scale needs a positive range; no catalog knob lacks one, but a server might.
      const scale = knob.scale === 'log' && min > 0 ? 'log' : 'linear';
      return { kind: 'numeric', name: knob.name, type: knob.type, unit: knob.unit, scale, min, max };
    }
    case 'bool':
      return { kind: 'categorical', name: knob.name, type: 'bool', values: ['off', 'on'] };
    case 'enum': {
      const accepted = enumValues(row);
      const values = accepted.length > 0 ? knob.values.filter((v) => accepted.includes(v)) : [...knob.values];
      if (values.length === 0) return 'the server accepts none of the catalog values';
      return { kind: 'categorical', name: knob.name, type: 'enum', values };
    }
  }
}

/**
 * Settings the cross-knob constraints read that the rows lack: without them the agent refuses
 * every change to the knobs involved, so there is nothing to search.
 */
function missingContext(dimensions: readonly Dimension[], settings: Record<string, PgSettingRow>, input: SpaceInput): string[] {
  const names = new Set(dimensions.map((d) => d.name));
  const current = currentQuantities(settings);
  const missing = new Set<string>();
  // Every space has work_mem, so the memory budget is always checked; asked only for what it
  // lacks, so the machine does not matter here.
  const budget = memoryBudget(current, input.machine);
  if ('missing' in budget) budget.missing.forEach((n) => missing.add(n));
  for (const o of ORDERINGS) {
    if (!names.has(o.lower) && !names.has(o.upper)) continue;
    for (const n of [o.lower, o.upper]) if (!current.has(n)) missing.add(n);
  }
  if ((names.has('min_wal_size') || names.has('max_wal_size')) && !current.has('wal_segment_size')) missing.add('wal_segment_size');
  return [...missing];
}

/** The target's capabilities as data the space keeps. */
function spaceCapabilities(c: TargetCapabilities): SpaceCapabilities {
  return {
    restart: c.restart,
    tunable: catalogFor(c, 'restart').map((k) => k.name),
    sharedBuffersMaxFraction: c.sharedBuffersMaxFraction,
    ...(c.boundsNameTarget && { boundsNameTarget: true }),
  };
}

/** The capabilities a space keeps, as the knob catalog reads them. */
export function capabilitiesOf(space: SearchSpace): TargetCapabilities {
  const { tunable, ...rest } = space.capabilities;
  return { ...rest, tunes: (knob) => tunable.includes(knob.name) };
}

/** The search space for a target, mode and machine, given the server's current settings. */
export function createSpace(input: SpaceInput): SearchSpace {
  const mode = effectiveMode(input.capabilities, input.mode ?? 'reload-only');
  const settings = completeRows(input.settings);
  const dimensions: Dimension[] = [];
  const excluded: Array<{ name: string; reason: string }> = [];
  const unwritable = unwritableOf(input.settings);
  for (const knob of catalogFor(input.capabilities, mode)) {
    const why = unwritable.get(knob.name);
    const dim = why ?? dimensionFor(knob, settings[knob.name], input, mode);
    if (typeof dim === 'string') excluded.push({ name: knob.name, reason: dim });
    else dimensions.push(dim);
  }
  const missing = missingContext(dimensions, settings, input);
  if (missing.length > 0) {
    throw new TypeError(
      `the settings lack ${missing.join(', ')}: the agent checks its memory and ordering constraints against them, so they must be reported too`,
    );
  }
  return {
    target: input.target,
    capabilities: spaceCapabilities(input.capabilities),
    mode,
    machine: input.machine,
    dimensions,
    excluded,
    settings,
  };
}

// ---- values ----

/** 3 significant digits: reals people can read (1.1, 0.9, 4.25), well within what pg_settings keeps. */
const roundReal = (x: number) => Number(x.toPrecision(3));
const clamp = (x: number, lo: number, hi: number) => Math.min(Math.max(x, lo), hi);

/** `value` inside the dimension's bounds, rounded as the agent will store it. */
export function clipNumber(dim: NumericDimension, value: number): number {
  const inside = clamp(value, dim.min, dim.max);
  const rounded = dim.type === 'integer' ? rint(inside) : roundReal(inside);
  const result = clamp(rounded, dim.min, dim.max);
  return result === 0 ? 0 : result;
}

export function encodeNumber(dim: NumericDimension, value: number): number {
  if (dim.max === dim.min) return 0;
  const v = clamp(value, dim.min, dim.max);
  if (dim.scale === 'log') return (Math.log(v) - Math.log(dim.min)) / (Math.log(dim.max) - Math.log(dim.min));
  return (v - dim.min) / (dim.max - dim.min);
}

export function decodeNumber(dim: NumericDimension, u: number): number {
  const t = clamp(u, 0, 1);
  const raw =
    dim.scale === 'log' ? Math.exp(Math.log(dim.min) + t * (Math.log(dim.max) - Math.log(dim.min))) : dim.min + t * (dim.max - dim.min);
  return clipNumber(dim, raw);
}

/** The value the server runs with now, normalized as the catalog does. */
export function currentValue(space: SearchSpace, dim: Dimension): KnobValue {
  const knob = getKnob(dim.name) as Knob;
  return parseSetting(knob, space.settings[dim.name] as PgSettingRow);
}

/** A value as a caller wrote it ('64MB', true, 8192) normalized for the dimension, or undefined. */
function parseFor(dim: Dimension, raw: unknown): KnobValue | undefined {
  const knob = getKnob(dim.name);
  if (!knob || (typeof raw !== 'string' && typeof raw !== 'number' && typeof raw !== 'boolean')) return undefined;
  const parsed = parseValue(knob, raw);
  return parsed.ok ? parsed.value : undefined;
}

function encodeValue(dim: Dimension, value: KnobValue): number {
  if (dim.kind === 'numeric') return encodeNumber(dim, typeof value === 'number' ? value : dim.min);
  const index = dim.values.indexOf(String(value));
  return index < 0 ? 0 : index;
}

/**
 * The point of a configuration. Knobs it does not set take their current value; values outside
 * the bounds are clipped to them.
 */
export function encode(space: SearchSpace, config: Readonly<Config>): number[] {
  return space.dimensions.map((dim) => {
    const given = Object.hasOwn(config, dim.name) ? parseFor(dim, config[dim.name]) : undefined;
    return encodeValue(dim, given ?? currentValue(space, dim));
  });
}

/** The configuration at a point: every dimension, rounded to what the agent will store. */
export function decode(space: SearchSpace, point: Point): Config {
  const config: Config = {};
  space.dimensions.forEach((dim, i) => {
    const u = point[i] ?? 0;
    if (dim.kind === 'numeric') config[dim.name] = decodeNumber(dim, u);
    else config[dim.name] = dim.values[clamp(Math.round(u), 0, dim.values.length - 1)] as string;
  });
  return config;
}

/**
 * Euclidean distance in the normalized space; a categorical knob adds 1 when the values
 * differ. It is what "the same region" means for failed configurations.
 */
export function distance(space: SearchSpace, a: Point, b: Point): number {
  let sum = 0;
  space.dimensions.forEach((dim, i) => {
    const x = a[i] ?? 0;
    const y = b[i] ?? 0;
    sum += dim.kind === 'numeric' ? (x - y) ** 2 : Math.round(x) === Math.round(y) ? 0 : 1;
  });
  return Math.sqrt(sum);
}

/** How many knobs differ between two points of the space. */
export function movedKnobs(a: Point, b: Point): number {
  return a.reduce((n, x, i) => n + (Math.abs(x - (b[i] ?? 0)) > 1e-9 ? 1 : 0), 0);
}

/** A stable identity for a configuration: names lower-cased and sorted, values normalized. */
export function configKey(config: Readonly<Config>): string {
  const entries = Object.entries(config).map(([name, raw]) => {
    const lower = name.toLowerCase();
    const knob = getKnob(lower);
    const parsed = knob ? parseValue(knob, raw) : undefined;
    return [lower, parsed?.ok ? parsed.value : raw] as const;
  });
  entries.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return JSON.stringify(entries);
}

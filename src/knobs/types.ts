// Types shared by the knob catalog, its value parser and the change validator. The agent uses
// them to check what the tuning service asks for; the optimizer uses them to build its search
// space. Nothing here does I/O.

// A target and a tuning mode mean what the protocol says they mean (defined there, once).
import type { TargetKind, TuningMode } from '../protocol/v1.ts';

export type { TargetKind, TuningMode };

// The machine is what a target describes (src/target) and what bounds are functions of.
import type { Machine } from '../target/machine.ts';
import type { TargetCapabilities } from '../target/capabilities.ts';

export type { Machine };

/** `pg_settings.context` values, loosest first. */
export type PgContext = 'user' | 'superuser' | 'sighup' | 'superuser-backend' | 'backend' | 'postmaster' | 'internal';

/** The contexts catalog knobs have (PostgreSQL 15). */
export type KnobContext = 'user' | 'superuser' | 'sighup' | 'postmaster';

/** How a new value takes effect: a configuration reload, or a server restart. */
export type ApplyContext = 'reload' | 'restart';

/** Units exactly as `pg_settings.unit` spells them, for the units catalog knobs use. */
export type KnobUnit = '8kB' | 'kB' | 'MB' | 'ms' | 's';

/** Inclusive bounds, in the knob's pg_settings unit. */
export interface Bounds {
  readonly min: number;
  readonly max: number;
}

interface KnobCommon {
  readonly name: string;
  /** `pg_settings.context` on PostgreSQL 15. */
  readonly context: KnobContext;
  /** Derived from `context`: `postmaster` needs a restart, every other context a reload. */
  readonly apply: ApplyContext;
  /** What the knob does and why it is worth tuning. */
  readonly summary: string;
}

export interface NumericKnob extends KnobCommon {
  readonly type: 'integer' | 'real';
  /** `pg_settings.unit`; values are numbers in this unit, as `pg_settings.setting` shows them. */
  readonly unit: KnobUnit | null;
  /** How the optimizer should sample the range: log for sizes and delays, linear otherwise. */
  readonly scale: 'log' | 'linear';
  /** Range the agent allows on this machine and target (its capabilities), in `unit`. */
  readonly bounds: (machine: Machine, target: TargetCapabilities) => Bounds;
}

export interface BoolKnob extends KnobCommon {
  readonly type: 'bool';
  readonly unit: null;
}

export interface EnumKnob extends KnobCommon {
  readonly type: 'enum';
  readonly unit: null;
  /** Allowed values, spelled as `pg_settings.setting` shows them (lower case). */
  readonly values: readonly string[];
  /** Other spellings PostgreSQL accepts, mapped to the value it then shows (e.g. on → pglz). */
  readonly aliases: Readonly<Record<string, string>>;
}

export type Knob = NumericKnob | BoolKnob | EnumKnob;
export type KnobType = Knob['type'];

/**
 * A normalized knob value: a number in the pg_settings unit for integer and real knobs,
 * 'on' / 'off' for bool knobs, the canonical value for enum knobs. Always what
 * `pg_settings.setting` shows after the value is applied.
 */
export type KnobValue = number | string;

/** What the tuning service may send for one knob. */
export type ChangeValue = string | number | boolean;

/** One row of `pg_settings`, as node-postgres returns it (the columns the catalog reads). */
export interface PgSettingRow {
  readonly name: string;
  readonly setting: string;
  readonly unit: string | null;
  readonly context: string;
  readonly vartype: string;
  readonly min_val: string | null;
  readonly max_val: string | null;
  /** node-postgres parses text[] into an array; a raw '{a,b}' literal is accepted too. */
  readonly enumvals: readonly string[] | string | null;
  // Read by the agent's read-back, not by the catalog.
  readonly source?: string | null;
  readonly boot_val?: string | null;
  readonly reset_val?: string | null;
  readonly pending_restart?: boolean | null;
}

/** Current pg_settings rows by name. */
export type PgSettings = Readonly<Record<string, PgSettingRow | undefined>>;

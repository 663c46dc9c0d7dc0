// The optimizer's public data shapes. Everything here is plain JSON: the tuning service stores
// the history and can rebuild the search space from what the agent reported, and the optimizer
// keeps no state of its own between calls.
import type { KnobUnit, KnobValue, Machine, PgSettingRow, TargetKind, TuningMode } from '../knobs/index.ts';
import type { RestartCapability } from '../target/capabilities.ts';

/** A target's capabilities as plain data (the knobs it tunes by name), so that a space survives a
 * JSON round trip; `capabilitiesOf` in space.ts makes them capabilities again. */
export interface SpaceCapabilities {
  readonly restart: RestartCapability;
  readonly tunable: readonly string[];
  readonly sharedBuffersMaxFraction: number;
  readonly boundsNameTarget?: boolean;
}

/** Knob → value, in the pg_settings unit (numbers) or as pg_settings spells it ('on', 'lz4'). */
export type Config = Record<string, KnobValue>;

/** One measurement (or attempt) of a configuration, as the service stores it. */
export interface Observation {
  readonly config: Readonly<Config>;
  /**
   * Lower is better: the baseline-mix-weighted average query runtime divided by the baseline's,
   * so 1.0 is the baseline. Null when the configuration failed before it could be measured.
   */
  readonly objective: number | null;
  /** failed: the agent refused it, a guardrail reverted it, or the server crashed with it. */
  readonly status: 'ok' | 'failed';
  /**
   * The standard deviation of log(objective), when the caller measured it (the tuning session
   * does, from its repeated baseline windows): the model then takes it as the measurement's
   * noise instead of fitting one. Every ok observation has it, or none.
   */
  readonly noise?: number;
  /** ISO timestamp, for people; the optimizer reads the order of the history, not the time. */
  readonly measuredAt?: string;
  /** Which kind of suggestion it was, when the caller kept it: pgtune's step is taken once. */
  readonly kind?: SuggestionKind;
}

export type History = readonly Observation[];

export interface NumericDimension {
  readonly kind: 'numeric';
  readonly name: string;
  readonly type: 'integer' | 'real';
  readonly unit: KnobUnit | null;
  /** log: sizes and delays, searched by ratio; linear otherwise. */
  readonly scale: 'log' | 'linear';
  /** Inclusive bounds in `unit`: the catalog's for this machine, within the server's own range. */
  readonly min: number;
  readonly max: number;
}

export interface CategoricalDimension {
  readonly kind: 'categorical';
  readonly name: string;
  readonly type: 'bool' | 'enum';
  /** The values this server accepts, as pg_settings spells them. */
  readonly values: readonly string[];
}

export type Dimension = NumericDimension | CategoricalDimension;

/** The knobs of the target and mode, what they may range over, and the settings around them. */
export interface SearchSpace {
  readonly target: TargetKind;
  /** What the target allows, as its definition says (the space is built from it). */
  readonly capabilities: SpaceCapabilities;
  /** The mode in effect (managed-b-flex is always reload-only). */
  readonly mode: TuningMode;
  readonly machine: Machine;
  /** One per tunable knob, in catalog order. */
  readonly dimensions: readonly Dimension[];
  /** Catalog knobs of this target and mode that cannot be tuned on this server, and why. */
  readonly excluded: ReadonlyArray<{ readonly name: string; readonly reason: string }>;
  /** Current settings by name: the values of everything not tuned (max_connections, …). */
  readonly settings: Readonly<Record<string, PgSettingRow>>;
}

/**
 * A point of the normalized space, one number per dimension: a position in [0, 1] for a
 * numeric knob (log or linear per its scale), the index of the value for a categorical one.
 */
export type Point = readonly number[];

/** diagnosis: argued from the database's statistics; heuristic: pgtune's; explore: a step of the search. */
export const SUGGESTION_KINDS = ['diagnosis', 'heuristic', 'explore'] as const;
export type SuggestionKind = (typeof SUGGESTION_KINDS)[number];

export interface Suggestion {
  readonly kind: SuggestionKind;
  /** A full configuration: a value for every dimension of the space. */
  readonly config: Config;
  /** One sentence for the dashboard: why this configuration now. */
  readonly reason: string;
  /** For model-based exploration: the model's forecast of the objective there, and the most any
   * candidate of the region is expected to improve on the best so far (0.03 = 3 % faster). */
  readonly predicted?: Prediction;
}

/** The model's forecast for a step (a share of the baseline's runtime, 2 sd either side). */
export interface Prediction {
  readonly objective: number;
  readonly low: number;
  readonly high: number;
  /** The most any candidate of the region is expected to improve on the best so far (EI), as a share of its objective. */
  readonly expectedImprovement?: number;
  /** The most any candidate may improve on it at the model's optimistic bound (mean − 2 sd): what the search has left to give. */
  readonly possibleImprovement?: number;
}

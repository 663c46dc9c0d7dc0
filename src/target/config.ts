// A target's agent.yaml section: its keys (spelled as the spec spells them, with their environment
// variables) and how their values become the settings its code reads. The loader
// (src/agent/config/load.ts) reads every key of every target, each by its section and key, so
// that two targets' keys of the same name cannot collide, and keeps what a section's `read`
// returns under `config.targets[section]`, where only that target's `of` reads it.
import type { TargetKind } from '../protocol/v1.ts';

export type ValueKind =
  | 'string'
  | 'boolean'
  | 'postgres-url'
  | 'http-url'
  /** One or more http(s) URLs without credentials: a YAML list, or comma-separated in the environment. */
  | 'http-url-list'
  | 'proxy-url'
  | 'positive-integer'
  | 'positive-number';

export interface KeySpec {
  /** agent.yaml section; `null` for environment-only keys. */
  section: 'postgresql' | 'tuner' | 'guardrails' | (string & {}) | null;
  key: string;
  env: string;
  kind: ValueKind;
  secret: boolean;
  /** Targets for which the key must be set. 'service' = needed by commands that talk to the tuning service;
   * 'any' = every target. (A kind is any string, so `& {}` keeps the two words from being absorbed.) */
  requiredFor: ReadonlyArray<'service' | 'any' | (TargetKind & {})>;
  /** Not in the spec: added by us (documented in docs/configuration.md). */
  ours?: boolean;
  help: string;
}

/** Keys that mean something only together: one credential in parts. Half of one is a
 * configuration error (exit 2) for the targets that use it, named before anything connects.
 * `keys` are keys of the same section's table. */
export interface AllOrNone {
  keys: readonly string[];
  targets: readonly TargetKind[];
  why: string;
}

/** A value as the loader checked it against its key's kind. */
export type ConfigValue = string | boolean | number | string[];

/** A section's checked values, by key as its table spells it; a key that is not set is absent. */
export interface SectionValues {
  string(key: string): string | undefined;
  number(key: string): number | undefined;
  list(key: string): string[] | undefined;
}

/** What a configuration keeps of each target's section (AgentConfig.targets). */
export interface TargetSections {
  readonly targets: Readonly<Record<string, unknown>>;
}

/** The database's settings (agent.yaml section postgresql), which every target reads. */
export interface PostgresqlSettings {
  connectionUrl: string;
  extraCaFile?: string;
  includeQueries: boolean;
  /** postgresql.include_plans: the planner probe may run (src/agent/plans). */
  includePlans: boolean;
  allowRestart: boolean;
}

/** What a target reads of the agent's configuration: the database's settings and its own section
 * (the agent's AgentConfig has more). */
export interface TargetAgentConfig extends TargetSections {
  readonly postgresql: PostgresqlSettings;
}

export interface TargetConfigSection<T = unknown> {
  /** The agent.yaml section of its keys, or null when it has none. Environment-only keys
   * (section null in their KeySpec) are kept under it too. */
  readonly section: string | null;
  readonly keys: readonly KeySpec[];
  /** Keys that mean something only together (a credential in parts). */
  readonly allOrNone: readonly AllOrNone[];
  /** The target's settings from its checked values. */
  read(values: SectionValues): T;
  /** The target's settings from a loaded configuration (what `read` returned). */
  of(config: TargetSections): T;
}

/** A target's section: its keys, and how their values become its settings. */
export function targetSection<T>(
  section: string | null,
  keys: readonly KeySpec[],
  allOrNone: readonly AllOrNone[],
  read: (values: SectionValues) => T,
): TargetConfigSection<T> {
  const name = section ?? '';
  return {
    section,
    keys,
    allOrNone,
    read,
    // A configuration made without this section (a test's, or a registry without the target)
    // reads as a section with nothing set.
    of: (config) => (config.targets[name] as T | undefined) ?? read(NOTHING_SET),
  };
}

const NOTHING_SET: SectionValues = { string: () => undefined, number: () => undefined, list: () => undefined };

/** A section with no keys. */
export const NO_KEYS: TargetConfigSection<Record<string, never>> = targetSection(null, [], [], () => ({}));

/** Drops undefined members, so optional settings are absent rather than present-but-undefined. */
export function compact<T extends Record<string, unknown>>(o: T): { [K in keyof T]?: Exclude<T[K], undefined> } {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as { [K in keyof T]?: Exclude<T[K], undefined> };
}

// validateChange: the agent's gate between what the tuning service asks for and what it
// applies. All or nothing: one bad entry refuses the whole change, with one message per
// problem naming the knob, the value given and what is expected. Nothing outside the catalog,
// never a never-touch setting, never outside the bounds for this machine, never a restart in
// reload-only mode, never a combination that breaks the cross-knob constraints.
import type { TargetCapabilities } from '../target/capabilities.ts';
import { assertMachine, describeMachine, effectiveMode, getKnob, KNOBS, reachOf } from './catalog.ts';
import { checkConstraints, type Quantity } from './constraints.ts';
import { neverTouchEntry } from './never-touch.ts';
import type {
  ApplyContext,
  ChangeValue,
  Knob,
  KnobValue,
  Machine,
  PgContext,
  PgSettingRow,
  PgSettings,
  TargetKind,
  TuningMode,
} from './types.ts';
import { TUNING_MODES } from '../protocol/v1.ts';
import { formatQuantity } from './units.ts';
import { describeValue, formatForAlterSystem, parseSetting, parseValue, rowUnit } from './values.ts';

export interface ValidationContext {
  readonly machine: Machine;
  readonly mode: TuningMode;
  /** The target's kind, as messages name it. */
  readonly target: TargetKind;
  /** What the target allows (its definition's), given as data: the catalog never looks it up. */
  readonly capabilities: TargetCapabilities;
  /** Current pg_settings rows by name. */
  readonly settings: PgSettings;
}

export type ProblemCode =
  | 'invalid-request' // the change or the context is malformed
  | 'never-touch' // a durability, security, … setting
  | 'unknown-knob' // not in the catalog
  | 'not-on-target' // in the catalog, not tunable on this target
  | 'server-mismatch' // pg_settings disagrees with the catalog (missing, type, unit) or forbids it
  | 'needs-restart' // restart-context knob in reload-only mode
  | 'invalid-value' // not parseable as a value of this knob
  | 'out-of-bounds' // outside the catalog bounds for this machine
  | 'out-of-server-range' // outside pg_settings min_val/max_val or enumvals
  | 'constraint'; // the effective configuration breaks a cross-knob constraint

export interface ValidationProblem {
  readonly code: ProblemCode;
  /** The name as given (the change's key) the problem is about; for constraints, every knob of the change involved. */
  readonly knobs: readonly string[];
  /** The value as given, for per-entry problems. */
  readonly given?: string;
  readonly message: string;
}

export interface ValidatedEntry {
  readonly name: string;
  /** Normalized: a number in the pg_settings unit, 'on'/'off', or the enum value. */
  readonly value: KnobValue;
  /** The value as given. */
  readonly given: string;
  /** The value pg_settings shows now, normalized the same way. */
  readonly current: KnobValue;
  /** Takes effect only after a server restart. */
  readonly restart: boolean;
  /** The literal for `ALTER SYSTEM SET name = …`. */
  readonly literal: string;
}

export type ValidationResult =
  | {
      readonly ok: true;
      /** Normalized values by knob name: exactly what pg_settings.setting will show. */
      readonly values: Readonly<Record<string, KnobValue>>;
      readonly entries: readonly ValidatedEntry[];
      /** Some entry takes effect only after a restart. */
      readonly needsRestart: boolean;
    }
  | {
      readonly ok: false;
      /** One message per problem. */
      readonly errors: string[];
      readonly problems: readonly ValidationProblem[];
    };

// How hard a context is to change, loosest first: of two opinions, the stricter wins.
const STRICTNESS: Readonly<Record<PgContext, number>> = {
  user: 0,
  superuser: 1,
  sighup: 2,
  'superuser-backend': 3,
  backend: 3,
  postmaster: 4,
  internal: 5,
};

function strictness(context: string): number {
  // A context this code does not know is treated as the strictest: not settable.
  return (STRICTNESS as Record<string, number | undefined>)[context] ?? STRICTNESS.internal;
}

/** How a knob takes effect on this server: the stricter of the catalog's and pg_settings' contexts. */
export function effectiveApply(knob: Knob, serverContext: string | undefined): ApplyContext | 'not-settable' {
  const context = serverContext !== undefined && strictness(serverContext) > strictness(knob.context) ? serverContext : knob.context;
  if (strictness(context) >= STRICTNESS.internal) return 'not-settable';
  return context === 'postmaster' ? 'restart' : 'reload';
}

export interface ContextDisagreement {
  readonly name: string;
  readonly catalogContext: string;
  readonly serverContext: string;
  /** How the agent will treat the knob on this server (the stricter context wins). */
  readonly apply: ApplyContext | 'not-settable';
  readonly message: string;
}

/**
 * Catalog knobs whose pg_settings context differs from the catalog's (another PostgreSQL
 * version, a managed service's patches). validateChange already applies the stricter one; the
 * agent reports these as warnings. Knobs missing from `settings` are not listed here
 * (validateChange refuses them).
 */
export function checkContexts(settings: PgSettings, knobs: readonly Knob[] = KNOBS): ContextDisagreement[] {
  const out: ContextDisagreement[] = [];
  for (const knob of knobs) {
    const row = settings[knob.name];
    if (!row || row.context === knob.context) continue;
    const apply = effectiveApply(knob, row.context);
    const stricter = strictness(row.context) > strictness(knob.context);
    out.push({
      name: knob.name,
      catalogContext: knob.context,
      serverContext: row.context,
      apply,
      message:
        `${knob.name}: pg_settings reports context '${row.context}', the catalog expects '${knob.context}'; ` +
        (stricter
          ? `treated as '${row.context}' (${apply === 'not-settable' ? 'not settable' : `needs a ${apply}`})`
          : `the catalog's stricter '${knob.context}' is kept`),
    });
  }
  return out;
}

/** Builds the settings-by-name map validateChange takes from pg_settings rows. */
export function settingsByName(rows: readonly PgSettingRow[]): Record<string, PgSettingRow> {
  return Object.fromEntries(rows.map((r) => [r.name, r]));
}

/** pg_settings.enumvals as an array, whether node-postgres parsed it or not. */
export function enumValues(row: PgSettingRow): string[] {
  const v = row.enumvals;
  if (v === null || v === undefined) return [];
  if (typeof v !== 'string') return [...v];
  const inner = v.replace(/^\{/, '').replace(/\}$/, '');
  return inner === '' ? [] : inner.split(',').map((s) => s.replace(/^"(.*)"$/, '$1'));
}

/** The value as given, safe to put in a message: escaped, and cut short when long. */
function givenText(raw: unknown): string {
  if (typeof raw === 'string') {
    const text = JSON.stringify(raw.length > 80 ? `${raw.slice(0, 80)}…` : raw).slice(1, -1);
    return text === '' ? "''" : text;
  }
  if (typeof raw === 'number' || typeof raw === 'boolean') return String(raw);
  return raw === null ? 'null' : `(${typeof raw})`;
}

/** pg_settings.min_val / max_val as a number; NaN when absent. */
function bound(text: string | null): number {
  return text === null || text.trim() === '' ? NaN : Number(text);
}

/** A name as given, safe to put in a message: as it is when it looks like a name, quoted otherwise. */
function nameText(rawName: string): string {
  return /^[A-Za-z0-9_.]{1,100}$/.test(rawName) ? rawName : JSON.stringify(rawName.length > 100 ? `${rawName.slice(0, 100)}…` : rawName);
}

/** "work_mem = 41943040 (40GB)" for a bare number in a unit; "work_mem = 40GB" as given otherwise. */
function stated(knob: Knob, given: string, raw: unknown, value?: KnobValue): string {
  if (typeof raw === 'number' && typeof value === 'number' && knob.unit !== null)
    return `${knob.name} = ${given} (${describeValue(knob, value)})`;
  return `${knob.name} = ${given}`;
}

/** A quantity in this setting's unit, from pg_settings, for the constraints. */
function rowQuantity(row: PgSettingRow): Quantity | undefined {
  if (row.vartype !== 'integer' && row.vartype !== 'real') return undefined;
  const value = Number(row.setting);
  if (row.setting.trim() === '' || !Number.isFinite(value)) return undefined;
  return { value, unit: rowUnit(row) };
}

function checkContext(ctx: ValidationContext): string | undefined {
  if (ctx === null || typeof ctx !== 'object') return 'no validation context';
  if (typeof ctx.target !== 'string' || ctx.capabilities === null || typeof ctx.capabilities !== 'object')
    return `unknown target ${String(ctx.target)} (no capabilities given)`;
  if (!TUNING_MODES.includes(ctx.mode)) return `unknown tuning mode ${String(ctx.mode)} (expected ${TUNING_MODES.join(', ')})`;
  if (ctx.settings === null || typeof ctx.settings !== 'object') return 'no pg_settings rows';
  try {
    assertMachine(ctx.machine);
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  }
  return undefined;
}

/**
 * Checks a change the tuning service asks for (parameter → value) against the catalog, this
 * machine's bounds, the target, the mode, the server's own pg_settings and the cross-knob
 * constraints. All or nothing: `ok` only when every entry passes, and then with every value
 * normalized; otherwise one message per problem and no values at all.
 */
export function validateChange(change: Readonly<Record<string, ChangeValue>>, ctx: ValidationContext): ValidationResult {
  const problems: ValidationProblem[] = [];
  const refuse = (code: ProblemCode, knobs: readonly string[], message: string, given?: string) =>
    problems.push(given === undefined ? { code, knobs, message } : { code, knobs, given, message });

  if (change === null || typeof change !== 'object' || Array.isArray(change)) {
    refuse('invalid-request', [], 'the change must be an object of parameter → value');
    return { ok: false, errors: problems.map((p) => p.message), problems };
  }
  const contextProblem = checkContext(ctx);
  const entries: ValidatedEntry[] = [];
  const seen = new Map<string, string>();

  for (const [key, raw] of Object.entries(change) as Array<[string, unknown]>) {
    const given = givenText(raw);
    const rawName = nameText(key);
    if (contextProblem !== undefined) {
      refuse('invalid-request', [key], `${rawName} = ${given} cannot be checked: ${contextProblem}`, given);
      continue;
    }
    // PostgreSQL matches setting names case-insensitively; so does the agent. Nothing else is
    // forgiven: a name with spaces or punctuation is simply not in the catalog.
    const name = key.toLowerCase();
    const earlier = seen.get(name);
    if (earlier !== undefined) {
      refuse('invalid-request', [key], `${rawName} = ${given}: ${nameText(name)} is set twice in one change (also as ${earlier})`, given);
      continue;
    }
    seen.set(name, rawName);

    // The never-touch list comes first: even a catalog mistake cannot let one of these through.
    const forbidden = neverTouchEntry(name);
    if (forbidden) {
      refuse(
        'never-touch',
        [key],
        `${rawName} = ${given} refused: ${nameText(name)} is never changed by the agent (${forbidden.category}: ${forbidden.reason})`,
        given,
      );
      continue;
    }
    const knob = getKnob(name);
    if (!knob) {
      const known = Object.hasOwn(ctx.settings, name);
      refuse(
        'unknown-knob',
        [key],
        `${rawName} = ${given} refused: ${known ? `${name} is a PostgreSQL parameter but not one the agent tunes` : `${nameText(name)} is not a parameter the agent knows`} (not in the knob catalog)`,
        given,
      );
      continue;
    }
    if (!ctx.capabilities.tunes(reachOf(knob))) {
      refuse('not-on-target', [key], `${stated(knob, given, raw)} refused: ${knob.name} is not tunable on ${ctx.target}`, given);
      continue;
    }

    const row = Object.hasOwn(ctx.settings, knob.name) ? ctx.settings[knob.name] : undefined;
    if (!row) {
      refuse('server-mismatch', [key], `${stated(knob, given, raw)} refused: this server's pg_settings has no ${knob.name}`, given);
      continue;
    }
    let current: KnobValue;
    try {
      current = parseSetting(knob, row);
    } catch (err) {
      refuse('server-mismatch', [key], `${stated(knob, given, raw)} refused: ${err instanceof Error ? err.message : String(err)}`, given);
      continue;
    }

    const apply = effectiveApply(knob, row.context);
    if (apply === 'not-settable') {
      refuse(
        'server-mismatch',
        [key],
        `${stated(knob, given, raw)} refused: this server reports ${knob.name} as '${row.context}', which cannot be set`,
        given,
      );
      continue;
    }
    const mode = effectiveMode(ctx.capabilities, ctx.mode);
    if (apply === 'restart' && mode === 'reload-only') {
      const why =
        row.context === knob.context
          ? `context '${row.context}'`
          : `this server reports context '${row.context}' (the catalog says '${knob.context}')`;
      const modeWhy = ctx.mode === 'restart' ? `${ctx.target} supports reload-only tuning` : 'the tuning mode is reload-only';
      refuse(
        'needs-restart',
        [key],
        `${stated(knob, given, raw)} refused: ${knob.name} needs a server restart (${why}) and ${modeWhy}`,
        given,
      );
      continue;
    }

    if (typeof raw !== 'string' && typeof raw !== 'number' && typeof raw !== 'boolean') {
      refuse('invalid-value', [key], `${knob.name} = ${given} is not a valid value: expected a string or a number`, given);
      continue;
    }
    const parsed = parseValue(knob, raw);
    if (!parsed.ok) {
      refuse('invalid-value', [key], `${knob.name} = ${given} is not a valid value: ${parsed.reason}`, given);
      continue;
    }
    const value = parsed.value;

    if (knob.type === 'integer' || knob.type === 'real') {
      const v = value as number;
      const b = knob.bounds(ctx.machine, ctx.capabilities);
      const range = `${formatQuantity(b.min, knob.unit)} to ${formatQuantity(b.max, knob.unit)}`;
      const rawRange = knob.unit && knob.unit !== 'ms' && knob.unit !== 's' ? `; in ${knob.unit}: ${b.min} to ${b.max}` : '';
      const machine = `for a machine with ${describeMachine(ctx.machine)}${ctx.capabilities.boundsNameTarget ? ` on ${ctx.target}` : ''}`;
      if (v < b.min || v > b.max) {
        const side =
          v < b.min ? `below the minimum ${formatQuantity(b.min, knob.unit)}` : `above the maximum ${formatQuantity(b.max, knob.unit)}`;
        refuse('out-of-bounds', [key], `${stated(knob, given, raw, v)} is ${side} ${machine} (allowed ${range}${rawRange})`, given);
        continue;
      }
      const lo = bound(row.min_val);
      const hi = bound(row.max_val);
      if ((Number.isFinite(lo) && v < lo) || (Number.isFinite(hi) && v > hi)) {
        refuse(
          'out-of-server-range',
          [key],
          `${stated(knob, given, raw, v)} is outside the range this server accepts (${formatQuantity(lo, knob.unit)} to ${formatQuantity(hi, knob.unit)})`,
          given,
        );
        continue;
      }
    } else if (knob.type === 'enum') {
      const accepted = enumValues(row);
      if (accepted.length > 0 && !accepted.includes(value as string)) {
        refuse(
          'out-of-server-range',
          [key],
          `${knob.name} = ${given} is not available on this server (it accepts ${accepted.join(', ')})`,
          given,
        );
        continue;
      }
    }

    entries.push({ name: knob.name, value, given, current, restart: apply === 'restart', literal: formatForAlterSystem(knob, value) });
  }

  if (contextProblem === undefined && entries.length > 0) {
    for (const v of constraintViolations(entries, ctx)) refuse('constraint', v.knobs, v.message);
  }

  if (problems.length > 0) return { ok: false, errors: problems.map((p) => p.message), problems };
  const values = Object.fromEntries(entries.map((e) => [e.name, e.value]));
  return { ok: true, values, entries, needsRestart: entries.some((e) => e.restart) };
}

/** Overlays the accepted entries on pg_settings and checks the constraints on the result. */
function constraintViolations(entries: readonly ValidatedEntry[], ctx: ValidationContext) {
  const current = new Map<string, Quantity>();
  for (const [name, row] of Object.entries(ctx.settings)) {
    if (!row) continue;
    const q = rowQuantity(row);
    if (q) current.set(name, q);
  }
  const proposed = new Map(current);
  const changed = new Set<string>();
  for (const e of entries) {
    changed.add(e.name);
    const knob = getKnob(e.name);
    if (knob && typeof e.value === 'number') proposed.set(e.name, { value: e.value, unit: knob.unit });
  }
  const version = current.get('server_version_num')?.value;
  return checkConstraints({
    machine: ctx.machine,
    current,
    proposed,
    changed,
    ...(version === undefined ? {} : { serverVersionNum: version }),
  });
}

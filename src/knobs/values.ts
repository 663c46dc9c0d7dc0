// Knob values: parsing what the tuning service sends, reading what pg_settings shows, and
// writing the literal for ALTER SYSTEM. A normalized value is always exactly what
// pg_settings.setting shows once it is applied, so the agent's read-back compares with ===.
import type { ChangeValue, Knob, KnobValue, PgSettingRow } from './types.ts';
import { formatQuantity, INT_MAX, INT_MIN, parseQuantity, rint } from './units.ts';

export type ValueResult = { readonly ok: true; readonly value: KnobValue } | { readonly ok: false; readonly reason: string };

/**
 * pg_settings shows a real with printf's %g: six significant digits. A real with more digits
 * would never read back equal, so reals are normalized to six significant digits. (Ties are
 * decided by JavaScript's toPrecision; the normalized value itself has at most six digits, so
 * PostgreSQL shows it unchanged.)
 */
export function normalizeReal(value: number): number {
  return Number(value.toPrecision(6));
}

/**
 * PostgreSQL's parse_bool: true/false, yes/no, on/off, 1/0, case-insensitive, and any unique
 * prefix of them ('t', 'of'); 'o' alone is ambiguous.
 */
export function parsePgBool(text: string): boolean | undefined {
  const v = text.trim().toLowerCase();
  if (v === '') return undefined;
  const prefixOf = (word: string, minLength = 1) => v.length >= minLength && word.startsWith(v);
  if (prefixOf('true') || prefixOf('yes') || prefixOf('on', 2) || v === '1') return true;
  if (prefixOf('false') || prefixOf('no') || prefixOf('off', 2) || v === '0') return false;
  return undefined;
}

function describeExpected(knob: Knob): string {
  switch (knob.type) {
    case 'integer':
      return knob.unit ? `an integer in ${knob.unit}, or a value with a unit` : 'an integer without a unit';
    case 'real':
      return knob.unit ? `a number in ${knob.unit}, or a value with a unit` : 'a number without a unit';
    case 'bool':
      return 'on or off';
    case 'enum':
      return `one of ${knob.values.join(', ')}`;
  }
}

/**
 * Parses a value for `knob` the way PostgreSQL accepts it: a number in the pg_settings unit, a
 * string with a unit ('64MB', '1GB', '200ms', '5min'), a plain number string ('1.1'), on/off
 * for bools, an enum value (case-insensitive). Returns the normalized value, or why it is
 * refused. Bounds are not checked here.
 */
export function parseValue(knob: Knob, raw: ChangeValue): ValueResult {
  const refuse = (reason: string): ValueResult => ({ ok: false, reason: `${reason}; expected ${describeExpected(knob)}` });
  switch (knob.type) {
    case 'integer':
    case 'real': {
      let value: number;
      if (typeof raw === 'number') {
        if (!Number.isFinite(raw)) return refuse('not a finite number');
        value = raw;
        // A bare number is in the pg unit; an integer knob rounds it as PostgreSQL rounds '4096.5'.
        if (knob.type === 'integer') {
          value = rint(raw);
          if (value > INT_MAX || value < INT_MIN) return refuse('the value exceeds the integer range');
        }
      } else if (typeof raw === 'string') {
        const r = parseQuantity(raw, knob.unit, knob.type);
        if (!r.ok) return refuse(r.reason);
        value = r.value;
      } else {
        return refuse(`a ${raw === null ? 'null' : typeof raw} is not a value`);
      }
      if (knob.type === 'real') value = normalizeReal(value);
      // -0 would print as "0" but is not the same number for Object.is.
      return { ok: true, value: value === 0 ? 0 : value };
    }
    case 'bool': {
      let b: boolean | undefined;
      if (typeof raw === 'boolean') b = raw;
      else if (typeof raw === 'number') b = raw === 1 ? true : raw === 0 ? false : undefined;
      else if (typeof raw === 'string') b = parsePgBool(raw);
      if (b === undefined) return refuse('not a Boolean value');
      return { ok: true, value: b ? 'on' : 'off' };
    }
    case 'enum': {
      if (typeof raw !== 'string' && typeof raw !== 'number' && typeof raw !== 'boolean') return refuse('not a value');
      // PostgreSQL matches enum names case-insensitively (config_enum_lookup_by_name).
      const v = String(raw).trim().toLowerCase();
      if (knob.values.includes(v)) return { ok: true, value: v };
      const alias = knob.aliases[v];
      if (alias !== undefined) return { ok: true, value: alias };
      return refuse('not an allowed value');
    }
  }
}

/** `pg_settings.unit` with "no unit" spelled one way. */
export function rowUnit(row: Pick<PgSettingRow, 'unit'>): string | null {
  return row.unit === null || row.unit === '' ? null : row.unit;
}

/**
 * The normalized value of `knob` from its pg_settings row. Throws when the row does not
 * describe the knob the catalog knows (another name, type or unit): the agent must not guess.
 */
export function parseSetting(knob: Knob, row: PgSettingRow): KnobValue {
  if (row.name !== knob.name) throw new Error(`pg_settings row is for ${row.name}, not ${knob.name}`);
  if (row.vartype !== knob.type) {
    throw new Error(`${knob.name}: pg_settings reports type ${row.vartype}, the catalog expects ${knob.type}`);
  }
  if (rowUnit(row) !== knob.unit) {
    throw new Error(`${knob.name}: pg_settings reports unit ${rowUnit(row) ?? '(none)'}, the catalog expects ${knob.unit ?? '(none)'}`);
  }
  switch (knob.type) {
    case 'integer': {
      if (!/^-?\d+$/.test(row.setting)) throw new Error(`${knob.name}: pg_settings shows a non-integer setting "${row.setting}"`);
      return Number(row.setting);
    }
    case 'real': {
      const n = Number(row.setting);
      if (row.setting.trim() === '' || !Number.isFinite(n))
        throw new Error(`${knob.name}: pg_settings shows a non-numeric setting "${row.setting}"`);
      return n;
    }
    case 'bool': {
      if (row.setting !== 'on' && row.setting !== 'off') throw new Error(`${knob.name}: pg_settings shows "${row.setting}", not on/off`);
      return row.setting;
    }
    case 'enum':
      return row.setting;
  }
}

/**
 * A normalized value as a bare string: the form pg_settings.setting shows, and the form cloud
 * parameter APIs (parameter groups, server configurations) take. Throws on a value of the wrong
 * kind for the knob: callers pass values that came out of parseValue or validateChange.
 */
export function formatSettingValue(knob: Knob, value: KnobValue): string {
  switch (knob.type) {
    case 'integer':
      if (typeof value !== 'number' || !Number.isSafeInteger(value))
        throw new TypeError(`${knob.name} needs an integer, got ${String(value)}`);
      return String(value);
    case 'real':
      if (typeof value !== 'number' || !Number.isFinite(value))
        throw new TypeError(`${knob.name} needs a finite number, got ${String(value)}`);
      // String() may use an exponent ('1e-7'); PostgreSQL's strtod reads that too.
      return String(value);
    case 'bool':
      if (value !== 'on' && value !== 'off') throw new TypeError(`${knob.name} needs on or off, got ${String(value)}`);
      return value;
    case 'enum':
      if (typeof value !== 'string' || !knob.values.includes(value)) {
        throw new TypeError(`${knob.name} needs one of ${knob.values.join(', ')}, got ${String(value)}`);
      }
      return value;
  }
}

/**
 * The SQL literal to put after `ALTER SYSTEM SET <name> =`: the normalized value as a quoted
 * string, which PostgreSQL accepts for every type. Numbers carry no unit, so they are read in
 * the pg_settings unit, exactly as the normalized value is.
 */
export function formatForAlterSystem(knob: Knob, value: KnobValue): string {
  return `'${formatSettingValue(knob, value).replaceAll("'", "''")}'`;
}

/** A normalized value for messages: "4GB", "200ms", "1.1", "on". */
export function describeValue(knob: Knob, value: KnobValue): string {
  return typeof value === 'number' ? formatQuantity(value, knob.unit) : value;
}

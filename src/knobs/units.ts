// Numbers with units, parsed exactly the way PostgreSQL 15 parses a GUC value (guc.c:
// parse_int, parse_real, convert_to_base_unit), so that the number the agent computes is the
// number pg_settings.setting shows after the value is applied. Also the reverse: showing a
// number in a unit to people ("4GB", "5min"). The one home of the byte units (KiB, MiB, GiB,
// the 8 kB page) outside the targets.

/** Every unit pg_settings reports for a memory or time setting. */
export type PgBaseUnit = 'B' | 'kB' | '8kB' | 'MB' | 'ms' | 's' | 'min';

/** Bytes in a kibibyte, a mebibyte, a gibibyte: PostgreSQL's kB, MB and GB. */
export const KiB = 1024;
export const MiB = 1024 * KiB;
export const GiB = 1024 * MiB;
const TiB = 1024 * GiB;

/** PostgreSQL's page (BLCKSZ, 8 kB in default builds): the unit of shared_buffers, and of the
 * blocks pg_stat_statements and the statistics views count. */
export const PAGE_BYTES = 8192;

interface Conversion {
  readonly unit: string;
  readonly multiplier: number;
}

/** Each memory unit PostgreSQL reads, in bytes, largest first. */
const MEMORY_UNIT_BYTES: ReadonlyArray<readonly [string, number]> = [
  ['TB', TiB],
  ['GB', GiB],
  ['MB', MiB],
  ['kB', KiB],
  ['B', 1],
];
/** Each time unit PostgreSQL reads, in microseconds, longest first. */
const TIME_UNIT_MICROSECONDS: ReadonlyArray<readonly [string, number]> = [
  ['d', 86_400_000_000],
  ['h', 3_600_000_000],
  ['min', 60_000_000],
  ['s', 1_000_000],
  ['ms', 1000],
  ['us', 1],
];

/**
 * PostgreSQL's conversion table for a base unit (guc.c's memory_unit_conversion_table and
 * time_unit_conversion_table), largest unit first. Each multiplier is one division of two whole
 * numbers, as guc.c writes each (1.0 / (1000 * 60), (1024.0 * 1024.0) / (BLCKSZ / 1024), …), so
 * both are the same correctly rounded double and the results are bit-identical. GUC_UNIT_BLOCKS
 * and GUC_UNIT_XBLOCKS are both 8 kB with default builds, and pg_settings shows both as '8kB'.
 */
function conversionsFor(base: PgBaseUnit): readonly Conversion[] {
  const [table, baseSize] = isMemoryUnit(base)
    ? [MEMORY_UNIT_BYTES, bytesPerUnit(base as 'B' | 'kB' | '8kB' | 'MB')]
    : [TIME_UNIT_MICROSECONDS, 1000 * msPerUnit(base as 'ms' | 's' | 'min')];
  return table.map(([unit, size]) => ({ unit, multiplier: size / baseSize }));
}

export function isPgBaseUnit(unit: string | null | undefined): unit is PgBaseUnit {
  return unit === 'B' || unit === 'kB' || unit === '8kB' || unit === 'MB' || unit === 'ms' || unit === 's' || unit === 'min';
}

export function isMemoryUnit(unit: PgBaseUnit): boolean {
  return unit === 'B' || unit === 'kB' || unit === '8kB' || unit === 'MB';
}

/** The units a value of this base unit may be written in, as PostgreSQL lists them in its hint. */
export function acceptedUnits(base: PgBaseUnit): string[] {
  return conversionsFor(base)
    .map((c) => c.unit)
    .reverse();
}

/**
 * C's rint() in the default rounding mode: to the nearest integer, ties to even. PostgreSQL
 * rounds integer settings with it, so 2.5 becomes 2 and 3.5 becomes 4.
 */
export function rint(x: number): number {
  if (!Number.isFinite(x)) return x;
  const fraction = Math.abs(x % 1);
  if (fraction === 0.5) return 2 * Math.round(x / 2);
  return Math.round(x);
}

export const INT_MIN = -2147483648;
export const INT_MAX = 2147483647;

export type ParseResult = { readonly ok: true; readonly value: number } | { readonly ok: false; readonly reason: string };

// C's isspace() in the "C" locale.
const SPACE = '[ \\t\\n\\v\\f\\r]';
// A decimal number the way strtod reads one, without the forms we refuse (hex, inf, nan).
const NUMBER_WITH_REST = new RegExp(`^${SPACE}*([+-]?(?:\\d+(?:\\.\\d*)?|\\.\\d+)(?:[eE][+-]?\\d+)?)${SPACE}*(.*?)${SPACE}*$`, 's');

/**
 * Parses `text` as PostgreSQL parses the value of a setting whose base unit is `base` (null:
 * no unit) and type is integer or real. Integers are rounded to the nearest unit, ties to even,
 * as PostgreSQL does; reals keep their value.
 *
 * Deliberately stricter than PostgreSQL in two places, because both read as something other
 * than what they look like: hexadecimal ('0x100') and, for integers, a leading zero ('010',
 * which PostgreSQL reads as octal 8). Also refuses 'inf' and 'nan'.
 */
export function parseQuantity(text: string, base: PgBaseUnit | null, kind: 'integer' | 'real'): ParseResult {
  if (/^\s*[+-]?0[xX]/.test(text)) {
    return { ok: false, reason: 'hexadecimal numbers are not accepted' };
  }
  const m = NUMBER_WITH_REST.exec(text);
  if (!m) return { ok: false, reason: 'not a number' };
  const numberText = m[1] ?? '';
  const unitText = m[2] ?? '';
  if (kind === 'integer' && /^[+-]?0\d+$/.test(numberText)) {
    return { ok: false, reason: 'a leading zero is ambiguous (PostgreSQL would read it as an octal number)' };
  }
  let value = Number(numberText);
  if (!Number.isFinite(value)) return { ok: false, reason: 'the number is out of range' };

  if (unitText !== '') {
    if (base === null) return { ok: false, reason: 'this parameter takes no unit' };
    const conversions = conversionsFor(base);
    const index = conversions.findIndex((c) => c.unit === unitText);
    const conversion = conversions[index];
    if (conversion === undefined) {
      const hint = acceptedUnits(base)
        .map((u) => `"${u}"`)
        .join(', ');
      const caseless = conversions.find((c) => c.unit.toLowerCase() === unitText.toLowerCase());
      const didYouMean = caseless ? ` (units are case-sensitive: "${caseless.unit}")` : '';
      return { ok: false, reason: `unknown unit "${unitText}"${didYouMean}; valid units are ${hint}` };
    }
    value = value * conversion.multiplier;
    // A fractional value such as "30.1GB" is first rounded to a whole number of the next
    // smaller unit, when there is one: convert_to_base_unit() does exactly this.
    const next = conversions[index + 1];
    if (next !== undefined) value = rint(value / next.multiplier) * next.multiplier;
  }

  if (kind === 'real') return { ok: true, value };
  value = rint(value);
  if (value > INT_MAX || value < INT_MIN) return { ok: false, reason: 'the value exceeds the integer range' };
  return { ok: true, value };
}

/** Bytes in one of `unit` (memory units only). */
export function bytesPerUnit(unit: 'B' | 'kB' | '8kB' | 'MB'): number {
  switch (unit) {
    case 'B':
      return 1;
    case 'kB':
      return KiB;
    case '8kB':
      return PAGE_BYTES;
    case 'MB':
      return MiB;
  }
}

/** Milliseconds in one of `unit` (time units only). */
function msPerUnit(unit: 'ms' | 's' | 'min'): number {
  return unit === 'ms' ? 1 : unit === 's' ? 1000 : 60_000;
}

function trimDecimals(n: number, decimals: number): string {
  return n.toFixed(decimals).replace(/\.?0+$/, '');
}

/**
 * A value in `unit` as people read it, with PostgreSQL's unit names: 4194304 kB → "4GB",
 * 300 s → "5min". Memory that is not a whole number of the largest fitting unit is shown with
 * two decimals ("6.4GB"); unitless values as they are.
 */
export function formatQuantity(value: number, unit: string | null): string {
  if (!isPgBaseUnit(unit) || !Number.isFinite(value)) return String(value);
  if (isMemoryUnit(unit)) {
    const bytes = value * bytesPerUnit(unit as 'B' | 'kB' | '8kB' | 'MB');
    const sizes = MEMORY_UNIT_BYTES;
    const abs = Math.abs(bytes);
    const exact = sizes.find(([, size]) => abs >= size && abs % size === 0);
    const fitting = sizes.find(([, size]) => abs >= size);
    if (exact && (!fitting || exact[1] === fitting[1])) return `${bytes / exact[1]}${exact[0]}`;
    if (!fitting) return `${bytes}B`;
    return `${trimDecimals(bytes / fitting[1], 2)}${fitting[0]}`;
  }
  const ms = value * msPerUnit(unit as 'ms' | 's' | 'min');
  // Shown in whole milliseconds at the finest: 2.5 ms stays "2.5ms".
  const times = TIME_UNIT_MICROSECONDS.filter(([unit]) => unit !== 'us').map(([unit, us]) => [unit, us / 1000] as const);
  const abs = Math.abs(ms);
  const exact = times.find(([, size]) => abs >= size && abs % size === 0);
  if (exact) return `${ms / exact[1]}${exact[0]}`;
  return `${trimDecimals(ms, 3)}ms`;
}

/** Converts a setting's value in its unit to bytes (memory) or milliseconds (time); unitless unchanged. */
export function toBaseQuantity(value: number, unit: string | null): number {
  if (!isPgBaseUnit(unit)) return value;
  if (isMemoryUnit(unit)) return value * bytesPerUnit(unit as 'B' | 'kB' | '8kB' | 'MB');
  return value * msPerUnit(unit as 'ms' | 's' | 'min');
}

/** Bytes as people read them, in binary units: "16 GiB", "1.5 GiB", "123 MiB" (one decimal under
 * 10, none when it is 0). The one byte formatter: machine descriptions, bounds, pages. */
export function formatBytes(bytes: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let value = bytes;
  let unit = 0;
  while (Math.abs(value) >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit++;
  }
  return `${trimDecimals(value, Math.abs(value) >= 10 || unit === 0 ? 0 : 1)} ${units[unit]}`;
}

// Converting values as `pg` hands them over into typed numbers. `pg` returns int8 and numeric as
// strings (they may exceed 2^53) and float8/int4/oid as numbers. Counters become JS numbers:
// exact below 2^53 (≈ 9·10^15: years of any counter on any server), and beyond that off by
// far less than one part in 10^15, which no delta or rate notices. Anything that is not a
// number at all is a bug or a surprise from the server, so it throws and names the field.

export type Row = Record<string, unknown>;

export class RowParseError extends Error {
  override name = 'RowParseError';
}

function fail(field: string, value: unknown, what: string): never {
  const shown = typeof value === 'string' ? JSON.stringify(value.slice(0, 40)) : String(value);
  throw new RowParseError(`${field}: expected ${what}, got ${shown}`);
}

/** A finite number from a number or a decimal string (int8, numeric, float8). */
export function toNumber(value: unknown, field: string): number {
  if (typeof value === 'number') {
    if (Number.isFinite(value)) return value;
  } else if (typeof value === 'string' && value.length > 0) {
    // Number() accepts '1e3' and '0x10' as well, but PostgreSQL never prints those for these types.
    const n = Number(value);
    if (Number.isFinite(n)) return n;
  } else if (typeof value === 'bigint') {
    return Number(value);
  }
  return fail(field, value, 'a number');
}

/** A cumulative counter: a non-negative number. */
export function toCount(value: unknown, field: string): number {
  const n = toNumber(value, field);
  if (n < 0) fail(field, value, 'a non-negative counter');
  return n;
}

export function toCountOrNull(value: unknown, field: string): number | null {
  return value === null || value === undefined ? null : toCount(value, field);
}

export function toInt(value: unknown, field: string): number {
  const n = toNumber(value, field);
  if (!Number.isSafeInteger(n)) fail(field, value, 'an integer');
  return n;
}

export function toBoolOrNull(value: unknown, field: string): boolean | null {
  if (value === null || value === undefined) return null;
  if (typeof value === 'boolean') return value;
  return fail(field, value, 'a boolean');
}

export function toText(value: unknown, field: string): string {
  if (typeof value === 'string') return value;
  return fail(field, value, 'a string');
}

export function toTextOrNull(value: unknown, field: string): string | null {
  return value === null || value === undefined ? null : toText(value, field);
}

/** A timestamptz (a Date from `pg`) as an ISO string, the form that snapshots and reports keep. */
export function toIsoOrNull(value: unknown, field: string): string | null {
  if (value === null || value === undefined) return null;
  if (value instanceof Date && !Number.isNaN(value.getTime())) return value.toISOString();
  if (typeof value === 'string') {
    const t = Date.parse(value);
    if (!Number.isNaN(t)) return new Date(t).toISOString();
  }
  return fail(field, value, 'a timestamp');
}

export function toIso(value: unknown, field: string): string {
  return toIsoOrNull(value, field) ?? fail(field, value, 'a timestamp');
}

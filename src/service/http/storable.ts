// What the protocol's schemas allow but PostgreSQL cannot store, refused with a 400 that names the
// field instead of failing in the storage: NUL characters in text, and times outside PostgreSQL's
// range (year 0, offsets beyond ±15:59). Times are normalized to UTC before they are stored.
import { badRequest, formatPath } from './errors.ts';

/** The path of the first string holding a NUL character, or null. */
function findNul(value: unknown, path: PropertyKey[]): PropertyKey[] | null {
  if (typeof value === 'string') return value.includes('\u0000') ? path : null;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = findNul(value[i], [...path, i]);
      if (found) return found;
    }
    return null;
  }
  if (typeof value === 'object' && value !== null) {
    for (const [key, child] of Object.entries(value)) {
      const found = key.includes('\u0000') ? [...path, key] : findNul(child, [...path, key]);
      if (found) return found;
    }
  }
  return null;
}

/** Refuses NUL characters anywhere in a body. `rawJson` is the body's text: JSON can only carry
 * a NUL as the escape \u0000, so the walk runs only for the bodies that have one. */
export function refuseNul(rawJson: string | null, value: unknown, root = 'body'): void {
  if (rawJson !== null && !rawJson.includes('\\u0000')) return;
  const path = findNul(value, [root]);
  if (path) throw badRequest(`${formatPath(path)}: text must not contain NUL characters (\\u0000)`);
}

/** An ISO time as UTC, or a 400 naming the field when PostgreSQL could not store it. */
export function storableTime(value: string, field: string): string {
  const date = new Date(value);
  const year = date.getUTCFullYear();
  if (Number.isNaN(date.getTime()) || year < 1 || year > 9999) {
    throw badRequest(`${field}: expected a time between the years 1 and 9999, with an offset of at most ±15:59`);
  }
  const offset = /([+-])(\d\d):(\d\d)$/.exec(value);
  if (offset && Number(offset[2]) > 15) throw badRequest(`${field}: expected a time with an offset of at most ±15:59`);
  return date.toISOString();
}

// What the schemas allow but PostgreSQL cannot store, refused with a 400 that names the field
// instead of failing in the storage: NUL characters and lone surrogates (text that is not valid
// Unicode) in text, and times outside PostgreSQL's range (year 0, offsets beyond ±15:59). Times
// are normalized to UTC before they are stored.
import { badRequest, formatPath } from './errors.ts';

/** Why PostgreSQL cannot store `text`, or null when it can. */
function unstorable(text: string): string | null {
  if (text.includes('\u0000')) return 'text must not contain NUL characters (\\u0000)';
  if (!text.isWellFormed()) return 'text must be valid Unicode: it holds a lone surrogate (an escape \\ud800 to \\udfff without its pair)';
  return null;
}

/** The path of the first string PostgreSQL cannot store, and why; or null. */
function findUnstorable(value: unknown, path: PropertyKey[]): { path: PropertyKey[]; problem: string } | null {
  if (typeof value === 'string') {
    const problem = unstorable(value);
    return problem ? { path, problem } : null;
  }
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = findUnstorable(value[i], [...path, i]);
      if (found) return found;
    }
    return null;
  }
  if (typeof value === 'object' && value !== null) {
    for (const [key, child] of Object.entries(value)) {
      const problem = unstorable(key);
      const found = problem ? { path: [...path, key], problem } : findUnstorable(child, [...path, key]);
      if (found) return found;
    }
  }
  return null;
}

/** JSON carries a NUL or a lone surrogate only as an escape (\u0000, \ud800 to \udfff): the walk
 * runs only for the bodies that have one. */
const SUSPECT_ESCAPE = /\\u(0000|[dD][89a-fA-F])/;

/** Refuses text PostgreSQL cannot store anywhere in a body, naming the field. `rawJson` is the
 * body's text, when there is one, to skip the walk for the bodies that cannot hold such text. */
export function refuseUnstorableText(rawJson: string | null, value: unknown, root = 'body'): void {
  if (rawJson !== null && !SUSPECT_ESCAPE.test(rawJson)) return;
  const found = findUnstorable(value, [root]);
  if (found) throw badRequest(`${formatPath(found.path)}: ${found.problem}`);
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

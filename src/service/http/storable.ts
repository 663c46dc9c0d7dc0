// What the schemas allow but PostgreSQL cannot store, refused with a 400 that names the field
// instead of failing in the storage: NUL characters and lone surrogates (text that is not valid
// Unicode) in text, and times outside PostgreSQL's range (year 0, offsets beyond ±15:59). Times
// are normalized to UTC before they are stored. The check runs after authentication and after
// the schema, on what the schema let through.
import type { FastifyRequest } from 'fastify';
import type { z } from 'zod';
import { rawBodyOf } from './body.ts';
import { badRequest, formatPath, parseOr400 } from './errors.ts';

/** Why PostgreSQL cannot store `text`, or null when it can. */
function unstorable(text: string): string | null {
  if (text.includes('\u0000')) return 'text must not contain NUL characters (\\u0000)';
  if (!text.isWellFormed()) return 'text must be valid Unicode: it holds a lone surrogate (an escape \\ud800 to \\udfff without its pair)';
  return null;
}

interface Frame {
  /** The object's keys; null for an array, whose keys are its indexes. */
  keys: readonly string[] | null;
  values: readonly unknown[];
  /** The index of the next child to visit. */
  next: number;
}

/** The path of the first string (or key) PostgreSQL cannot store, and why; or null. Depth first
 * in document order, with a stack instead of recursion (no depth overflows it) and no path kept
 * on the way down: the offender's path is read off the stack once, so the walk is linear. */
export function findUnstorable(root: unknown): { path: PropertyKey[]; problem: string } | null {
  const frames: Frame[] = [];
  const enter = (value: unknown): string | null => {
    if (typeof value === 'string') return unstorable(value);
    if (Array.isArray(value)) frames.push({ keys: null, values: value, next: 0 });
    else if (typeof value === 'object' && value !== null) frames.push({ keys: Object.keys(value), values: Object.values(value), next: 0 });
    return null;
  };
  let problem = enter(root);
  while (problem === null && frames.length > 0) {
    const frame = frames[frames.length - 1]!;
    if (frame.next === frame.values.length) {
      frames.pop();
      continue;
    }
    const i = frame.next++;
    problem = (frame.keys && unstorable(frame.keys[i]!)) ?? enter(frame.values[i]);
  }
  if (problem === null) return null;
  return { path: frames.map((f) => (f.keys ? f.keys[f.next - 1]! : f.next - 1)), problem };
}

/** JSON carries a NUL or a lone surrogate only as an escape (\u0000, \ud800 to \udfff): the walk
 * runs only for the bodies that have one. */
const SUSPECT_ESCAPE = /\\u(0000|[dD][89a-fA-F])/;

/** Refuses text PostgreSQL cannot store anywhere in a body, naming the field. `rawJson` is the
 * body's text, when there is one, to skip the walk for the bodies that cannot hold such text. */
export function refuseUnstorableText(rawJson: string | null, value: unknown, root = 'body'): void {
  if (rawJson !== null && !SUSPECT_ESCAPE.test(rawJson)) return;
  const found = findUnstorable(value);
  if (found) throw badRequest(`${formatPath([root, ...found.path])}: ${found.problem}`);
}

/** A body validated with its schema, then refused if what the schema kept holds text PostgreSQL
 * cannot store: the walk runs only over what passed validation. `fallback` stands for no body. */
export function parseStorableBody<S extends z.ZodType>(schema: S, request: FastifyRequest, fallback?: unknown): z.infer<S> {
  const body = parseOr400(schema, request.body ?? fallback, 'body');
  refuseUnstorableText(rawBodyOf(request)?.text ?? null, body);
  return body;
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

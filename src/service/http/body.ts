// The JSON body parser of the APIs: gzip or plain, at most MAX_BODY_BYTES after decompression
// (so a zip bomb stops at the limit), nested at most MAX_JSON_DEPTH deep with at most
// MAX_JSON_ELEMENTS elements, and every failure a 4xx that says what was wrong. Bodies are parsed
// before the login route knows who is asking: every limit is checked in one pass over the text,
// before JSON.parse builds anything, so no body costs more than that pass.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { gunzipSync } from 'node:zlib';
import { MAX_BODY_BYTES, MAX_JSON_DEPTH, MAX_JSON_ELEMENTS } from '../../protocol/v1.ts';
import { HttpError, badRequest } from './errors.ts';

export interface JsonLimits {
  depth: number;
  elements: number;
}

export interface JsonShapeProblem {
  code: 'bad_request' | 'payload_too_large';
  message: string;
  /** How many characters the check read before it refused: the work it did. */
  read: number;
}

const OPEN_ARRAY = 0x5b;
const OPEN_OBJECT = 0x7b;
const CLOSE_ARRAY = 0x5d;
const CLOSE_OBJECT = 0x7d;
const COMMA = 0x2c;
const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/**
 * Why JSON text nests too deep or holds too many elements, or null: one pass that stops at the
 * first character past a limit. Elements are counted as containers and commas outside strings
 * (at least the number of items and members). Text that is not JSON may pass, for JSON.parse to
 * refuse: JSON.parse stops at the first error, and up to it the count is exact.
 */
export function jsonShapeProblem(
  text: string,
  limits: JsonLimits = { depth: MAX_JSON_DEPTH, elements: MAX_JSON_ELEMENTS },
): JsonShapeProblem | null {
  let depth = 0;
  let elements = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      // Skip the string: to its closing quote, stepping over escapes.
      for (i++; i < text.length; i++) {
        const s = text.charCodeAt(i);
        if (s === BACKSLASH) i++;
        else if (s === QUOTE) break;
      }
    } else if (c === OPEN_ARRAY || c === OPEN_OBJECT) {
      if (++depth > limits.depth) {
        return { code: 'bad_request', message: `the body nests deeper than ${limits.depth} levels`, read: i + 1 };
      }
      if (++elements > limits.elements) return tooMany(limits, i);
    } else if (c === CLOSE_ARRAY || c === CLOSE_OBJECT) {
      depth--;
    } else if (c === COMMA && ++elements > limits.elements) {
      return tooMany(limits, i);
    }
  }
  return null;
}

const tooMany = (limits: JsonLimits, i: number): JsonShapeProblem => ({
  code: 'payload_too_large',
  message: `the body holds more than ${limits.elements} elements (array items and object members)`,
  read: i + 1,
});

export interface RawBody {
  /** The body as it came, gzip-compressed when `gzip`. */
  received: Buffer;
  gzip: boolean;
  /** The JSON text. */
  text: string;
}

const rawBodies = new WeakMap<FastifyRequest, RawBody>();

/** The body of a request as it came on the wire (the agent API keeps reports as sent). */
export function rawBodyOf(request: FastifyRequest): RawBody | undefined {
  return rawBodies.get(request);
}

/** A route's own body limit (the login's is small), or MAX_BODY_BYTES. */
function bodyLimitOf(request: FastifyRequest): number {
  return Math.min(request.routeOptions.bodyLimit, MAX_BODY_BYTES);
}

function decode(request: FastifyRequest, body: Buffer): Buffer {
  const encoding = (request.headers['content-encoding'] ?? 'identity').trim().toLowerCase();
  if (encoding === 'identity' || encoding === '') return body;
  if (encoding !== 'gzip') {
    throw new HttpError('unsupported_media_type', `Content-Encoding "${encoding.slice(0, 40)}" is not supported: send gzip or no encoding`);
  }
  const limit = bodyLimitOf(request);
  try {
    // Synchronous: a report inflates in well under a millisecond, less than the thread-pool
    // round trip of the asynchronous call; the output limit bounds the worst case.
    return gunzipSync(body, { maxOutputLength: limit });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE') {
      throw new HttpError('payload_too_large', `the body is larger than ${limit} bytes once decompressed`);
    }
    throw badRequest('the body is not valid gzip (Content-Encoding: gzip)');
  }
}

export interface JsonBodyOptions {
  /** Refuse `__proto__` and `constructor.prototype` keys (Fastify's secure-json-parse). The agent
   * API does without: its schemas are strict objects, which refuse any key they do not name,
   * and scanning every report for those words costs more than the rest of its parsing. */
  refusePrototypeKeys: boolean;
}

/** Replaces the instance's parsers with one: JSON, optionally gzipped. Other types get 415. */
export function useJsonBodies(app: FastifyInstance, options: JsonBodyOptions): void {
  const secureParse = app.getDefaultJsonParser('error', 'error');
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'buffer', bodyLimit: MAX_BODY_BYTES }, (request, body, done) => {
    const received = body as Buffer;
    let buffer: Buffer;
    try {
      buffer = decode(request, received);
    } catch (err) {
      return done(err as Error, undefined);
    }
    if (buffer.length === 0) return done(badRequest('the body is empty: a JSON object is expected'), undefined);
    const text = buffer.toString('utf8');
    const shape = jsonShapeProblem(text);
    if (shape) return done(new HttpError(shape.code, shape.message), undefined);
    rawBodies.set(request, { received, gzip: buffer !== received, text });
    if (options.refusePrototypeKeys) {
      void secureParse(request, text, (err, value) => {
        if (err) done(badRequest(`the body is not valid JSON: ${err.message}`), undefined);
        else done(null, value);
      });
      return;
    }
    try {
      done(null, JSON.parse(text) as unknown);
    } catch (err) {
      done(badRequest(`the body is not valid JSON: ${(err as Error).message}`), undefined);
    }
  });
}

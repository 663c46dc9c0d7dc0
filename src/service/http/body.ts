// The JSON body parser of the APIs: gzip or plain, at most MAX_BODY_BYTES after decompression
// (so a zip bomb stops at the limit), and every failure a 4xx that says what was wrong.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { gunzipSync } from 'node:zlib';
import { MAX_BODY_BYTES } from '../../protocol/v1.ts';
import { HttpError, badRequest } from './errors.ts';

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

function decode(request: FastifyRequest, body: Buffer): Buffer {
  const encoding = (request.headers['content-encoding'] ?? 'identity').trim().toLowerCase();
  if (encoding === 'identity' || encoding === '') return body;
  if (encoding !== 'gzip') {
    throw new HttpError('unsupported_media_type', `Content-Encoding "${encoding.slice(0, 40)}" is not supported: send gzip or no encoding`);
  }
  try {
    // Synchronous: a report inflates in well under a millisecond, less than the thread-pool
    // round trip of the asynchronous call; the output limit bounds the worst case.
    return gunzipSync(body, { maxOutputLength: MAX_BODY_BYTES });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE') {
      throw new HttpError('payload_too_large', `the body is larger than ${MAX_BODY_BYTES} bytes once decompressed`);
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

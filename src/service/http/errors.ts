// Errors as the protocol spells them: `{ "error": { "code", "message" } }`, with a message a
// person can act on. Validation messages name each field by its path and say what was expected.
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import type { z } from 'zod';
import type { ErrorCode, ErrorResponse } from '../../protocol/v1.ts';

export class HttpError extends Error {
  override name = 'HttpError';
  readonly status: number;
  readonly code: ErrorCode;
  constructor(status: number, code: ErrorCode, message: string) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export const badRequest = (message: string) => new HttpError(400, 'bad_request', message);
export const notFound = (message: string) => new HttpError(404, 'not_found', message);

/** `metrics.statements.top[3].calls` */
export function formatPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const part of path) {
    if (typeof part === 'number') out += `[${part}]`;
    else out += out === '' ? String(part) : `.${String(part)}`;
  }
  return out;
}

const MAX_ISSUES_SHOWN = 5;

/** One line per issue, e.g. `body.seq: Invalid input: expected number, received string`. */
export function formatZodError(error: z.ZodError, where: string): string {
  const issues = error.issues.slice(0, MAX_ISSUES_SHOWN).map((issue) => {
    const path = formatPath([where, ...issue.path]);
    return `${path}: ${issue.message}`;
  });
  const more = error.issues.length - MAX_ISSUES_SHOWN;
  if (more > 0) issues.push(`and ${more} more problem(s)`);
  return issues.join('; ');
}

/** Parses `value` with `schema`, or throws a 400 that names every wrong field. */
export function parseOr400<S extends z.ZodType>(schema: S, value: unknown, where: string): z.infer<S> {
  const result = schema.safeParse(value);
  if (!result.success) throw badRequest(formatZodError(result.error, where));
  return result.data;
}

export function errorBody(code: ErrorCode, message: string): ErrorResponse {
  return { error: { code, message } };
}

/** Maps anything thrown in a route to a status, a code and a message that is safe to show. */
export function describeError(err: unknown): { status: number; code: ErrorCode; message: string; unexpected: boolean } {
  if (err instanceof HttpError) return { status: err.status, code: err.code, message: err.message, unexpected: false };
  const fastifyError = err as Partial<FastifyError>;
  switch (fastifyError.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return { status: 413, code: 'payload_too_large', message: fastifyError.message ?? 'request body is too large', unexpected: false };
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return { status: 415, code: 'unsupported_media_type', message: 'the body must be JSON: send Content-Type: application/json', unexpected: false };
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return { status: 400, code: 'bad_request', message: 'the body is empty: a JSON object is expected', unexpected: false };
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return { status: 400, code: 'bad_request', message: 'the body is not as long as its Content-Length header says', unexpected: false };
  }
  // A value the schemas let through but the storage refused (SQLSTATE class 22, data exception):
  // the request's fault, not the service's. The database's message is not shown (it quotes values).
  const sqlState = (err as { code?: unknown }).code;
  if (typeof sqlState === 'string' && /^22[0-9A-Z]{3}$/.test(sqlState)) {
    return { status: 400, code: 'bad_request', message: 'a value in the request cannot be stored (out of range, or not representable)', unexpected: false };
  }
  const status = fastifyError.statusCode;
  if (typeof status === 'number' && status >= 400 && status < 500) {
    const code: ErrorCode = status === 401 ? 'unauthorized' : status === 403 ? 'forbidden' : status === 404 ? 'not_found' : status === 413 ? 'payload_too_large' : status === 415 ? 'unsupported_media_type' : status === 429 ? 'rate_limited' : 'bad_request';
    return { status, code, message: fastifyError.message ?? 'bad request', unexpected: false };
  }
  return { status: 500, code: 'internal', message: 'the service failed to handle this request; it has been logged', unexpected: true };
}

/** The JSON error handler of the agent API and the people's API. */
export function jsonErrorHandler(err: unknown, request: FastifyRequest, reply: FastifyReply): void {
  const { status, code, message, unexpected } = describeError(err);
  if (unexpected) request.log.error({ err: safeErrorForLog(err), url: request.routeOptions.url }, 'request failed');
  void reply.code(status).type('application/json; charset=utf-8').send(errorBody(code, message));
}

/** Error details for the log: name, code and stack only. Messages of driver errors can quote
 * the values of a statement, and those may hold a secret. */
export function safeErrorForLog(err: unknown): { name: string; code?: unknown; stack?: string | undefined } {
  if (err instanceof Error) return { name: err.name, code: (err as { code?: unknown }).code, stack: err.stack?.split('\n').slice(1, 6).join('\n') };
  return { name: typeof err };
}

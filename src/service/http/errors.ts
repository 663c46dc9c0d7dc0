// Errors on the wire: `{ "error": { "code", "message" } }`, with a message a person can act on.
// Validation messages name each field by its path and say what was expected. Every code the
// service answers with has one status, in one table (ERROR_STATUS), so the two never disagree.
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import type { z } from 'zod';
import { CodedError, type ErrorCode } from '../../protocol/v1.ts';
import { ServiceError, safeErrorForLog, type ServiceErrorKind } from '../errors.ts';

/** The people's API's own codes (docs/service.md); the agent API's are the protocol's ErrorCode. */
export type PeopleErrorCode =
  | 'bad_request'
  | 'unauthorized'
  | 'forbidden'
  | 'not_found'
  | 'conflict'
  | 'payload_too_large'
  | 'unsupported_media_type'
  | 'rate_limited'
  | 'internal';
export type WireErrorCode = ErrorCode | PeopleErrorCode;

export const ERROR_STATUS = {
  bad_request: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  conflict: 409,
  agent_conflict: 409,
  lease_expired: 409,
  report_out_of_order: 409,
  payload_too_large: 413,
  unsupported_media_type: 415,
  rate_limited: 429,
  internal: 500,
} as const satisfies Record<WireErrorCode, number>;

/** A feature's error kind on the wire. */
const KIND_CODE = {
  invalid: 'bad_request',
  unauthorized: 'unauthorized',
  forbidden: 'forbidden',
  not_found: 'not_found',
  conflict: 'conflict',
  agent_conflict: 'agent_conflict',
  lease_expired: 'lease_expired',
  report_out_of_order: 'report_out_of_order',
  rate_limited: 'rate_limited',
} as const satisfies Record<ServiceErrorKind, WireErrorCode>;

/** An error of the HTTP layer itself (a body it cannot read, a missing header); its status comes from its code. */
export class HttpError extends CodedError<WireErrorCode> {
  override name = 'HttpError';
  get status(): number {
    return ERROR_STATUS[this.code];
  }
}

export const badRequest = (message: string) => new HttpError('bad_request', message);

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

export function errorBody(code: WireErrorCode, message: string): { error: { code: WireErrorCode; message: string } } {
  return { error: { code, message } };
}

/** Maps anything thrown in a route to a status, a code and a message that is safe to show. */
export function describeError(err: unknown): { status: number; code: WireErrorCode; message: string; unexpected: boolean } {
  if (err instanceof HttpError) return { status: err.status, code: err.code, message: err.message, unexpected: false };
  if (err instanceof ServiceError) {
    const code = KIND_CODE[err.kind];
    return { status: ERROR_STATUS[code], code, message: err.message, unexpected: false };
  }
  const fastifyError = err as Partial<FastifyError>;
  switch (fastifyError.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return { status: 413, code: 'payload_too_large', message: fastifyError.message ?? 'request body is too large', unexpected: false };
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return {
        status: 415,
        code: 'unsupported_media_type',
        message: 'the body must be JSON: send Content-Type: application/json',
        unexpected: false,
      };
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return { status: 400, code: 'bad_request', message: 'the body is empty: a JSON object is expected', unexpected: false };
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return { status: 400, code: 'bad_request', message: 'the body is not as long as its Content-Length header says', unexpected: false };
  }
  // A value the schemas let through but the storage refused (SQLSTATE class 22, data exception):
  // the request's fault, not the service's. The database's message is not shown (it quotes values).
  const sqlState = (err as { code?: unknown }).code;
  if (typeof sqlState === 'string' && /^22[0-9A-Z]{3}$/.test(sqlState)) {
    return {
      status: 400,
      code: 'bad_request',
      message: 'a value in the request cannot be stored (out of range, or not representable)',
      unexpected: false,
    };
  }
  const status = fastifyError.statusCode;
  if (typeof status === 'number' && status >= 400 && status < 500) {
    const code: WireErrorCode =
      status === 401
        ? 'unauthorized'
        : status === 403
          ? 'forbidden'
          : status === 404
            ? 'not_found'
            : status === 413
              ? 'payload_too_large'
              : status === 415
                ? 'unsupported_media_type'
                : status === 429
                  ? 'rate_limited'
                  : 'bad_request';
    return { status, code, message: fastifyError.message ?? 'bad request', unexpected: false };
  }
  return { status: 500, code: 'internal', message: 'the service failed to handle this request; it has been logged', unexpected: true };
}

/** The status of an error a person can act on (an HttpError or a feature's ServiceError), else null. */
export function statusOfExpected(err: unknown): number | null {
  if (!(err instanceof HttpError) && !(err instanceof ServiceError)) return null;
  return describeError(err).status;
}

/** The JSON error handler of the agent API and the people's API. */
export function jsonErrorHandler(err: unknown, request: FastifyRequest, reply: FastifyReply): void {
  const { status, code, message, unexpected } = describeError(err);
  if (unexpected) request.log.error({ err: safeErrorForLog(err), url: request.routeOptions.url }, 'request failed');
  void reply.code(status).type('application/json; charset=utf-8').send(errorBody(code, message));
}

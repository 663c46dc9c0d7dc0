// The features' errors, in the features' words. They know nothing of HTTP: http/errors.ts gives
// each kind its status and its code on the wire, in one table.

export type ServiceErrorKind =
  /** The request asks for something malformed or impossible (a field names what). */
  | 'invalid'
  /** Who is asking is not known: no login, a wrong password, an API key that does not match. */
  | 'unauthorized'
  /** Known, but not allowed to. */
  | 'forbidden'
  | 'not_found'
  /** The thing is in a state that does not allow this now (a session running, a limit reached). */
  | 'conflict'
  /** Another agent holds the database's lease. */
  | 'agent_conflict'
  /** The lease an agent names is not the database's live lease. */
  | 'lease_expired'
  /** A report's sequence number is below its lease's last one: start again (a new sequence). */
  | 'report_out_of_order'
  /** Too many attempts: wait. */
  | 'rate_limited';

export class ServiceError extends Error {
  override name = 'ServiceError';
  readonly kind: ServiceErrorKind;
  /** rate_limited: when to try again. */
  readonly retryAfterSeconds: number | null;
  constructor(kind: ServiceErrorKind, message: string, retryAfterSeconds: number | null = null) {
    super(message);
    this.kind = kind;
    this.retryAfterSeconds = retryAfterSeconds;
  }
}

export const invalid = (message: string) => new ServiceError('invalid', message);
export const notFound = (message: string) => new ServiceError('not_found', message);
export const conflict = (message: string) => new ServiceError('conflict', message);
export const forbidden = (message: string) => new ServiceError('forbidden', message);
export const unauthorized = (message: string) => new ServiceError('unauthorized', message);

/** Error details for the log: name, code and stack only. Messages of driver errors can quote
 * the values of a statement, and those may hold a secret. */
export function safeErrorForLog(err: unknown): { name: string; code?: unknown; stack?: string | undefined } {
  if (err instanceof Error)
    return { name: err.name, code: (err as { code?: unknown }).code, stack: err.stack?.split('\n').slice(1, 6).join('\n') };
  return { name: typeof err };
}

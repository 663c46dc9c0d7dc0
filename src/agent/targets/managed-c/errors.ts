// What Google's answers mean, read by shape as data from outside. The clients throw a GaxiosError
// whose response carries Google's error body, `{ "error": { "code", "message", "status",
// "errors": [{ "reason", "message" }] } }`; a failed Cloud SQL operation carries
// `error.errors[]` with `code` and `message`.
import { z } from 'zod';

const GoogleErrorBody = z.object({
  error: z.object({
    code: z.number().int().optional(),
    message: z.string().optional(),
    status: z.string().optional(),
    errors: z.array(z.object({ reason: z.string().optional(), message: z.string().optional() })).optional(),
  }),
});

const GaxiosShape = z.object({
  message: z.string(),
  status: z.number().int().optional(),
  /** google-gax's errors (Cloud Monitoring's client) carry the gRPC code instead. */
  code: z.unknown().optional(),
  response: z.object({ status: z.number().int().optional(), data: z.unknown() }).optional(),
});

/** The HTTP status of a gRPC code (google.rpc.Code), for the codes that decide what to do. */
const RPC_STATUS: Readonly<Record<number, number>> = { 5: 404, 7: 403, 8: 429, 14: 503, 16: 401 };

export interface GoogleFailure {
  status?: number;
  /** Google's status name, e.g. PERMISSION_DENIED, RESOURCE_EXHAUSTED, FAILED_PRECONDITION. */
  statusName?: string;
  /** The first `errors[].reason`, e.g. operationInProgress, staleData, invalidFlagValue. */
  reason?: string;
  message: string;
}

export function googleFailure(err: unknown): GoogleFailure {
  const shape = GaxiosShape.safeParse(err);
  if (!shape.success) return { message: err instanceof Error ? err.message : String(err) };
  const code = shape.data.code;
  const status = shape.data.response?.status ?? shape.data.status ?? (typeof code === 'number' ? RPC_STATUS[code] : undefined);
  const body = GoogleErrorBody.safeParse(shape.data.response?.data);
  if (!body.success) return { ...(status !== undefined && { status }), message: shape.data.message };
  const e = body.data.error;
  const reason = e.errors?.find((x) => x.reason)?.reason;
  return {
    ...(status !== undefined && { status }),
    ...(e.status !== undefined && { statusName: e.status }),
    ...(reason !== undefined && { reason }),
    message: e.message ?? shape.data.message,
  };
}

/** "403 PERMISSION_DENIED: …" */
export function describeFailure(f: GoogleFailure): string {
  const head = [f.status, f.statusName ?? f.reason].filter((x) => x !== undefined).join(' ');
  return head ? `${head}: ${f.message}` : f.message;
}

/** Another operation runs on the instance (409 operationInProgress), or a quota was hit (429):
 * worth trying again after a while. */
export function isBusyOrThrottled(f: GoogleFailure): boolean {
  return f.status === 429 || f.status === 503 || (f.status === 409 && f.reason === 'operationInProgress');
}

/** The instance's settings changed since they were read (settingsVersion): read again and retry. */
export function isStaleSettings(f: GoogleFailure): boolean {
  return f.status === 412 || (f.status === 409 && f.reason === 'staleData');
}

/** A Cloud SQL failure, in words that say what to do. */
export class ManagedCError extends Error {
  override name = 'ManagedCError';
  readonly failure: GoogleFailure;
  readonly fix: string | undefined;
  constructor(what: string, failure: GoogleFailure, fix?: string) {
    super(`${what}: ${describeFailure(failure)}${fix ? `; ${fix}` : ''}`);
    this.failure = failure;
    this.fix = fix;
  }
}

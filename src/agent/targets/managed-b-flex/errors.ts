// What Cloud B's failures mean, in words that say what to do. The SDK throws RestError (an HTTP
// answer: status, Azure error code, message), plain Errors for failed long-running operations
// ("The long-running operation has failed. ServerBusy. …"), and credential errors; they are read
// by shape, as data from outside.
import { z } from 'zod';
import { redact } from '../../base/redact.ts';

const ErrorShape = z.object({
  name: z.string().optional(),
  message: z.string(),
  statusCode: z.number().int().optional(),
  code: z.union([z.string(), z.number()]).optional(),
});

interface ErrorFacts {
  name: string;
  message: string;
  status?: number;
  code?: string;
}

function facts(err: unknown): ErrorFacts {
  const parsed = ErrorShape.safeParse(err);
  if (!parsed.success) return { name: 'Error', message: String(err) };
  const { name, message, statusCode, code } = parsed.data;
  return {
    name: name ?? 'Error',
    message,
    ...(statusCode !== undefined && { status: statusCode }),
    ...(code !== undefined && { code: String(code) }),
  };
}

/** Azure's codes for a server busy with another operation (both spellings are in use). */
const BUSY_CODES = /\b(ServerBusy|ServerIsBusy|AnotherOperationInProgress|OperationInProgress|ResourceBusy)\b/i;

/** A server busy with another operation, a conflict with one in flight, or throttling: worth
 * trying again after a while. */
export function isRetryable(err: unknown): boolean {
  const f = facts(err);
  if (f.status === 429 || f.status === 409) return true;
  return BUSY_CODES.test(f.code ?? '') || BUSY_CODES.test(f.message);
}

/** The Retry-After of an HTTP answer, in milliseconds, when it carries one. */
export function retryAfterMs(err: unknown): number | undefined {
  const response = (err as { response?: { headers?: { get?: unknown } } } | null)?.response;
  const get = response?.headers?.get;
  if (typeof get !== 'function') return undefined;
  const raw: unknown = get.call(response?.headers, 'retry-after');
  if (typeof raw !== 'string') return undefined;
  const seconds = Number(raw);
  if (Number.isFinite(seconds) && seconds >= 0) return seconds * 1000;
  const at = Date.parse(raw);
  return Number.isFinite(at) ? Math.max(0, at - Date.now()) : undefined;
}

/** A short label for logs: "409 ServerIsBusy", "ServerBusy". */
export function errorLabel(err: unknown): string {
  const f = facts(err);
  const busy = BUSY_CODES.exec(f.message)?.[1];
  return [f.status, f.code ?? busy].filter((x) => x !== undefined).join(' ') || f.name;
}

/** Where and as whom the agent asked, for the messages. */
export interface ErrorContext {
  identity: string;
  identityFix: string;
  endpoint: string;
  server: string;
}

const ACTION_IN_MESSAGE = /perform action '([^']+)'/i;

/** Which setting names the scope Resource Manager did not find
 * (https://learn.microsoft.com/azure/azure-resource-manager/troubleshooting/error-not-found). */
const NOT_FOUND_KEY: Readonly<Record<string, string>> = {
  SubscriptionNotFound: 'subscription_id',
  ResourceGroupNotFound: 'resource_group_name',
  ResourceNotFound: 'server_name',
};

function short(text: string): string {
  const oneLine = redact(text).replace(/\s+/g, ' ').trim();
  return oneLine.length > 400 ? `${oneLine.slice(0, 400)}…` : oneLine;
}

/** A Cloud B failure: what failed (`problem`) and, when the agent knows, what to do (`fix`). */
export class ManagedBFlexError extends Error {
  override name = 'ManagedBFlexError';
  readonly problem: string;
  readonly fix: string | undefined;
  constructor(problem: string, fix: string | undefined, cause: unknown) {
    super(fix ? `${problem}; fix: ${fix}` : problem, { cause });
    this.problem = problem;
    this.fix = fix;
  }
}

/**
 * One error that says what failed and what to do. `what` is the attempt ("reading the server
 * parameters"), `action` the role action it needs, named when Cloud B refuses it.
 */
export function explainManagedBFlexError(err: unknown, what: string, action: string, ctx: ErrorContext): ManagedBFlexError {
  const f = facts(err);
  if (f.name === 'CredentialUnavailableError' || f.name === 'AuthenticationError' || f.name === 'AggregateAuthenticationError') {
    return new ManagedBFlexError(`${what}: no Cloud B token for the ${ctx.identity}: ${short(f.message)}`, ctx.identityFix, err);
  }
  if (f.status === 403) {
    const named = ACTION_IN_MESSAGE.exec(f.message)?.[1] ?? action;
    return new ManagedBFlexError(
      `${what}: the ${ctx.identity} is not allowed ${named} (${f.code ?? '403'})`,
      `add ${named} to the custom role and assign the role at the flexible server's resource group (tuner-agent permissions --managed-b-flex prints both)`,
      err,
    );
  }
  if (f.status === 401) {
    return new ManagedBFlexError(
      `${what}: Cloud B did not accept the token of the ${ctx.identity} (${f.code ?? '401'}: ${short(f.message)})`,
      ctx.identityFix,
      err,
    );
  }
  if (f.status === 404) {
    return new ManagedBFlexError(
      `${what}: ${ctx.server} was not found (${f.code ?? '404'}: ${short(f.message)})`,
      `check managed_b_flex.${NOT_FOUND_KEY[f.code ?? ''] ?? 'subscription_id, resource_group_name and server_name'}`,
      err,
    );
  }
  if (f.status === 429) {
    const after = retryAfterMs(err);
    return new ManagedBFlexError(
      `${what}: Resource Manager is throttling the requests of the ${ctx.identity} (${f.code ?? '429'}${after === undefined ? '' : `, retry after ${Math.ceil(after / 1000)} s`}), still after the SDK waited and tried again as it asked: ${short(f.message)}`,
      "the agent tries again at its next step; if it persists, look for other clients using up the subscription's Resource Manager request limits",
      err,
    );
  }
  if (f.status === undefined && /ECONNREFUSED|ENOTFOUND|ETIMEDOUT|EAI_AGAIN|ECONNRESET|certificate/i.test(`${f.code ?? ''} ${f.message}`)) {
    return new ManagedBFlexError(
      `${what}: cannot reach Cloud B at ${ctx.endpoint}: ${short(f.message)}`,
      'check that this host can reach the Resource Manager endpoint over HTTPS (managed_b_flex.resource_manager_endpoint)',
      err,
    );
  }
  const label = [f.status, f.code].filter((x) => x !== undefined).join(' ');
  return new ManagedBFlexError(`${what}: ${label ? `${label}: ` : ''}${short(f.message)}`, undefined, err);
}

// People's sessions: a random token in an httpOnly cookie (only its hash is stored) and a CSRF
// token bound to the session, which every state-changing request must present (a form field on
// pages, a header in the JSON API).
import type {} from '@fastify/cookie';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { randomToken, sameSecret, sha256Hex } from '../auth/tokens.ts';
import type { ServiceContext } from '../context.ts';
import type { Session, User } from '../storage/storage.ts';

export const SESSION_COOKIE = 'tuner_session';
export const CSRF_HEADER = 'x-csrf-token';
export const CSRF_FIELD = '_csrf';
const SESSION_DAYS = 7;

/** Secure cookies when the browser reached us over https (directly, or through a trusted proxy),
 * or when the public address is https. */
export function isHttps(ctx: ServiceContext, request: FastifyRequest): boolean {
  return request.protocol === 'https' || (ctx.config.publicUrl?.startsWith('https://') ?? false);
}

export async function loadSession(ctx: ServiceContext, request: FastifyRequest): Promise<Session | null> {
  const token = request.cookies[SESSION_COOKIE];
  if (!token || token.length > 100) return null;
  return ctx.storage.findSession(sha256Hex(token));
}

export async function startSession(ctx: ServiceContext, request: FastifyRequest, reply: FastifyReply, user: User): Promise<Session> {
  const token = randomToken();
  const csrfToken = randomToken();
  const expiresAt = new Date(Date.now() + SESSION_DAYS * 86_400_000);
  await ctx.storage.createSession(sha256Hex(token), user.id, csrfToken, expiresAt);
  reply.setCookie(SESSION_COOKIE, token, {
    httpOnly: true,
    sameSite: 'lax',
    secure: isHttps(ctx, request),
    path: '/',
    expires: expiresAt,
  });
  return { user, csrfToken, expiresAt };
}

export async function endSession(ctx: ServiceContext, request: FastifyRequest, reply: FastifyReply): Promise<void> {
  const token = request.cookies[SESSION_COOKIE];
  if (token && token.length <= 100) await ctx.storage.deleteSession(sha256Hex(token));
  reply.clearCookie(SESSION_COOKIE, { path: '/' });
}

export function csrfMatches(session: Session, presented: unknown): boolean {
  return typeof presented === 'string' && sameSecret(presented, session.csrfToken);
}

/** Slows down password guessing: after 5 failed logins for a username (or from an address)
 * within 15 minutes, further attempts are refused until the window passes. In memory, per
 * replica: a bound on guessing speed, not an account lock-out. */
export class LoginThrottle {
  private readonly failures = new Map<string, { count: number; since: number }>();
  private static readonly MAX_FAILURES = 5;
  private static readonly WINDOW_MS = 15 * 60_000;
  private static readonly MAX_TRACKED = 10_000;

  blocked(keys: readonly string[], now = Date.now()): boolean {
    return keys.some((key) => {
      const entry = this.failures.get(key);
      if (!entry) return false;
      if (now - entry.since > LoginThrottle.WINDOW_MS) {
        this.failures.delete(key);
        return false;
      }
      return entry.count >= LoginThrottle.MAX_FAILURES;
    });
  }

  fail(keys: readonly string[], now = Date.now()): void {
    if (this.failures.size > LoginThrottle.MAX_TRACKED) this.failures.clear();
    for (const key of keys) {
      const entry = this.failures.get(key);
      if (!entry || now - entry.since > LoginThrottle.WINDOW_MS) this.failures.set(key, { count: 1, since: now });
      else entry.count++;
    }
  }

  succeed(keys: readonly string[]): void {
    for (const key of keys) this.failures.delete(key);
  }
}

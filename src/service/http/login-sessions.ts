// People's sessions: a random token in an httpOnly cookie (only its hash is stored) and a CSRF
// token bound to the session, which every state-changing request must present (a form field on
// pages, a header in the JSON API).
import type {} from '@fastify/cookie';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { randomToken, sameSecret, sha256Hex } from '../people/tokens.ts';
import type { ServiceContext } from '../app/context.ts';
import type { LoginSession, User } from '../people/store.ts';

export const SESSION_COOKIE = 'tuner_session';
export const CSRF_HEADER = 'x-csrf-token';
export const CSRF_FIELD = '_csrf';
const SESSION_DAYS = 7;

/** Secure cookies when the browser reached us over https (directly, or through a trusted proxy),
 * or when the public address is https. */
export function isHttps(ctx: ServiceContext, request: FastifyRequest): boolean {
  return request.protocol === 'https' || (ctx.config.publicUrl?.startsWith('https://') ?? false);
}

export async function loadLoginSession(ctx: ServiceContext, request: FastifyRequest): Promise<LoginSession | null> {
  const token = request.cookies[SESSION_COOKIE];
  if (!token || token.length > 100) return null;
  return ctx.storage.findLoginSession(sha256Hex(token));
}

export async function startLoginSession(
  ctx: ServiceContext,
  request: FastifyRequest,
  reply: FastifyReply,
  user: User,
): Promise<LoginSession> {
  const token = randomToken();
  const csrfToken = randomToken();
  const expiresAt = new Date(Date.now() + SESSION_DAYS * 86_400_000);
  await ctx.storage.createLoginSession(sha256Hex(token), user.id, csrfToken, expiresAt);
  reply.setCookie(SESSION_COOKIE, token, {
    httpOnly: true,
    sameSite: 'lax',
    secure: isHttps(ctx, request),
    path: '/',
    expires: expiresAt,
  });
  return { user, csrfToken, expiresAt };
}

export async function endLoginSession(ctx: ServiceContext, request: FastifyRequest, reply: FastifyReply): Promise<void> {
  const token = request.cookies[SESSION_COOKIE];
  if (token && token.length <= 100) await ctx.storage.deleteLoginSession(sha256Hex(token));
  reply.clearCookie(SESSION_COOKIE, { path: '/' });
}

export function csrfMatches(session: LoginSession, presented: unknown): boolean {
  return typeof presented === 'string' && sameSecret(presented, session.csrfToken);
}

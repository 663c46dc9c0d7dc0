// Login sessions: a random token in an httpOnly cookie (only its hash is stored) and a CSRF
// token bound to the login session, which every state-changing request must present (a form
// field on pages, a header in the JSON API). The cookie keeps its name (tuner_session).
import type {} from '@fastify/cookie';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { randomToken, sameSecret, sha256Hex } from '../people/tokens.ts';
import type { ServiceContext } from '../app/context.ts';
import { forgetLoginSession, recordLoginSession } from '../people/login.ts';
import { loginSessionOf } from '../people/queries.ts';
import type { LoginSession, User } from '../people/store.ts';

export const LOGIN_COOKIE = 'tuner_session';
export const CSRF_HEADER = 'x-csrf-token';
export const CSRF_FIELD = '_csrf';
const LOGIN_DAYS = 7;

/** Secure cookies when the browser reached us over https (directly, or through a trusted proxy),
 * or when the public address is https. */
export function isHttps(ctx: ServiceContext, request: FastifyRequest): boolean {
  return request.protocol === 'https' || (ctx.config.publicUrl?.startsWith('https://') ?? false);
}

/** The request's login session, its user as the actor of what the request does: how they logged
 * in, and the client's address as the trusted proxies tell it. */
export async function loadLoginSession(ctx: ServiceContext, request: FastifyRequest): Promise<LoginSession | null> {
  const token = request.cookies[LOGIN_COOKIE];
  if (!token || token.length > 100) return null;
  const stored = await loginSessionOf(ctx, sha256Hex(token));
  if (!stored) return null;
  return {
    user: { ...stored.user, via: stored.via, address: request.ip, token: null },
    csrfToken: stored.csrfToken,
    expiresAt: stored.expiresAt,
  };
}

export async function startLoginSession(
  ctx: ServiceContext,
  request: FastifyRequest,
  reply: FastifyReply,
  user: User,
  via: 'password' | 'sso',
): Promise<LoginSession> {
  const token = randomToken();
  const csrfToken = randomToken();
  const expiresAt = new Date(Date.now() + LOGIN_DAYS * 86_400_000);
  const login: LoginSession = { user: { ...user, via, address: request.ip, token: null }, csrfToken, expiresAt };
  await recordLoginSession(ctx, sha256Hex(token), login);
  reply.setCookie(LOGIN_COOKIE, token, {
    httpOnly: true,
    sameSite: 'lax',
    secure: isHttps(ctx, request),
    path: '/',
    expires: expiresAt,
  });
  return login;
}

export async function endLoginSession(ctx: ServiceContext, request: FastifyRequest, reply: FastifyReply): Promise<void> {
  const token = request.cookies[LOGIN_COOKIE];
  if (token && token.length <= 100) {
    const login = await loadLoginSession(ctx, request);
    await forgetLoginSession(ctx, sha256Hex(token), login?.user ?? null);
  }
  reply.clearCookie(LOGIN_COOKIE, { path: '/' });
}

export function csrfMatches(login: LoginSession, presented: unknown): boolean {
  return typeof presented === 'string' && sameSecret(presented, login.csrfToken);
}

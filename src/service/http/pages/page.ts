// What every page route shares: the login session the request was authenticated with (set by
// the pages' onRequest hook in http/pages.ts), posted form fields, and sending a page.
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { z } from 'zod';
import type { LoginSession } from '../../people/store.ts';
import type { Html } from '../../web/html.ts';
import { HttpError, formatZodError } from '../errors.ts';

const logins = new WeakMap<FastifyRequest, LoginSession>();

export function setLoginOf(request: FastifyRequest, login: LoginSession): void {
  logins.set(request, login);
}

/** The request's login session, if the onRequest hook found one (the error page shows it). */
export function maybeLoginOf(request: FastifyRequest): LoginSession | null {
  return logins.get(request) ?? null;
}

export function loginOf(request: FastifyRequest): LoginSession {
  const login = logins.get(request);
  if (!login) throw new HttpError('unauthorized', 'log in first');
  return login;
}

/** What a posted form holds: string fields (a repeated field counts by its first value). */
export function fields(body: unknown): Record<string, string> {
  const out = Object.create(null) as Record<string, string>;
  if (typeof body !== 'object' || body === null) return out;
  for (const [key, value] of Object.entries(body as Record<string, unknown>)) {
    const first: unknown = Array.isArray(value) ? value[0] : value;
    if (typeof first === 'string') out[key] = first;
  }
  return out;
}

/** Parses form input with a schema; the message names the field, as the JSON API does. */
export function parseForm<S extends z.ZodType>(schema: S, value: unknown): z.infer<S> {
  const result = schema.safeParse(value);
  if (!result.success) throw new HttpError('bad_request', formatZodError(result.error, 'form'));
  return result.data;
}

export function sendPage(reply: FastifyReply, page: Html, status = 200): FastifyReply {
  return reply.code(status).type('text/html; charset=utf-8').send(page.value);
}

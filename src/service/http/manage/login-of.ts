// The login session each request of the people's API was authenticated with (set by the scope's
// onRequest hook in manage-api.ts, read by every route).
import type { FastifyRequest } from 'fastify';
import type { LoginSession } from '../../people/store.ts';
import { HttpError } from '../errors.ts';

export const LOG_IN_FIRST = 'log in first (POST /api/manage/login)';

const logins = new WeakMap<FastifyRequest, LoginSession>();

export function setLoginOf(request: FastifyRequest, login: LoginSession): void {
  logins.set(request, login);
}

export function loginOf(request: FastifyRequest): LoginSession {
  const login = logins.get(request);
  if (!login) throw new HttpError('unauthorized', LOG_IN_FIRST);
  return login;
}

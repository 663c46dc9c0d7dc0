// The people's JSON API (docs/service.md): what the pages do, for scripts and tests. A login
// session's cookie authenticates; every state-changing request also carries the login session's
// CSRF token in the X-CSRF-Token header. Bodies are validated, then checked for text PostgreSQL
// cannot store (parseStorableBody): after the login, which onRequest checks before the body is
// read. The routes, one module per feature, are in manage/.
import type { FastifyInstance } from 'fastify';
import type { ServiceContext } from '../app/context.ts';
import type { LoginThrottle } from '../people/throttle.ts';
import { useJsonBodies } from './body.ts';
import { HttpError, errorBody, jsonErrorHandler } from './errors.ts';
import { CSRF_HEADER, csrfMatches, loadLoginSession } from './login-sessions.ts';
import { registerDatabaseRoutes } from './manage/database-routes.ts';
import { LOG_IN_FIRST, setLoginOf } from './manage/login-of.ts';
import { registerLoginRoutes } from './manage/login-routes.ts';
import { registerTuningSessionRoutes } from './manage/tuning-session-routes.ts';
import { registerUserRoutes } from './manage/user-routes.ts';
import { registerFleetRoutes } from './manage/fleet-routes.ts';
import { registerAdviceRoutes } from './manage/advice-routes.ts';
import { registerAuditRoutes } from './manage/audit-routes.ts';
import { registerTokenRoutes } from './manage/token-routes.ts';
import { registerWebhookRoutes } from './manage/webhook-routes.ts';
import { loginOfApiToken } from '../people/api-tokens.ts';
import { bearerToken } from './bearer.ts';

export const MANAGE_PREFIX = '/api/manage';

export function registerManageApi(app: FastifyInstance, ctx: ServiceContext, throttle: LoginThrottle): void {
  useJsonBodies(app, { refusePrototypeKeys: true });
  app.setErrorHandler(jsonErrorHandler);
  app.setNotFoundHandler((request, reply) => {
    void reply.code(404).send(errorBody('not_found', `no route ${request.method} ${request.url.split('?')[0]?.slice(0, 200)}`));
  });

  app.addHook('onRequest', async (request, reply) => {
    void reply.header('cache-control', 'no-store');
    // Logging in is the one request without a login.
    if (request.is404 || (request.method === 'POST' && request.routeOptions.url === `${MANAGE_PREFIX}/login`)) return;
    // An API token (people/api-tokens.ts) stands for itself: no cookie, so no CSRF to check.
    // Another scheme (a proxy's Basic, say) is not ours: the login session decides then.
    const token = bearerToken(request.headers.authorization);
    if (token) {
      setLoginOf(request, await loginOfApiToken(ctx, token, request.ip));
      return;
    }
    const login = await loadLoginSession(ctx, request);
    if (!login) throw new HttpError('unauthorized', LOG_IN_FIRST);
    if (request.method !== 'GET' && request.method !== 'HEAD' && !csrfMatches(login, request.headers[CSRF_HEADER])) {
      throw new HttpError('forbidden', `missing or wrong CSRF token: send the session's csrfToken in the ${CSRF_HEADER} header`);
    }
    setLoginOf(request, login);
  });

  registerLoginRoutes(app, ctx, throttle);
  registerDatabaseRoutes(app, ctx);
  registerTuningSessionRoutes(app, ctx);
  registerUserRoutes(app, ctx);
  registerFleetRoutes(app, ctx);
  registerAdviceRoutes(app, ctx);
  registerAuditRoutes(app, ctx);
  registerTokenRoutes(app, ctx);
  registerWebhookRoutes(app, ctx);
}

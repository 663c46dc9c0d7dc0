// The HTML pages: server-rendered, forms posted as application/x-www-form-urlencoded, each form
// carrying the login session's CSRF token. A page that changes something redirects afterwards
// (303), except the ones that show a new secret (API key, password), which exist only in that
// answer. This is the pages' scope (headers, login, errors); the routes, one module per page or
// feature, are in pages/.
import formbody from '@fastify/formbody';
import type { FastifyInstance } from 'fastify';
import type { ServiceContext } from '../app/context.ts';
import { safeErrorForLog } from '../errors.ts';
import type { LoginThrottle } from '../people/throttle.ts';
import { errorPage } from '../web/layout.ts';
import { HttpError, describeError } from './errors.ts';
import { CSRF_FIELD, csrfMatches, loadLoginSession } from './login-sessions.ts';
import { registerDashboardRoutes } from './pages/dashboard-routes.ts';
import { registerDatabaseRoutes } from './pages/database-routes.ts';
import { registerLoginRoutes } from './pages/login-routes.ts';
import { fields, maybeLoginOf, sendPage, setLoginOf } from './pages/page.ts';
import { registerStaticRoutes } from './pages/static-routes.ts';
import { registerUserRoutes } from './pages/user-routes.ts';
import { registerFleetRoutes } from './pages/fleet-routes.ts';
import { refuseUnstorableText } from './storable.ts';

const CONTENT_SECURITY_POLICY =
  "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

export function registerPages(app: FastifyInstance, ctx: ServiceContext, throttle: LoginThrottle): void {
  void app.register(formbody, { bodyLimit: 64 * 1024 });

  app.addHook('onSend', async (_request, reply, payload) => {
    void reply.header('content-security-policy', CONTENT_SECURITY_POLICY);
    void reply.header('x-content-type-options', 'nosniff');
    void reply.header('x-frame-options', 'DENY');
    void reply.header('referrer-policy', 'same-origin');
    if (!reply.hasHeader('cache-control')) void reply.header('cache-control', 'no-store');
    return payload;
  });

  // Pages need a login, except the login page and the static files.
  app.addHook('preHandler', async (request, reply) => {
    const url = request.routeOptions.url ?? '';
    if (request.is404 || url === '/login' || url === '/favicon.ico' || url.startsWith('/static/')) return;
    const login = await loadLoginSession(ctx, request);
    if (!login) return reply.redirect('/login', 303);
    if (request.method === 'POST' && !csrfMatches(login, fields(request.body)[CSRF_FIELD])) {
      throw new HttpError(
        'forbidden',
        'This form is out of date (its security token does not match your session). Go back, reload the page and try again.',
      );
    }
    setLoginOf(request, login);
    // Text PostgreSQL cannot store is refused naming its field, in every form (the login's: logIn).
    if (request.method === 'POST') refuseUnstorableText(null, request.body, 'form');
  });

  app.setErrorHandler(async (err, request, reply) => {
    const { status, message, unexpected } = describeError(err);
    if (unexpected) request.log.error({ err: safeErrorForLog(err), url: request.routeOptions.url }, 'page failed');
    return sendPage(reply, errorPage(maybeLoginOf(request), status, message), status);
  });
  app.setNotFoundHandler(async (request, reply) => {
    const login = await loadLoginSession(ctx, request).catch(() => null);
    return sendPage(reply, errorPage(login, 404, 'There is no such page.'), 404);
  });

  registerStaticRoutes(app);
  registerLoginRoutes(app, ctx, throttle);
  registerDatabaseRoutes(app, ctx);
  registerDashboardRoutes(app, ctx);
  registerUserRoutes(app, ctx);
  registerFleetRoutes(app, ctx);
}

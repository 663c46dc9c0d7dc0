// The HTML pages: server-rendered, forms posted as application/x-www-form-urlencoded, each form
// carrying the login session's CSRF token. A page that changes something redirects afterwards
// (303), except the ones that show a new secret (API key, password), which exist only in that
// answer. This is the pages' scope (headers, login, bodies, errors); the routes, one module per
// page or feature, are in pages/.
//
// As in the people's API, the login session is checked in onRequest, before the body is read:
// only the login page takes a body from anyone (at most LOGIN_BODY_BYTES). Bodies are forms only,
// flat (nothing nests) and at most FORM_BODY_BYTES; any other type is a 415 (Fastify's own JSON
// and text parsers are removed here: a JSON body to a page was parsed, with no depth limit,
// before anyone was known).
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
import { registerAuditRoutes } from './pages/audit-routes.ts';
import { registerWebhookRoutes } from './pages/webhook-routes.ts';
import { refuseUnstorableText } from './storable.ts';

/** Forms post to this service only; with single sign-on, logging out may lead on to the provider's
 * end-session page (a redirect after the form, which form-action governs too). */
const contentSecurityPolicy = (formTargets: string) =>
  `default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:; connect-src 'self'; form-action ${formTargets}; frame-ancestors 'none'; base-uri 'none'`;

/** A page's form is a few fields; a tuning session's, every knob: far below this. */
export const FORM_BODY_BYTES = 64 * 1024;

/** Pages anyone may ask for: the login page (and single sign-on's), the static files. */
const isPublic = (url: string) => url === '/login' || url.startsWith('/login/sso') || url === '/favicon.ico' || url.startsWith('/static/');

export function registerPages(app: FastifyInstance, ctx: ServiceContext, throttle: LoginThrottle): void {
  const csp = contentSecurityPolicy(ctx.sso ? `'self' ${ctx.sso.origin}` : "'self'");
  app.removeAllContentTypeParsers();
  void app.register(formbody, { bodyLimit: FORM_BODY_BYTES });

  app.addHook('onSend', async (_request, reply, payload) => {
    void reply.header('content-security-policy', csp);
    void reply.header('x-content-type-options', 'nosniff');
    void reply.header('x-frame-options', 'DENY');
    void reply.header('referrer-policy', 'same-origin');
    if (!reply.hasHeader('cache-control')) void reply.header('cache-control', 'no-store');
    return payload;
  });

  // Pages need a login, except the public ones; checked before the body is read.
  app.addHook('onRequest', async (request, reply) => {
    if (request.is404 || isPublic(request.routeOptions.url ?? '')) return;
    const login = await loadLoginSession(ctx, request);
    if (!login) return reply.redirect('/login', 303);
    setLoginOf(request, login);
  });
  // A logged-in form, once read: the CSRF token, then text PostgreSQL cannot store, refused naming
  // its field (the login's: logIn).
  app.addHook('preHandler', (request, _reply, done) => {
    const login = maybeLoginOf(request);
    if (request.method !== 'POST' || !login) return done();
    if (!csrfMatches(login, fields(request.body)[CSRF_FIELD])) {
      return done(
        new HttpError(
          'forbidden',
          'This form is out of date (its security token does not match your session). Go back, reload the page and try again.',
        ),
      );
    }
    try {
      refuseUnstorableText(null, request.body, 'form');
    } catch (err) {
      return done(err as Error);
    }
    done();
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
  registerAuditRoutes(app, ctx);
  registerWebhookRoutes(app, ctx);
}

// The HTML pages: server-rendered, forms posted as application/x-www-form-urlencoded, each form
// carrying the session's CSRF token. A page that changes something redirects afterwards (303),
// except the ones that show a new secret (API key, password), which exist only in that answer.
import formbody from '@fastify/formbody';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { REPORT_INTERVAL_SECONDS } from '../../protocol/v1.ts';
import * as actions from '../databases/actions.ts';
import { LoginInputSchema, NewUserInputSchema } from '../people/inputs.ts';
import * as people from '../people/actions.ts';
import { randomToken, sameSecret } from '../people/tokens.ts';
import type { ServiceContext } from '../app/context.ts';
import {
  CommandInputSchema,
  DatabaseIdSchema,
  NewDatabaseInputSchema,
  ReportIntervalInputSchema,
  UuidSchema,
  parseValueLines,
  type CommandInput,
} from '../databases/inputs.ts';
import type { LoginSession } from '../people/store.ts';
import * as tuning from '../tuning/actions.ts';
import { StartSessionInputSchema, startInputFromForm } from '../tuning/params.ts';
import { iterationViews, sessionView } from '../tuning/views.ts';
import { APP_CSS, APP_JS, ICON_SVG } from '../web/assets.ts';
import { dashboardPage } from '../web/dashboard-page.ts';
import { databasesPage } from '../web/databases-page.ts';
import type { Html } from '../web/html.ts';
import { errorPage } from '../web/layout.ts';
import { loginPage } from '../web/login-page.ts';
import { setupPage } from '../web/setup-page.ts';
import { usersPage } from '../web/users-page.ts';
import { safeErrorForLog } from '../errors.ts';
import { HttpError, describeError, formatZodError, statusOfExpected } from './errors.ts';
import { readDownloads } from '../setup/downloads.ts';
import { installScriptUrl } from './downloads.ts';
import { LOGIN_BODY_BYTES, logIn } from './login.ts';
import { UNCONFIGURED_URL_NOTE, serviceUrl } from './public-url.ts';
import { CSRF_FIELD, csrfMatches, endLoginSession, isHttps, loadLoginSession } from './login-sessions.ts';
import type { LoginThrottle } from '../people/throttle.ts';
import { refuseUnstorableText } from './storable.ts';

const LOGIN_CSRF_COOKIE = 'tuner_login_csrf';

const CONTENT_SECURITY_POLICY =
  "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

const DatabaseParams = z.object({ databaseId: DatabaseIdSchema });
const KeyParams = z.object({ databaseId: DatabaseIdSchema, keyId: UuidSchema });
const SessionParams = z.object({ databaseId: DatabaseIdSchema, sessionId: UuidSchema });

/** What a posted form holds: string fields (a repeated field counts by its first value). */
function fields(body: unknown): Record<string, string> {
  const out = Object.create(null) as Record<string, string>;
  if (typeof body !== 'object' || body === null) return out;
  for (const [key, value] of Object.entries(body as Record<string, unknown>)) {
    const first: unknown = Array.isArray(value) ? value[0] : value;
    if (typeof first === 'string') out[key] = first;
  }
  return out;
}

/** Parses form input with a schema; the message names the field, as the JSON API does. */
function parseForm<S extends z.ZodType>(schema: S, value: unknown): z.infer<S> {
  const result = schema.safeParse(value);
  if (!result.success) throw new HttpError('bad_request', formatZodError(result.error, 'form'));
  return result.data;
}

function sendPage(reply: FastifyReply, page: Html, status = 200): FastifyReply {
  return reply.code(status).type('text/html; charset=utf-8').send(page.value);
}

const NOTICES: Record<string, { kind: 'ok' | 'bad'; text: string }> = {
  command: { kind: 'ok', text: 'Command queued: the agent receives it with its next report.' },
  interval: { kind: 'ok', text: 'Report interval saved: the agent uses it from its next report.' },
  'session-started': { kind: 'ok', text: 'Tuning session started: the baseline is measured from the next report.' },
  'session-stop': { kind: 'ok', text: 'Tuning session stopped.' },
  'session-approve': { kind: 'ok', text: 'Approved: the agent applies the best configuration and keeps it.' },
  'session-revert': { kind: 'ok', text: 'Reverting to the baseline: the agent receives the command with its next report.' },
};

export function registerPages(app: FastifyInstance, ctx: ServiceContext, throttle: LoginThrottle): void {
  const { storage, config } = ctx;
  const sessions = new WeakMap<FastifyRequest, LoginSession>();
  const sessionOf = (request: FastifyRequest): LoginSession => {
    const session = sessions.get(request);
    if (!session) throw new HttpError('unauthorized', 'log in first');
    return session;
  };

  void app.register(formbody, { bodyLimit: 64 * 1024 });

  app.addHook('onSend', async (_request, reply, payload) => {
    void reply.header('content-security-policy', CONTENT_SECURITY_POLICY);
    void reply.header('x-content-type-options', 'nosniff');
    void reply.header('x-frame-options', 'DENY');
    void reply.header('referrer-policy', 'same-origin');
    if (!reply.hasHeader('cache-control')) void reply.header('cache-control', 'no-store');
    return payload;
  });

  // Pages need a session, except the login page and the static files.
  app.addHook('preHandler', async (request, reply) => {
    const url = request.routeOptions.url ?? '';
    if (request.is404 || url === '/login' || url === '/favicon.ico' || url.startsWith('/static/')) return;
    const session = await loadLoginSession(ctx, request);
    if (!session) return reply.redirect('/login', 303);
    if (request.method === 'POST' && !csrfMatches(session, fields(request.body)[CSRF_FIELD])) {
      throw new HttpError(
        'forbidden',
        'This form is out of date (its security token does not match your session). Go back, reload the page and try again.',
      );
    }
    sessions.set(request, session);
    // Text PostgreSQL cannot store is refused naming its field, in every form (the login's: logIn).
    if (request.method === 'POST') refuseUnstorableText(null, request.body, 'form');
  });

  app.setErrorHandler(async (err, request, reply) => {
    const { status, message, unexpected } = describeError(err);
    if (unexpected) request.log.error({ err: safeErrorForLog(err), url: request.routeOptions.url }, 'page failed');
    return sendPage(reply, errorPage(sessions.get(request) ?? null, status, message), status);
  });
  app.setNotFoundHandler(async (request, reply) => {
    const session = await loadLoginSession(ctx, request).catch(() => null);
    return sendPage(reply, errorPage(session, 404, 'There is no such page.'), 404);
  });

  app.get('/static/app.css', async (_request, reply) =>
    reply.header('cache-control', 'public, max-age=300').type('text/css; charset=utf-8').send(APP_CSS),
  );
  app.get('/static/icon.svg', async (_request, reply) =>
    reply.header('cache-control', 'public, max-age=86400').type('image/svg+xml').send(ICON_SVG),
  );
  app.get('/favicon.ico', async (_request, reply) => reply.redirect('/static/icon.svg', 301));
  app.get('/static/app.js', async (_request, reply) =>
    reply.header('cache-control', 'public, max-age=300').type('text/javascript; charset=utf-8').send(APP_JS),
  );

  // Login: a CSRF token in a cookie and in the form (double submit), so that another site cannot
  // log a browser into an account of its choosing.
  const showLogin = (request: FastifyRequest, reply: FastifyReply, status: number, error?: string, username?: string) => {
    const loginCsrf = randomToken();
    reply.setCookie(LOGIN_CSRF_COOKIE, loginCsrf, {
      httpOnly: true,
      sameSite: 'strict',
      secure: isHttps(ctx, request),
      path: '/login',
      maxAge: 3600,
    });
    return sendPage(
      reply,
      loginPage({ loginCsrf, ...(error !== undefined && { error }), ...(username !== undefined && { username }) }),
      status,
    );
  };

  app.get('/login', async (request, reply) => {
    if (await loadLoginSession(ctx, request)) return reply.redirect('/', 303);
    return showLogin(request, reply, 200);
  });

  app.post('/login', { bodyLimit: LOGIN_BODY_BYTES }, async (request, reply) => {
    const form = fields(request.body);
    const cookie = request.cookies[LOGIN_CSRF_COOKIE];
    if (!cookie || !form[CSRF_FIELD] || !sameSecret(cookie, form[CSRF_FIELD])) {
      return showLogin(request, reply, 403, 'The login form expired: please try again.', form['username']);
    }
    const input = LoginInputSchema.safeParse({ username: form['username'] ?? '', password: form['password'] ?? '' });
    if (!input.success) return showLogin(request, reply, 400, 'Enter a username and a password.', form['username']);
    try {
      await logIn(ctx, throttle, request, reply, input.data, 'form');
    } catch (err) {
      const status = statusOfExpected(err);
      if (status === 401 || status === 429) return showLogin(request, reply, status, (err as Error).message, input.data.username);
      throw err;
    }
    reply.clearCookie(LOGIN_CSRF_COOKIE, { path: '/login' });
    return reply.redirect('/', 303);
  });

  app.post('/logout', async (request, reply) => {
    await endLoginSession(ctx, request, reply);
    return reply.redirect('/login', 303);
  });

  app.get('/', async (request, reply) => {
    const { user } = sessionOf(request);
    return sendPage(reply, databasesPage(sessionOf(request), await storage.listDatabases(user.accountId)));
  });

  const renderSetup = async (
    request: FastifyRequest,
    reply: FastifyReply,
    databaseId: string,
    newKey: string | null,
    status = 200,
    error?: string,
  ) => {
    const session = sessionOf(request);
    const database = await actions.databaseOf(ctx, session.user, databaseId);
    const keys = await storage.listApiKeys(session.user.accountId, databaseId);
    const binaryTargets = readDownloads(config.downloadsDir).binaries.map((b) => b.target);
    const { url, configured } = serviceUrl(config, request);
    return sendPage(
      reply,
      setupPage({
        session,
        database,
        keys,
        newKey,
        serverUrl: url,
        serverUrlNote: configured ? undefined : UNCONFIGURED_URL_NOTE,
        agentImage: config.agentImage,
        installScriptUrl: installScriptUrl(url),
        binaryTargets,
        error,
      }),
      status,
    );
  };

  app.post('/databases', async (request, reply) => {
    const session = sessionOf(request);
    const form = fields(request.body);
    const input = NewDatabaseInputSchema.safeParse({ name: form['name'] ?? '', target: form['target'] ?? '' });
    if (!input.success) {
      return sendPage(
        reply,
        databasesPage(session, await storage.listDatabases(session.user.accountId), formatZodError(input.error, 'form')),
        400,
      );
    }
    const { database, key } = await actions.createDatabase(ctx, session.user, input.data);
    return renderSetup(request, reply, database.id, key.apiKey, 201);
  });

  app.get('/databases/:databaseId/setup', async (request, reply) => {
    const { databaseId } = parseForm(DatabaseParams, request.params);
    return renderSetup(request, reply, databaseId, null);
  });

  app.post('/databases/:databaseId/keys', async (request, reply) => {
    const { databaseId } = parseForm(DatabaseParams, request.params);
    const label = (fields(request.body)['label'] ?? '').trim().slice(0, 100);
    try {
      const key = await actions.createApiKey(ctx, sessionOf(request).user, databaseId, label);
      return await renderSetup(request, reply, databaseId, key.apiKey, 201);
    } catch (err) {
      if (statusOfExpected(err) === 409) return renderSetup(request, reply, databaseId, null, 409, (err as Error).message);
      throw err;
    }
  });

  app.post('/databases/:databaseId/keys/:keyId/revoke', async (request, reply) => {
    const { databaseId, keyId } = parseForm(KeyParams, request.params);
    await actions.revokeApiKey(ctx, sessionOf(request).user, databaseId, keyId);
    return reply.redirect(`/databases/${databaseId}/setup`, 303);
  });

  const renderDashboard = async (
    request: FastifyRequest,
    reply: FastifyReply,
    databaseId: string,
    notice?: { kind: 'ok' | 'bad'; text: string },
    status = 200,
  ) => {
    const session = sessionOf(request);
    const accountId = session.user.accountId;
    const database = await actions.databaseOf(ctx, session.user, databaseId);
    const [report, series, commands, events, sessions] = await Promise.all([
      storage.latestReport(accountId, databaseId),
      storage.reportSeries(accountId, databaseId, 120),
      storage.listCommands(accountId, databaseId, 30),
      storage.recentEvents(accountId, databaseId, 15),
      storage.listTuningSessions(accountId, databaseId, 10),
    ]);
    // The session asked for (?session=), else the latest.
    const asked = UuidSchema.safeParse((request.query as Record<string, unknown>)['session']);
    const shownId = asked.success ? asked.data : sessions[0]?.id;
    const found = shownId ? await storage.getTuningSession(accountId, databaseId, shownId) : null;
    const shown = found && {
      view: sessionView(found.session, found.iterations),
      iterations: iterationViews(found.session, found.iterations),
    };
    return sendPage(
      reply,
      dashboardPage({
        session,
        database,
        defaultIntervalSeconds: config.reportIntervalSeconds,
        report,
        series,
        commands,
        events,
        notice,
        tuning: { shown, sessions },
      }),
      status,
    );
  };

  app.get('/databases/:databaseId', async (request, reply) => {
    const { databaseId } = parseForm(DatabaseParams, request.params);
    const done = (request.query as Record<string, unknown>)['done'];
    return renderDashboard(request, reply, databaseId, typeof done === 'string' ? NOTICES[done] : undefined);
  });

  // Tuning sessions: a refused action is shown on the dashboard, with the reason.
  const refusedOnDashboard = async (request: FastifyRequest, reply: FastifyReply, databaseId: string, err: unknown) => {
    const status = statusOfExpected(err);
    if (status !== null && status !== 404 && status < 500) {
      return renderDashboard(request, reply, databaseId, { kind: 'bad', text: (err as Error).message }, status);
    }
    throw err;
  };

  app.post('/databases/:databaseId/tuning-sessions', async (request, reply) => {
    const { databaseId } = parseForm(DatabaseParams, request.params);
    try {
      const input = parseForm(StartSessionInputSchema, startInputFromForm(fields(request.body)));
      await tuning.startTuningSession(ctx, sessionOf(request).user, databaseId, input);
    } catch (err) {
      return refusedOnDashboard(request, reply, databaseId, err);
    }
    return reply.redirect(`/databases/${databaseId}?done=session-started#tuning`, 303);
  });

  for (const [action, run] of [
    ['stop', tuning.stopTuningSession],
    ['approve', tuning.approveTuningSession],
    ['revert', tuning.revertTuningSession],
  ] as const) {
    app.post(`/databases/:databaseId/tuning-sessions/:sessionId/${action}`, async (request, reply) => {
      const { databaseId, sessionId } = parseForm(SessionParams, request.params);
      try {
        await run(ctx, sessionOf(request).user, databaseId, sessionId);
      } catch (err) {
        return refusedOnDashboard(request, reply, databaseId, err);
      }
      return reply.redirect(`/databases/${databaseId}?session=${sessionId}&done=session-${action}#tuning`, 303);
    });
  }

  app.post('/databases/:databaseId/commands', async (request, reply) => {
    const { databaseId } = parseForm(DatabaseParams, request.params);
    const form = fields(request.body);
    let input: CommandInput;
    try {
      const raw =
        form['kind'] === 'revert'
          ? { kind: 'revert', to: form['to'] }
          : {
              kind: form['kind'],
              values: parseValueLines(form['values'] ?? ''),
              keep: form['keep'] === 'true',
              allowRestart: form['allowRestart'] === 'true',
            };
      input = parseForm(CommandInputSchema, raw);
    } catch (err) {
      return renderDashboard(request, reply, databaseId, { kind: 'bad', text: `Command not sent: ${(err as Error).message}` }, 400);
    }
    try {
      await actions.issueCommand(ctx, sessionOf(request).user, databaseId, input);
    } catch (err) {
      if (statusOfExpected(err) === 409)
        return renderDashboard(request, reply, databaseId, { kind: 'bad', text: (err as Error).message }, 409);
      throw err;
    }
    return reply.redirect(`/databases/${databaseId}?done=command`, 303);
  });

  app.post('/databases/:databaseId/report-interval', async (request, reply) => {
    const { databaseId } = parseForm(DatabaseParams, request.params);
    const raw = (fields(request.body)['reportIntervalSeconds'] ?? '').trim();
    const seconds = raw === '' ? null : Number(raw);
    if (!ReportIntervalInputSchema.shape.reportIntervalSeconds.safeParse(seconds).success) {
      return renderDashboard(
        request,
        reply,
        databaseId,
        {
          kind: 'bad',
          text: `The report interval must be a whole number of seconds from ${REPORT_INTERVAL_SECONDS.min} to ${REPORT_INTERVAL_SECONDS.max}, or empty for the default.`,
        },
        400,
      );
    }
    await actions.setReportInterval(ctx, sessionOf(request).user, databaseId, seconds);
    return reply.redirect(`/databases/${databaseId}?done=interval`, 303);
  });

  app.get('/users', async (request, reply) => {
    const session = sessionOf(request);
    if (!session.user.isAdmin) throw new HttpError('forbidden', 'Only an admin can manage users.');
    return sendPage(reply, usersPage(session, await storage.listUsers()));
  });

  app.post('/users', async (request, reply) => {
    const session = sessionOf(request);
    if (!session.user.isAdmin) throw new HttpError('forbidden', 'Only an admin can manage users.');
    const form = fields(request.body);
    const input = NewUserInputSchema.safeParse({
      username: form['username'] ?? '',
      ...(form['password'] && { password: form['password'] }),
      isAdmin: form['isAdmin'] === 'true',
    });
    if (!input.success)
      return sendPage(reply, usersPage(session, await storage.listUsers(), { error: formatZodError(input.error, 'form') }), 400);
    try {
      const created = await people.createUser(ctx, session.user, input.data);
      return sendPage(
        reply,
        usersPage(session, await storage.listUsers(), { created: { username: created.user.username, password: created.password } }),
        201,
      );
    } catch (err) {
      if (statusOfExpected(err) === 409)
        return sendPage(reply, usersPage(session, await storage.listUsers(), { error: (err as Error).message }), 409);
      throw err;
    }
  });
}

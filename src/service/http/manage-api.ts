// The people's JSON API (docs/service.md): what the pages do, for scripts and tests. A session
// cookie authenticates; every state-changing request also carries the session's CSRF token in
// the X-CSRF-Token header. Bodies are validated, then checked for text PostgreSQL cannot store
// (parseStorableBody): after the session, which onRequest checks before the body is read.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import * as actions from '../databases/actions.ts';
import { LoginInputSchema, NewUserInputSchema } from '../people/inputs.ts';
import * as people from '../people/actions.ts';
import type { ServiceContext } from '../app/context.ts';
import {
  CommandInputSchema,
  DatabaseIdSchema,
  NewApiKeyInputSchema,
  NewDatabaseInputSchema,
  ReportIntervalInputSchema,
  UuidSchema,
} from '../databases/inputs.ts';
import type { LoginSession } from '../people/store.ts';
import * as tuning from '../tuning/actions.ts';
import { StartSessionInputSchema } from '../tuning/params.ts';
import { iterationViews, sessionView } from '../tuning/views.ts';
import { commandView, databaseView, reportView, userView } from '../databases/views.ts';
import { useJsonBodies } from './body.ts';
import { HttpError, errorBody, jsonErrorHandler, parseOr400 } from './errors.ts';
import { LOGIN_BODY_BYTES, logIn } from './login.ts';
import { CSRF_HEADER, csrfMatches, endLoginSession, loadLoginSession } from './login-sessions.ts';
import type { LoginThrottle } from '../people/throttle.ts';
import { parseStorableBody } from './storable.ts';

export const MANAGE_PREFIX = '/api/manage';

const DatabaseParams = z.object({ databaseId: DatabaseIdSchema });
const KeyParams = z.object({ databaseId: DatabaseIdSchema, keyId: UuidSchema });
const ListQuery = z.object({ limit: z.coerce.number().int().min(1).max(500).default(50) });
const SessionParams = z.object({ databaseId: DatabaseIdSchema, sessionId: z.uuid({ error: 'expected a tuning session id (a UUID)' }) });

const sessions = new WeakMap<FastifyRequest, LoginSession>();

function sessionOf(request: FastifyRequest): LoginSession {
  const session = sessions.get(request);
  if (!session) throw new HttpError('unauthorized', 'log in first (POST /api/manage/login)');
  return session;
}

export function registerManageApi(app: FastifyInstance, ctx: ServiceContext, throttle: LoginThrottle): void {
  const { storage, config } = ctx;
  const view = (db: Parameters<typeof databaseView>[0]) => databaseView(db, config.reportIntervalSeconds);

  useJsonBodies(app, { refusePrototypeKeys: true });
  app.setErrorHandler(jsonErrorHandler);
  app.setNotFoundHandler((request, reply) => {
    void reply.code(404).send(errorBody('not_found', `no route ${request.method} ${request.url.split('?')[0]?.slice(0, 200)}`));
  });

  app.addHook('onRequest', async (request, reply) => {
    void reply.header('cache-control', 'no-store');
    if (request.is404 || request.routeOptions.url === `${MANAGE_PREFIX}/login`) return;
    const session = await loadLoginSession(ctx, request);
    if (!session) throw new HttpError('unauthorized', 'log in first (POST /api/manage/login)');
    if (request.method !== 'GET' && request.method !== 'HEAD' && !csrfMatches(session, request.headers[CSRF_HEADER])) {
      throw new HttpError('forbidden', `missing or wrong CSRF token: send the session's csrfToken in the ${CSRF_HEADER} header`);
    }
    sessions.set(request, session);
  });

  app.post('/login', { bodyLimit: LOGIN_BODY_BYTES }, async (request, reply) => {
    const input = parseOr400(LoginInputSchema, request.body, 'body');
    const session = await logIn(ctx, throttle, request, reply, input, 'body');
    return { user: userView(session.user), csrfToken: session.csrfToken };
  });

  app.post('/logout', async (request, reply) => {
    await endLoginSession(ctx, request, reply);
    return reply.code(204).send();
  });

  app.get('/session', (request, reply) => {
    const session = sessionOf(request);
    return reply.send({ user: userView(session.user), csrfToken: session.csrfToken });
  });

  app.get('/databases', async (request) => {
    const { user } = sessionOf(request);
    return { databases: (await storage.listDatabases(user.accountId)).map(view) };
  });

  app.post('/databases', async (request, reply) => {
    const { user } = sessionOf(request);
    const input = parseStorableBody(NewDatabaseInputSchema, request);
    const { database, key } = await actions.createDatabase(ctx, user, input);
    const summary = await storage.getDatabase(user.accountId, database.id);
    return reply.code(201).send({ database: view(summary!), apiKey: key.apiKey, apiKeyId: key.info.id });
  });

  app.get('/databases/:databaseId', async (request) => {
    const { user } = sessionOf(request);
    const { databaseId } = parseOr400(DatabaseParams, request.params, 'path');
    const database = await actions.databaseOf(ctx, user, databaseId);
    return { database: view(database) };
  });

  app.post('/databases/:databaseId/report-interval', async (request) => {
    const { user } = sessionOf(request);
    const { databaseId } = parseOr400(DatabaseParams, request.params, 'path');
    const input = parseStorableBody(ReportIntervalInputSchema, request);
    await actions.setReportInterval(ctx, user, databaseId, input.reportIntervalSeconds);
    return { database: view((await storage.getDatabase(user.accountId, databaseId))!) };
  });

  app.get('/databases/:databaseId/keys', async (request) => {
    const { user } = sessionOf(request);
    const { databaseId } = parseOr400(DatabaseParams, request.params, 'path');
    await actions.databaseOf(ctx, user, databaseId);
    const keys = await storage.listApiKeys(user.accountId, databaseId);
    return {
      keys: keys.map((k) => ({
        id: k.id,
        prefix: k.displayPrefix,
        label: k.label,
        createdAt: k.createdAt.toISOString(),
        revokedAt: k.revokedAt?.toISOString() ?? null,
      })),
    };
  });

  app.post('/databases/:databaseId/keys', async (request, reply) => {
    const { user } = sessionOf(request);
    const { databaseId } = parseOr400(DatabaseParams, request.params, 'path');
    const input = parseStorableBody(NewApiKeyInputSchema, request, {});
    const key = await actions.createApiKey(ctx, user, databaseId, input.label);
    return reply.code(201).send({ apiKey: key.apiKey, apiKeyId: key.info.id, prefix: key.info.displayPrefix });
  });

  app.post('/databases/:databaseId/keys/:keyId/revoke', async (request, reply) => {
    const { user } = sessionOf(request);
    const { databaseId, keyId } = parseOr400(KeyParams, request.params, 'path');
    await actions.revokeApiKey(ctx, user, databaseId, keyId);
    return reply.code(204).send();
  });

  app.post('/databases/:databaseId/commands', async (request, reply) => {
    const { user } = sessionOf(request);
    const { databaseId } = parseOr400(DatabaseParams, request.params, 'path');
    const input = parseStorableBody(CommandInputSchema, request);
    const record = await actions.issueCommand(ctx, user, databaseId, input);
    return reply.code(201).send({ command: commandView(record) });
  });

  app.get('/databases/:databaseId/commands', async (request) => {
    const { user } = sessionOf(request);
    const { databaseId } = parseOr400(DatabaseParams, request.params, 'path');
    const { limit } = parseOr400(ListQuery, request.query, 'query');
    await actions.databaseOf(ctx, user, databaseId);
    return { commands: (await storage.listCommands(user.accountId, databaseId, limit)).map(commandView) };
  });

  app.get('/databases/:databaseId/reports/latest', async (request) => {
    const { user } = sessionOf(request);
    const { databaseId } = parseOr400(DatabaseParams, request.params, 'path');
    await actions.databaseOf(ctx, user, databaseId);
    const report = await storage.latestReport(user.accountId, databaseId);
    return { report: report && reportView(report) };
  });

  app.get('/databases/:databaseId/events', async (request) => {
    const { user } = sessionOf(request);
    const { databaseId } = parseOr400(DatabaseParams, request.params, 'path');
    const { limit } = parseOr400(ListQuery, request.query, 'query');
    await actions.databaseOf(ctx, user, databaseId);
    const events = await storage.recentEvents(user.accountId, databaseId, limit);
    return {
      events: events.map((e) => ({
        at: e.at.toISOString(),
        level: e.level,
        code: e.code,
        message: e.message,
        commandId: e.commandId,
        receivedAt: e.receivedAt.toISOString(),
      })),
    };
  });

  // Tuning sessions (docs/service.md, "Tuning sessions")
  app.post('/databases/:databaseId/tuning-sessions', async (request, reply) => {
    const { user } = sessionOf(request);
    const { databaseId } = parseOr400(DatabaseParams, request.params, 'path');
    const input = parseStorableBody(StartSessionInputSchema, request, {});
    const session = await tuning.startTuningSession(ctx, user, databaseId, input);
    return reply.code(201).send({ session: sessionView(session, []) });
  });

  app.get('/databases/:databaseId/tuning-sessions', async (request) => {
    const { user } = sessionOf(request);
    const { databaseId } = parseOr400(DatabaseParams, request.params, 'path');
    const { limit } = parseOr400(ListQuery, request.query, 'query');
    await actions.databaseOf(ctx, user, databaseId);
    return { sessions: (await storage.listTuningSessions(user.accountId, databaseId, limit)).map((s) => sessionView(s)) };
  });

  app.get('/databases/:databaseId/tuning-sessions/:sessionId', async (request) => {
    const { user } = sessionOf(request);
    const { databaseId, sessionId } = parseOr400(SessionParams, request.params, 'path');
    const { session, iterations } = await tuning.getTuningSession(ctx, user, databaseId, sessionId);
    return { session: sessionView(session, iterations), iterations: iterationViews(session, iterations) };
  });

  const sessionAction = (action: typeof tuning.stopTuningSession) => async (request: FastifyRequest) => {
    const { user } = sessionOf(request);
    const { databaseId, sessionId } = parseOr400(SessionParams, request.params, 'path');
    const session = await action(ctx, user, databaseId, sessionId);
    return { session: sessionView(session) };
  };
  app.post('/databases/:databaseId/tuning-sessions/:sessionId/stop', sessionAction(tuning.stopTuningSession));
  app.post('/databases/:databaseId/tuning-sessions/:sessionId/approve', sessionAction(tuning.approveTuningSession));
  app.post('/databases/:databaseId/tuning-sessions/:sessionId/revert', sessionAction(tuning.revertTuningSession));

  app.get('/users', async (request) => {
    const { user } = sessionOf(request);
    if (!user.isAdmin) throw new HttpError('forbidden', 'only an admin can list users');
    return { users: (await storage.listUsers()).map(userView) };
  });

  app.post('/users', async (request, reply) => {
    const { user } = sessionOf(request);
    const input = parseStorableBody(NewUserInputSchema, request);
    const created = await people.createUser(ctx, user, input);
    return reply.code(201).send({ user: userView(created.user), password: created.password });
  });
}

// Protocol v1, the service's side: the four routes agents call. Each request is authenticated
// before its body is read (an unauthenticated client never makes the service decompress
// anything); each body is validated with the protocol's schemas; agents/agents.ts decides.
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import {
  AgentCheckRequestSchema,
  AgentStartRequestSchema,
  AgentStopRequestSchema,
  CommandAckRequestSchema,
  ReportRequestSchema,
} from '../../protocol/v1.ts';
import type { ServiceContext } from '../app/context.ts';
import * as agents from '../agents/agents.ts';
import { DatabaseIdSchema } from '../databases/inputs.ts';
import { reportBodyForStorage } from '../agents/report-body.ts';
import { bearerToken } from './bearer.ts';
import { rawBodyOf, useJsonBodies } from './body.ts';
import { HttpError, badRequest, errorBody, jsonErrorHandler, parseOr400 } from './errors.ts';
import { refuseUnstorableText, storableTime } from './storable.ts';

const DatabaseParamsSchema = z.object({ databaseId: DatabaseIdSchema });
const AckParamsSchema = z.object({ databaseId: DatabaseIdSchema, commandId: z.string() });

/** The database each request authenticated for; set by the onRequest hook. */
const authenticated = new WeakMap<FastifyRequest, agents.AgentDatabase>();

function databaseOf(request: FastifyRequest): agents.AgentDatabase {
  const database = authenticated.get(request);
  if (!database) throw new HttpError('unauthorized', 'not authenticated');
  return database;
}

function bearerKey(request: FastifyRequest): string {
  const key = bearerToken(request.headers.authorization);
  if (!key) {
    throw new HttpError(
      'unauthorized',
      'missing API key: send the header "Authorization: Bearer <api_key>" with the key from the agent setup page',
    );
  }
  return key;
}

export function registerAgentApi(app: FastifyInstance, ctx: ServiceContext): void {
  useJsonBodies(app, { refusePrototypeKeys: false });
  app.setErrorHandler(jsonErrorHandler);
  app.setNotFoundHandler((request, reply) => {
    void reply
      .code(404)
      .send(errorBody('not_found', `no route ${request.method} ${request.url.split('?')[0]?.slice(0, 200)} in protocol v1`));
  });

  app.addHook('onRequest', async (request) => {
    if (request.is404) return;
    const params = parseOr400(DatabaseParamsSchema, request.params, 'path');
    authenticated.set(request, await agents.authenticateAgent(ctx, params.databaseId, bearerKey(request)));
  });

  app.post('/databases/:databaseId/agent/start', async (request, reply) => {
    const body = parseOr400(AgentStartRequestSchema, request.body, 'body');
    refuseUnstorableText(rawBodyOf(request)?.text ?? null, body);
    return reply.send(await agents.startAgent(ctx, databaseOf(request), body, request.log));
  });

  app.post('/databases/:databaseId/reports', async (request, reply) => {
    const parsed = parseOr400(ReportRequestSchema, request.body, 'body');
    const raw = rawBodyOf(request);
    if (!raw) throw badRequest('the body is missing');
    // The report is kept whole as sent (compressed), so any text is fine in it; what PostgreSQL
    // cannot store matters only in what goes into text columns: the events.
    refuseUnstorableText(raw.text, parsed.events, 'body.events');
    const body = {
      ...parsed,
      sentAt: storableTime(parsed.sentAt, 'body.sentAt'),
      events: parsed.events.map((e, i) => ({ ...e, at: storableTime(e.at, `body.events[${i}].at`) })),
    };
    return reply.send(
      await agents.receiveReport(ctx, databaseOf(request), body, reportBodyForStorage(raw.received, raw.gzip), request.log),
    );
  });

  app.post('/databases/:databaseId/commands/:commandId/ack', async (request, reply) => {
    const { commandId } = parseOr400(AckParamsSchema, request.params, 'path');
    const body = parseOr400(CommandAckRequestSchema, request.body, 'body');
    refuseUnstorableText(rawBodyOf(request)?.text ?? null, body);
    await agents.acknowledgeCommand(ctx, databaseOf(request), commandId, body, request.log);
    return reply.code(204).send();
  });

  app.post('/databases/:databaseId/agent/check', async (request, reply) => {
    const body = parseOr400(AgentCheckRequestSchema, request.body, 'body');
    return reply.send(agents.checkAgent(databaseOf(request), body));
  });

  app.post('/databases/:databaseId/agent/stop', async (request, reply) => {
    const body = parseOr400(AgentStopRequestSchema, request.body, 'body');
    await agents.stopAgent(ctx, databaseOf(request), body, request.log);
    return reply.code(204).send();
  });
}

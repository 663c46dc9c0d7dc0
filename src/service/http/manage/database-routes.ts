// The people's API: databases, their API keys, commands, reports and events (docs/service.md).
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { ServiceContext } from '../../app/context.ts';
import * as actions from '../../databases/actions.ts';
import {
  CommandInputSchema,
  DatabaseIdSchema,
  NewApiKeyInputSchema,
  NewDatabaseInputSchema,
  ReportIntervalInputSchema,
  UuidSchema,
} from '../../databases/inputs.ts';
import * as queries from '../../databases/queries.ts';
import { commandView, databaseView, reportView } from '../../databases/views.ts';
import { parseOr400 } from '../errors.ts';
import { parseStorableBody } from '../storable.ts';
import { loginOf } from './login-of.ts';

export const DatabaseParams = z.object({ databaseId: DatabaseIdSchema });
const KeyParams = z.object({ databaseId: DatabaseIdSchema, keyId: UuidSchema });
export const ListQuery = z.object({ limit: z.coerce.number().int().min(1).max(500).default(50) });

export function registerDatabaseRoutes(app: FastifyInstance, ctx: ServiceContext): void {
  const view = (db: Parameters<typeof databaseView>[0]) => databaseView(db, ctx.config.reportIntervalSeconds);

  app.get('/databases', async (request) => {
    const { user } = loginOf(request);
    return { databases: (await queries.listDatabases(ctx, user)).map(view) };
  });

  app.post('/databases', async (request, reply) => {
    const { user } = loginOf(request);
    const input = parseStorableBody(NewDatabaseInputSchema, request);
    const { database, key } = await actions.createDatabase(ctx, user, input);
    const summary = await queries.databaseOf(ctx, user, database.id);
    return reply.code(201).send({ database: view(summary), apiKey: key.apiKey, apiKeyId: key.info.id });
  });

  app.get('/databases/:databaseId', async (request) => {
    const { user } = loginOf(request);
    const { databaseId } = parseOr400(DatabaseParams, request.params, 'path');
    return { database: view(await queries.databaseOf(ctx, user, databaseId)) };
  });

  app.post('/databases/:databaseId/report-interval', async (request) => {
    const { user } = loginOf(request);
    const { databaseId } = parseOr400(DatabaseParams, request.params, 'path');
    const input = parseStorableBody(ReportIntervalInputSchema, request);
    await actions.setReportInterval(ctx, user, databaseId, input.reportIntervalSeconds);
    return { database: view(await queries.databaseOf(ctx, user, databaseId)) };
  });

  app.get('/databases/:databaseId/keys', async (request) => {
    const { user } = loginOf(request);
    const { databaseId } = parseOr400(DatabaseParams, request.params, 'path');
    const keys = await queries.apiKeys(ctx, user, databaseId);
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
    const { user } = loginOf(request);
    const { databaseId } = parseOr400(DatabaseParams, request.params, 'path');
    const input = parseStorableBody(NewApiKeyInputSchema, request, {});
    const key = await actions.createApiKey(ctx, user, databaseId, input.label);
    return reply.code(201).send({ apiKey: key.apiKey, apiKeyId: key.info.id, prefix: key.info.displayPrefix });
  });

  app.post('/databases/:databaseId/keys/:keyId/revoke', async (request, reply) => {
    const { user } = loginOf(request);
    const { databaseId, keyId } = parseOr400(KeyParams, request.params, 'path');
    await actions.revokeApiKey(ctx, user, databaseId, keyId);
    return reply.code(204).send();
  });

  app.post('/databases/:databaseId/commands', async (request, reply) => {
    const { user } = loginOf(request);
    const { databaseId } = parseOr400(DatabaseParams, request.params, 'path');
    const input = parseStorableBody(CommandInputSchema, request);
    const record = await actions.issueCommand(ctx, user, databaseId, input);
    return reply.code(201).send({ command: commandView(record) });
  });

  app.get('/databases/:databaseId/commands', async (request) => {
    const { user } = loginOf(request);
    const { databaseId } = parseOr400(DatabaseParams, request.params, 'path');
    const { limit } = parseOr400(ListQuery, request.query, 'query');
    return { commands: (await queries.commands(ctx, user, databaseId, limit)).map(commandView) };
  });

  app.get('/databases/:databaseId/reports/latest', async (request) => {
    const { user } = loginOf(request);
    const { databaseId } = parseOr400(DatabaseParams, request.params, 'path');
    const report = await queries.latestReport(ctx, user, databaseId);
    return { report: report && reportView(report) };
  });

  app.get('/databases/:databaseId/events', async (request) => {
    const { user } = loginOf(request);
    const { databaseId } = parseOr400(DatabaseParams, request.params, 'path');
    const { limit } = parseOr400(ListQuery, request.query, 'query');
    const events = await queries.recentEvents(ctx, user, databaseId, limit);
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
}

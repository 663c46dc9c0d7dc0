// The databases page (the list, and the form that adds one) and each database's agent setup page
// (its API keys). A page that shows a new API key exists only in that answer.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { ServiceContext } from '../../app/context.ts';
import * as actions from '../../databases/actions.ts';
import { DatabaseIdSchema, NewDatabaseInputSchema, UuidSchema } from '../../databases/inputs.ts';
import * as queries from '../../databases/queries.ts';
import { readDownloads } from '../../setup/downloads.ts';
import { databasesPage } from '../../web/databases-page.ts';
import { setupPage } from '../../web/setup-page.ts';
import { installScriptUrl } from '../downloads.ts';
import { formatZodError, statusOfExpected } from '../errors.ts';
import { UNCONFIGURED_URL_NOTE, serviceUrl } from '../public-url.ts';
import { fields, loginOf, parseForm, sendPage } from './page.ts';

export const DatabaseParams = z.object({ databaseId: DatabaseIdSchema });
const KeyParams = z.object({ databaseId: DatabaseIdSchema, keyId: UuidSchema });

export function registerDatabaseRoutes(app: FastifyInstance, ctx: ServiceContext): void {
  const { config } = ctx;

  // The home page is the fleet (fleet-routes.ts); the list with the form to add one is here.
  app.get('/databases', async (request, reply) => {
    const login = loginOf(request);
    return sendPage(reply, databasesPage(login, await queries.listDatabases(ctx, login.user)));
  });

  const renderSetup = async (
    request: FastifyRequest,
    reply: FastifyReply,
    databaseId: string,
    newKey: string | null,
    status = 200,
    error?: string,
  ) => {
    const login = loginOf(request);
    const database = await queries.databaseOf(ctx, login.user, databaseId);
    const keys = await queries.apiKeysOf(ctx, database);
    const binaryTargets = readDownloads(config.downloadsDir).binaries.map((b) => b.target);
    const { url, configured } = serviceUrl(config, request);
    return sendPage(
      reply,
      setupPage({
        login,
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
    const login = loginOf(request);
    const form = fields(request.body);
    const input = NewDatabaseInputSchema.safeParse({ name: form['name'] ?? '', target: form['target'] ?? '' });
    if (!input.success) {
      return sendPage(reply, databasesPage(login, await queries.listDatabases(ctx, login.user), formatZodError(input.error, 'form')), 400);
    }
    const { database, key } = await actions.createDatabase(ctx, login.user, input.data);
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
      const key = await actions.createApiKey(ctx, loginOf(request).user, databaseId, label);
      return await renderSetup(request, reply, databaseId, key.apiKey, 201);
    } catch (err) {
      if (statusOfExpected(err) === 409) return renderSetup(request, reply, databaseId, null, 409, (err as Error).message);
      throw err;
    }
  });

  app.post('/databases/:databaseId/keys/:keyId/revoke', async (request, reply) => {
    const { databaseId, keyId } = parseForm(KeyParams, request.params);
    await actions.revokeApiKey(ctx, loginOf(request).user, databaseId, keyId);
    return reply.redirect(`/databases/${databaseId}/setup`, 303);
  });
}

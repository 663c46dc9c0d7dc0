// A database's advice in the people's API: what the diagnoses argue for between sessions.
import type { FastifyInstance } from 'fastify';
import type { ServiceContext } from '../../app/context.ts';
import { readAdvice } from '../../advice/queries.ts';
import { adviceView } from '../../advice/views.ts';
import { parseOr400 } from '../errors.ts';
import { DatabaseParams } from './database-routes.ts';
import { loginOf } from './login-of.ts';

export function registerAdviceRoutes(app: FastifyInstance, ctx: ServiceContext): void {
  app.get('/databases/:databaseId/advice', async (request) => {
    const { user } = loginOf(request);
    const { databaseId } = parseOr400(DatabaseParams, request.params, 'path');
    return adviceView(await readAdvice(ctx, user, databaseId));
  });
}

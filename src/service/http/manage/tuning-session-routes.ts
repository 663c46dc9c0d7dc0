// The people's API: tuning sessions (docs/service.md, "Tuning sessions").
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { ServiceContext } from '../../app/context.ts';
import { DatabaseIdSchema } from '../../databases/inputs.ts';
import * as tuning from '../../tuning/actions.ts';
import { adviceSeed } from '../../advice/seed.ts';
import { StartTuningSessionInputSchema } from '../../tuning/params.ts';
import * as queries from '../../tuning/queries.ts';
import { iterationViews, tuningSessionView } from '../../tuning/views.ts';
import { parseOr400 } from '../errors.ts';
import { parseStorableBody } from '../storable.ts';
import { DatabaseParams, ListQuery } from './database-routes.ts';
import { loginOf } from './login-of.ts';

const TuningSessionParams = z.object({
  databaseId: DatabaseIdSchema,
  sessionId: z.uuid({ error: 'expected a tuning session id (a UUID)' }),
});

export function registerTuningSessionRoutes(app: FastifyInstance, ctx: ServiceContext): void {
  app.post('/databases/:databaseId/tuning-sessions', async (request, reply) => {
    const { user } = loginOf(request);
    const { databaseId } = parseOr400(DatabaseParams, request.params, 'path');
    const input = parseStorableBody(StartTuningSessionInputSchema, request, {});
    const tuningSession = await tuning.startTuningSession(ctx, user, databaseId, input, (database) => adviceSeed(ctx, database));
    return reply.code(201).send({ session: tuningSessionView(tuningSession, []) });
  });

  app.get('/databases/:databaseId/tuning-sessions', async (request) => {
    const { user } = loginOf(request);
    const { databaseId } = parseOr400(DatabaseParams, request.params, 'path');
    const { limit } = parseOr400(ListQuery, request.query, 'query');
    return { sessions: (await queries.listTuningSessions(ctx, user, databaseId, limit)).map((s) => tuningSessionView(s)) };
  });

  app.get('/databases/:databaseId/tuning-sessions/:sessionId', async (request) => {
    const { user } = loginOf(request);
    const { databaseId, sessionId } = parseOr400(TuningSessionParams, request.params, 'path');
    const { session, iterations } = await queries.getTuningSession(ctx, user, databaseId, sessionId);
    return { session: tuningSessionView(session, iterations), iterations: iterationViews(session, iterations) };
  });

  const tuningSessionAction = (action: typeof tuning.stopTuningSession) => async (request: FastifyRequest) => {
    const { user } = loginOf(request);
    const { databaseId, sessionId } = parseOr400(TuningSessionParams, request.params, 'path');
    return { session: tuningSessionView(await action(ctx, user, databaseId, sessionId)) };
  };
  app.post('/databases/:databaseId/tuning-sessions/:sessionId/stop', tuningSessionAction(tuning.stopTuningSession));
  app.post('/databases/:databaseId/tuning-sessions/:sessionId/approve', tuningSessionAction(tuning.approveTuningSession));
  app.post('/databases/:databaseId/tuning-sessions/:sessionId/revert', tuningSessionAction(tuning.revertTuningSession));
}

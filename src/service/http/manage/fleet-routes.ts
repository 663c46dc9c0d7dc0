// The fleet in the people's API: the same answer as the fleet page, as JSON (docs/fleet.md).
import type { FastifyInstance } from 'fastify';
import type { ServiceContext } from '../../app/context.ts';
import { readFleet } from '../../fleet/fleet.ts';
import { FleetQuerySchema } from '../../fleet/query.ts';
import { fleetView } from '../../fleet/views.ts';
import { parseOr400 } from '../errors.ts';
import { loginOf } from './login-of.ts';

export function registerFleetRoutes(app: FastifyInstance, ctx: ServiceContext): void {
  app.get('/fleet', async (request) => {
    const { user } = loginOf(request);
    const query = parseOr400(FleetQuerySchema, request.query ?? {}, 'query');
    const answer = await readFleet(ctx, user, query);
    return fleetView(answer, query);
  });
}

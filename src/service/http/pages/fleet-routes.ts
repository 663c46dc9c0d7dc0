// The fleet page: every database of the organization at a glance, what needs a person first
// (src/service/fleet). Sort and filter are GET parameters, so a view can be bookmarked.
import type { FastifyInstance } from 'fastify';
import type { ServiceContext } from '../../app/context.ts';
import { readFleet } from '../../fleet/fleet.ts';
import { fleetQueryFromPage } from '../../fleet/query.ts';
import { fleetPage } from '../../web/fleet-page.ts';
import { loginOf, sendPage } from './page.ts';

export function registerFleetRoutes(app: FastifyInstance, ctx: ServiceContext): void {
  // The home page: what needs a person first. /fleet stays for links and bookmarks made before.
  for (const path of ['/', '/fleet']) {
    app.get(path, async (request, reply) => {
      const login = loginOf(request);
      const query = fleetQueryFromPage((request.query ?? {}) as Record<string, unknown>);
      return sendPage(reply, fleetPage(login, await readFleet(ctx, login.user, query), query));
    });
  }
}

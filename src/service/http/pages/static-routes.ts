// The pages' stylesheet, script and icon: served to anyone, cached for a while.
import type { FastifyInstance } from 'fastify';
import { APP_CSS, APP_JS, ICON_SVG } from '../../web/assets.ts';

export function registerStaticRoutes(app: FastifyInstance): void {
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
}

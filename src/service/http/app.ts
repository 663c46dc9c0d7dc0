// The HTTP server: four parts with their own body parsers and error handlers (Fastify
// encapsulation): protocol v1 for agents, the people's JSON API, the HTML pages, and the agent's
// installer and binaries.
import cookie from '@fastify/cookie';
import Fastify, { LogController, type FastifyInstance, type FastifyReply } from 'fastify';
import { API_PREFIX, MAX_BODY_BYTES } from '../../protocol/v1.ts';
import { errorBody } from './errors.ts';
import type { ServiceContext } from '../context.ts';
import { registerAgentApi } from './agent-api.ts';
import { registerDownloads } from './downloads.ts';
import { MANAGE_PREFIX, registerManageApi } from './manage-api.ts';
import { registerPages } from './pages.ts';
import { LoginThrottle } from './sessions.ts';

export interface AppOptions {
  /** Where log lines go (stdout by default). */
  logStream?: { write(line: string): void };
}

export function buildApp(ctx: ServiceContext, options: AppOptions = {}): FastifyInstance {
  const app = Fastify({
    logger: {
      level: ctx.config.logLevel,
      ...(options.logStream && { stream: options.logStream }),
      // Headers never go to the log: they carry API keys and session cookies.
      serializers: {
        req: (req: { method: string; url: string }) => ({ method: req.method, url: req.url.split('?')[0] }),
      },
    },
    // One line per request at 500 reports/s is noise and CPU; errors and agent events are logged.
    logController: new LogController({ disableRequestLogging: true }),
    trustProxy: ctx.config.trustProxy,
    bodyLimit: MAX_BODY_BYTES,
    // Slow clients cannot hold connections open for ever.
    requestTimeout: 30_000,
    connectionTimeout: 60_000,
    keepAliveTimeout: 65_000,
    return503OnClosing: true,
    routerOptions: { maxParamLength: 200 },
    // Errors found while routing (a malformed or overlong path), before any part's handler.
    frameworkErrors: (err, _request, reply) => {
      const tooLong = err.code === 'FST_ERR_MAX_PARAM_LENGTH';
      const message = tooLong ? 'a part of the path is longer than any id this service uses' : 'the path is not a valid URL path';
      void (reply as FastifyReply).code(tooLong ? 414 : 400).type('application/json; charset=utf-8').send(errorBody('bad_request', message));
    },
  });
  const throttle = new LoginThrottle();

  void app.register(cookie);
  // For load balancers and orchestrators: 200 while the storage answers, 503 otherwise.
  app.get('/healthz', async (_request, reply) => {
    try {
      await ctx.storage.ping();
      return await reply.send({ ok: true });
    } catch {
      return reply.code(503).send(errorBody('internal', 'the storage does not answer'));
    }
  });
  void app.register(
    (scope, _options, done) => {
      registerAgentApi(scope, ctx);
      done();
    },
    { prefix: API_PREFIX },
  );
  void app.register(
    (scope, _options, done) => {
      registerManageApi(scope, ctx, throttle);
      done();
    },
    { prefix: MANAGE_PREFIX },
  );
  // The installer and the binaries: fetched by an operator's host, with no login.
  void app.register((scope, _options, done) => {
    registerDownloads(scope, ctx);
    done();
  });
  void app.register((scope, _options, done) => {
    registerPages(scope, ctx, throttle);
    done();
  });
  return app;
}

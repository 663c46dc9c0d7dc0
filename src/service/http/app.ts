// The HTTP server: four parts with their own body parsers and error handlers (Fastify
// encapsulation): protocol v1 for agents, the people's JSON API, the HTML pages, and the agent's
// installer and binaries.
import cookie from '@fastify/cookie';
import Fastify, { LogController, type FastifyInstance, type FastifyReply } from 'fastify';
import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import { API_PREFIX, MAX_BODY_BYTES } from '../../protocol/v1.ts';
import { errorBody } from './errors.ts';
import type { ServiceContext } from '../app/context.ts';
import { observeAgentApi, registerMetricsRoute } from '../app/metrics.ts';
import { registerAgentApi } from './agent-api.ts';
import { registerDownloads } from './downloads.ts';
import { MANAGE_PREFIX, registerManageApi } from './manage-api.ts';
import { registerPages } from './pages.ts';
import { LoginThrottle } from '../people/throttle.ts';

export interface AppOptions {
  /** Where log lines go (stdout by default). */
  logStream?: { write(line: string): void };
  /** How long a client may take to send a whole request (30 s; shorter in tests). */
  requestTimeoutMs?: number;
}

const REQUEST_TIMEOUT_MS = 30_000;

export function buildApp(ctx: ServiceContext, options: AppOptions = {}): FastifyInstance {
  const requestTimeoutMs = options.requestTimeoutMs ?? REQUEST_TIMEOUT_MS;
  const app = Fastify({
    logger: {
      level: ctx.config.logLevel,
      ...(options.logStream && { stream: options.logStream }),
      // Headers never go to the log: they carry API keys and login cookies.
      serializers: {
        req: (req: { method: string; url: string }) => ({ method: req.method, url: req.url.split('?')[0] }),
      },
    },
    // One line per request at 500 reports/s is noise and CPU; errors and agent events are logged.
    logController: new LogController({ disableRequestLogging: true }),
    trustProxy: trustProxyOption(ctx.config.trustProxy),
    bodyLimit: MAX_BODY_BYTES,
    // Slow clients cannot hold connections open for ever: the headers must arrive within the
    // timeout, checked every second (Node checks every 30 s by default, so the timeout fired at up
    // to twice its value), and the body within the timeout after them (the onRequest hook below:
    // Node's timeout stops at the headers); both are answered with the protocol's error body.
    requestTimeout: requestTimeoutMs,
    // With a certificate, HTTPS without a reverse proxy (--tls-cert/--tls-key).
    ...(ctx.config.tls
      ? { https: { cert: ctx.config.tls.cert, key: ctx.config.tls.key, connectionsCheckingInterval: Math.min(1000, requestTimeoutMs) } }
      : { http: { connectionsCheckingInterval: Math.min(1000, requestTimeoutMs) } }),
    clientErrorHandler: (err, socket) => answerClientError(err, socket, requestTimeoutMs),
    connectionTimeout: 60_000,
    keepAliveTimeout: 65_000,
    return503OnClosing: true,
    routerOptions: { maxParamLength: 200 },
    // Errors found while routing (a malformed or overlong path), before any part's handler.
    frameworkErrors: (err, _request, reply) => {
      const tooLong = err.code === 'FST_ERR_MAX_PARAM_LENGTH';
      const message = tooLong ? 'a part of the path is longer than any id this service uses' : 'the path is not a valid URL path';
      void (reply as FastifyReply)
        .code(tooLong ? 414 : 400)
        .type('application/json; charset=utf-8')
        .send(errorBody('bad_request', message));
    },
  });
  const throttle = new LoginThrottle(ctx.stores.loginFailures);

  app.addHook('onRequest', (request, reply, done) => {
    if (!request.raw.complete) {
      const timer = setTimeout(() => {
        if (!request.raw.complete && !reply.sent) answerRaw(request.raw.socket, 408, tooSlow(requestTimeoutMs));
      }, requestTimeoutMs).unref();
      reply.raw.once('close', () => clearTimeout(timer));
      request.raw.once('close', () => clearTimeout(timer));
    }
    done();
  });

  if (ctx.config.tls) {
    // Served over HTTPS itself: browsers keep to HTTPS for this host from now on (a year).
    app.addHook('onSend', (_request, reply, payload, done) => {
      void reply.header('strict-transport-security', 'max-age=31536000');
      done(null, payload);
    });
  }

  void app.register(cookie);
  // For load balancers and orchestrators: 200 while the storage answers. While it does not (a
  // storage failover, an outage) the service is degraded, not dead: it answers 503 saying so and
  // reconnects by itself, so a liveness probe must not restart it for that (docs/operations.md).
  app.get('/healthz', async (_request, reply) => {
    try {
      await ctx.ping();
      return await reply.send({ ok: true, status: 'ok' });
    } catch {
      return reply.code(503).send({
        ok: false,
        status: 'degraded',
        ...errorBody(
          'internal',
          'the storage does not answer; the service keeps trying it and refuses requests that need it until it does',
        ),
      });
    }
  });
  if (ctx.metrics && ctx.config.metricsToken) registerMetricsRoute(app, ctx.metrics, ctx.config.metricsToken);
  void app.register(
    (scope, _options, done) => {
      registerAgentApi(scope, ctx);
      if (ctx.metrics) observeAgentApi(scope, ctx.metrics);
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

/** TUNER_TRUST_PROXY as Fastify takes it: a number of proxies as a function of the hop (Fastify's
 * own number form trusts no proxy at all). */
function trustProxyOption(trust: ServiceContext['config']['trustProxy']): false | string[] | ((address: string, hop: number) => boolean) {
  return typeof trust === 'number' ? (_address, hop) => hop < trust : trust;
}

const tooSlow = (requestTimeoutMs: number) => `the request did not arrive whole within ${requestTimeoutMs / 1000} s`;

/** Errors Node meets before a request reaches Fastify (headers too slow to arrive or too large, a
 * malformed request), answered in the protocol's error body like every other error. */
function answerClientError(err: Error & { code?: string }, socket: Socket, requestTimeoutMs: number): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') answerRaw(socket, 408, tooSlow(requestTimeoutMs));
  else if (err.code === 'HPE_HEADER_OVERFLOW') answerRaw(socket, 431, 'the request headers are too large');
  else answerRaw(socket, 400, 'the request is not valid HTTP');
}

/** Answers on the socket itself, for a request that cannot be answered through Fastify, then closes it. */
function answerRaw(socket: Socket, status: number, message: string): void {
  const body = JSON.stringify(errorBody('bad_request', message));
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy();
}

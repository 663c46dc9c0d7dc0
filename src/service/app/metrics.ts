// tuner-service's metrics for Prometheus (docs/metrics.md). Off by default: TUNER_METRICS_TOKEN
// serves /metrics on the main listener behind that bearer token, TUNER_METRICS_LISTEN (or
// --metrics-listen) on a listener of its own. The gauges are read from the storage at each
// scrape, so every replica shows the same fleet; the counters count what this process saw.
import { createHash, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { FastifyInstance } from 'fastify';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { COMMAND_KINDS, COMMAND_OUTCOMES, type Command, type CommandAckRequest } from '../../protocol/v1.ts';
import { bearerToken } from '../http/bearer.ts';
import { errorBody } from '../http/errors.ts';
import type { MetricsSnapshot } from '../storage/sql-metrics.ts';
import { TUNING_SESSION_STATES } from '../tuning/store.ts';
import type { WatchEvent } from '../watch/store.ts';
import { WATCH_STATES, type WatchState } from '../watch/verdict.ts';
import { SERVICE_VERSION } from './version.ts';

/** A report's outcome, from the answer's status: accepted (200), unauthorized (401, a wrong key or
 * database id), lease_expired (409), refused (another 4xx: a body the service would not take),
 * error (5xx: the service's or its storage's fault). */
export const REPORT_OUTCOMES = ['accepted', 'unauthorized', 'lease_expired', 'refused', 'error'] as const;

export interface ServiceMetrics {
  registry: Registry;
  /** Counts one storage failure (given to openStorage). */
  storageError: (err: unknown) => void;
  /** Where the gauges read the fleet from, once the storage is open. */
  readGaugesFrom(source: GaugeSource): void;
  /** One event the watch raised (and saved) in this process. */
  watchEventRaised(code: WatchEvent['code']): void;
  /** One acknowledged command. */
  commandAcknowledged(kind: Command['kind'], outcome: CommandAckRequest['status']): void;
  /** One report answered, with the answer's status and the time it took. */
  reportAnswered(statusCode: number, seconds: number): void;
}

/** The watch's events, each counted from 0. */
const WATCH_EVENT_CODES: readonly WatchEvent['code'][] = ['kept_gain_gone', 'workload_changed'];

type GaugeSource = {
  metricsSnapshot(): Promise<MetricsSnapshot>;
  watchCounts(): Promise<{ byState: Record<WatchState, number>; workloadChanged: number }>;
};

/** `read`, called once however many gauges ask while it runs (the registry collects them
 * together, so one scrape reads the storage once); null when there is nothing to read or the
 * storage did not answer (counted by the storage-errors counter: the scrape goes on). */
function oncePerScrape<T>(read: () => Promise<T> | null): () => Promise<T | null> {
  let reading: Promise<T | null> | null = null;
  return () => (reading ??= (read() ?? Promise.resolve(null)).catch(() => null).finally(() => (reading = null)));
}

export function createServiceMetrics(): ServiceMetrics {
  const registry = new Registry();
  const registers = [registry];
  let source: GaugeSource | null = null;
  const snapshot = oncePerScrape(() => source?.metricsSnapshot() ?? null);
  const watchCounts = oncePerScrape(() => source?.watchCounts() ?? null);

  new Gauge({ name: 'tuner_service_info', help: 'Always 1; the version of this tuner-service.', labelNames: ['version'], registers }).set(
    { version: SERVICE_VERSION },
    1,
  );
  new Gauge({
    name: 'tuner_service_agents_connected',
    help: 'Databases whose agent holds a live lease (reported within its lease time, not stopped).',
    registers,
    async collect() {
      const figures = await snapshot();
      if (figures) this.set(figures.agentsConnected);
    },
  });
  new Gauge({
    name: 'tuner_service_tuning_sessions',
    help: 'Tuning sessions kept by the service, by state.',
    labelNames: ['state'],
    registers,
    async collect() {
      const figures = await snapshot();
      if (!figures) return;
      for (const state of TUNING_SESSION_STATES) this.set({ state }, figures.sessionsByState[state] ?? 0);
    },
  });
  new Gauge({
    name: 'tuner_service_advice_pending',
    help: 'Databases whose advice between sessions argues for a change while no session runs (the fleet\'s "advice pending").',
    registers,
    async collect() {
      const figures = await snapshot();
      if (figures) this.set(figures.advicePending);
    },
  });
  new Gauge({
    name: 'tuner_service_webhook_events',
    help: 'Webhook events in the outbox, by state (pending: to be sent or retried; delivered; failed: given up).',
    labelNames: ['state'],
    registers,
    async collect() {
      const figures = await snapshot();
      if (!figures) return;
      for (const state of ['pending', 'delivered', 'failed']) this.set({ state }, figures.webhooksByState[state] ?? 0);
    },
  });
  new Gauge({
    name: 'tuner_service_kept_watch',
    help: 'Databases whose kept configuration is watched, by the watch state (measuring, holding, gone).',
    labelNames: ['state'],
    registers,
    async collect() {
      const counts = await watchCounts();
      if (!counts) return;
      for (const state of WATCH_STATES) this.set({ state }, counts.byState[state]);
    },
  });
  new Gauge({
    name: 'tuner_service_workload_changed',
    help: 'Databases whose statement mix is no longer the one their kept configuration was verified on.',
    registers,
    async collect() {
      const counts = await watchCounts();
      if (counts) this.set(counts.workloadChanged);
    },
  });
  const watchEvents = new Counter({
    name: 'tuner_service_watch_events_total',
    help: 'Events the watch raised in this process, by kind (kept_gain_gone, workload_changed).',
    labelNames: ['kind'],
    registers,
  });
  for (const kind of WATCH_EVENT_CODES) watchEvents.inc({ kind }, 0);
  const reports = new Counter({
    name: 'tuner_service_reports_total',
    help: 'Agent reports received, by outcome.',
    labelNames: ['outcome'],
    registers,
  });
  const reportDuration = new Histogram({
    name: 'tuner_service_report_duration_seconds',
    help: 'Time from an agent report arriving to its answer being sent, in seconds.',
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers,
  });
  const commands = new Counter({
    name: 'tuner_service_commands_total',
    help: 'Commands acknowledged by agents, by kind and outcome.',
    labelNames: ['kind', 'outcome'],
    registers,
  });
  const storageErrors = new Counter({
    name: 'tuner_service_storage_errors_total',
    help: 'Storage statements or transactions that failed.',
    registers,
  });
  // Every series exists from the start at 0, so that rate() and alerts see the first event.
  for (const outcome of REPORT_OUTCOMES) reports.inc({ outcome }, 0);
  for (const kind of COMMAND_KINDS) for (const outcome of COMMAND_OUTCOMES) commands.inc({ kind, outcome }, 0);

  return {
    registry,
    storageError: () => storageErrors.inc(),
    readGaugesFrom: (s) => {
      source = s;
    },
    commandAcknowledged: (kind, outcome) => commands.inc({ kind, outcome }),
    watchEventRaised: (kind) => watchEvents.inc({ kind }),
    reportAnswered: (statusCode, seconds) => {
      reports.inc({ outcome: reportOutcome(statusCode) });
      reportDuration.observe(seconds);
    },
  };
}

function reportOutcome(statusCode: number): (typeof REPORT_OUTCOMES)[number] {
  if (statusCode < 300) return 'accepted';
  if (statusCode === 401) return 'unauthorized';
  if (statusCode === 409) return 'lease_expired';
  return statusCode < 500 ? 'refused' : 'error';
}

/** Counts and times the reports the agent API answers (called in its scope). */
export function observeAgentApi(scope: FastifyInstance, metrics: ServiceMetrics): void {
  scope.addHook('onResponse', (request, reply, done) => {
    if (request.method === 'POST' && request.routeOptions.url?.endsWith('/reports'))
      metrics.reportAnswered(reply.statusCode, reply.elapsedTime / 1000);
    done();
  });
}

/** Whether an Authorization header carries the token (compared in constant time). */
function tokenAccepted(header: string | undefined, token: string): boolean {
  const presented = bearerToken(header);
  if (!presented) return false;
  const digest = (text: string) => createHash('sha256').update(text).digest();
  return timingSafeEqual(digest(presented), digest(token));
}

const UNAUTHORIZED = JSON.stringify(
  errorBody('unauthorized', 'send the header "Authorization: Bearer <TUNER_METRICS_TOKEN>" to read the metrics'),
);

/** GET /metrics on the main listener, behind the bearer token. */
export function registerMetricsRoute(app: FastifyInstance, metrics: ServiceMetrics, token: string): void {
  app.get('/metrics', async (request, reply) => {
    if (!tokenAccepted(request.headers.authorization, token)) {
      return reply.code(401).header('www-authenticate', 'Bearer').type('application/json; charset=utf-8').send(UNAUTHORIZED);
    }
    return reply
      .type(metrics.registry.contentType)
      .header('cache-control', 'no-store')
      .send(await metrics.registry.metrics());
  });
}

export interface MetricsListener {
  /** http://host:port/metrics, as listening. */
  url: string;
  close(): Promise<void>;
}

/** /metrics on a listener of its own (--metrics-listen): plain HTTP, meant for a private
 * interface; behind the token too when TUNER_METRICS_TOKEN is set. */
export async function startMetricsListener(
  address: { host: string; port: number },
  metrics: ServiceMetrics,
  token: string | undefined,
): Promise<MetricsListener> {
  const answer = (response: ServerResponse, status: number, type: string, body: string) => {
    response
      .writeHead(status, { 'content-type': type, 'cache-control': 'no-store', ...(status === 401 && { 'www-authenticate': 'Bearer' }) })
      .end(body);
  };
  const json = 'application/json; charset=utf-8';
  const server = createServer((request: IncomingMessage, response: ServerResponse) => {
    const path = (request.url ?? '').split('?')[0];
    if (path !== '/metrics')
      return answer(response, 404, json, JSON.stringify(errorBody('not_found', 'this listener serves GET /metrics only')));
    if (request.method !== 'GET' && request.method !== 'HEAD')
      return answer(response, 405, json, JSON.stringify(errorBody('bad_request', 'use GET /metrics')));
    if (token !== undefined && !tokenAccepted(request.headers.authorization, token)) return answer(response, 401, json, UNAUTHORIZED);
    metrics.registry.metrics().then(
      (text) => answer(response, 200, metrics.registry.contentType, text),
      () => answer(response, 500, json, JSON.stringify(errorBody('internal', 'the metrics could not be gathered'))),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(address.port, address.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const bound = server.address();
  const port = typeof bound === 'object' && bound ? bound.port : address.port;
  const host = address.host.includes(':') ? `[${address.host}]` : address.host === '0.0.0.0' ? '127.0.0.1' : address.host;
  return {
    url: `http://${host}:${port}/metrics`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

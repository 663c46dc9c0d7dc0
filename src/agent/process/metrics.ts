// tuner-agent's own metrics for Prometheus (docs/metrics.md), served on GET /metrics when
// --metrics-listen or tuner.metrics_listen names an address. Off by default; cli.ts imports this
// module only then, so an agent without metrics does not load prom-client.
import { createServer, type Server } from 'node:http';
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import { hostAndPort } from '../../protocol/host-port.ts';
import { COMMAND_OUTCOMES, type CommandAckRequest } from '../../protocol/v1.ts';
import { sameOverride, type Journal } from '../applying/journal.ts';
import { AGENT_VERSION } from '../base/version.ts';

type Outcome = CommandAckRequest['status'];
/** Why the agent returned the database to an earlier configuration. */
const REVERT_CAUSES = ['command', 'guardrail', 'recovery'] as const;
export type RevertCause = (typeof REVERT_CAUSES)[number];

/** What the loop tells the metrics (src/agent/process/loop.ts). */
export interface AgentMetrics {
  /** One collection, with how long it took. */
  collected(seconds: number): void;
  /** Reports dropped from the full queue while the service was away. */
  reportsDropped(count: number): void;
  /** The service took a report. */
  reportDelivered(): void;
  /** An apply command carried out, with its outcome. */
  applied(outcome: Outcome): void;
  /** A return to the baseline or known-good configuration, with its cause and outcome. */
  reverted(cause: RevertCause, outcome: Outcome): void;
  guardrailBreached(): void;
  /** Where the gauges read the loop's state from at each scrape. */
  observe(state: { queuedReports: () => number; journal: Journal }): void;
}

/** A HOST:PORT address, or a message naming `source` and what is expected. */
export function parseMetricsListen(text: string, source: string): { host: string; port: number } | { problem: string } {
  const address = hostAndPort(text.trim());
  if (!address || address.port > 65535)
    return { problem: `${source}: expected HOST:PORT, e.g. 127.0.0.1:9187 or 0.0.0.0:9187 (got "${text.slice(0, 80)}")` };
  return address;
}

export function createAgentMetrics(labels: { target: string }): { registry: Registry; metrics: AgentMetrics } {
  const registry = new Registry();
  const registers = [registry];
  let state: { queuedReports: () => number; journal: Journal } | null = null;

  new Gauge({
    name: 'tuner_agent_info',
    help: 'Always 1; the version and target of this tuner-agent.',
    labelNames: ['version', 'target'],
    registers,
  }).set({ version: AGENT_VERSION, target: labels.target }, 1);
  const collectionSeconds = new Histogram({
    name: 'tuner_agent_collection_duration_seconds',
    help: 'Time one collection of the database statistics took, in seconds.',
    buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
    registers,
  });
  new Gauge({
    name: 'tuner_agent_reports_queued',
    help: 'Reports collected and not yet taken by the tuning service.',
    registers,
    collect() {
      this.set(state?.queuedReports() ?? 0);
    },
  });
  const dropped = new Counter({
    name: 'tuner_agent_reports_dropped_total',
    help: 'Reports dropped because the queue was full while the tuning service was away.',
    registers,
  });
  const delivered = new Counter({ name: 'tuner_agent_reports_delivered_total', help: 'Reports the tuning service took.', registers });
  const lastDelivered = new Gauge({
    name: 'tuner_agent_last_report_timestamp_seconds',
    help: 'When the tuning service last took a report (Unix time, seconds); 0 before the first.',
    registers,
  });
  const applies = new Counter({
    name: 'tuner_agent_applies_total',
    help: 'Apply commands carried out, by outcome.',
    labelNames: ['outcome'],
    registers,
  });
  const reverts = new Counter({
    name: 'tuner_agent_reverts_total',
    help: 'Returns to the baseline or known-good configuration, by cause (command, guardrail, recovery) and outcome.',
    labelNames: ['cause', 'outcome'],
    registers,
  });
  const breaches = new Counter({
    name: 'tuner_agent_guardrail_breaches_total',
    help: 'Trial configurations reverted because a guardrail was breached.',
    registers,
  });
  new Gauge({
    name: 'tuner_agent_parameters_changed',
    help: 'Parameters whose applied value differs from the value the agent found (the baseline).',
    registers,
    collect() {
      const d = state?.journal.data;
      this.set(d ? Object.keys(d.applied).filter((name) => !sameOverride(d.applied[name], d.baseline[name])).length : 0);
    },
  });
  new Gauge({
    name: 'tuner_agent_parameters_unaccepted',
    help: 'Parameters not at their known-good value: a trial applied, or a change cut off.',
    registers,
    collect() {
      this.set(state?.journal.notAtKnownGood().length ?? 0);
    },
  });
  // Every series exists from the start at 0, so that rate() and alerts see the first event.
  for (const outcome of COMMAND_OUTCOMES) {
    applies.inc({ outcome }, 0);
    for (const cause of REVERT_CAUSES) reverts.inc({ cause, outcome }, 0);
  }

  const metrics: AgentMetrics = {
    collected: (seconds) => collectionSeconds.observe(seconds),
    reportsDropped: (count) => dropped.inc(count),
    reportDelivered: () => {
      delivered.inc();
      lastDelivered.set(Date.now() / 1000);
    },
    applied: (outcome) => applies.inc({ outcome }),
    reverted: (cause, outcome) => reverts.inc({ cause, outcome }),
    guardrailBreached: () => breaches.inc(),
    observe: (s) => {
      state = s;
    },
  };
  return { registry, metrics };
}

export interface AgentMetricsServer {
  metrics: AgentMetrics;
  /** http://host:port/metrics, as listening. */
  url: string;
  close(): Promise<void>;
}

/** Serves GET /metrics (plain HTTP, no authentication: bind it to loopback or a private
 * interface; the figures hold no secret, no query text, no parameter value). */
export async function startAgentMetrics(address: { host: string; port: number }, labels: { target: string }): Promise<AgentMetricsServer> {
  const { registry, metrics } = createAgentMetrics(labels);
  const server: Server = createServer((request, response) => {
    const path = (request.url ?? '').split('?')[0];
    const plain = { 'content-type': 'text/plain; charset=utf-8' };
    if (path !== '/metrics') return void response.writeHead(404, plain).end('this listener serves GET /metrics only\n');
    if (request.method !== 'GET' && request.method !== 'HEAD') return void response.writeHead(405, plain).end('use GET /metrics\n');
    registry.metrics().then(
      (text) => response.writeHead(200, { 'content-type': registry.contentType, 'cache-control': 'no-store' }).end(text),
      () => response.writeHead(500, plain).end('the metrics could not be gathered\n'),
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(address.port, address.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  // The listener must not keep a stopping agent alive.
  server.unref();
  const bound = server.address();
  const port = typeof bound === 'object' && bound ? bound.port : address.port;
  const host = address.host.includes(':') ? `[${address.host}]` : address.host === '0.0.0.0' ? '127.0.0.1' : address.host;
  return {
    metrics,
    url: `http://${host}:${port}/metrics`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

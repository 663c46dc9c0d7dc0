// Starting and stopping the whole service: storage (migrated), the first admin, the HTTP server,
// and the retention job. Used by the bin, the tests and the benchmark alike.
import type { FastifyInstance } from 'fastify';
import { ensureFirstAdmin } from '../people/actions.ts';
import type { ServiceConfig } from './config.ts';
import { createServiceContext } from './context.ts';
import { buildApp } from '../http/app.ts';
import { createServiceMetrics, startMetricsListener, type MetricsListener } from './metrics.ts';
import { startTuningSessionTicker } from '../tuning/ticker.ts';
import { startWatchTicker, WATCH_DEFAULTS, type WatchOptions } from '../watch/watch.ts';
import { ADVICE_REFRESH_DEFAULTS, startAdviceRefresh, type AdviceRefreshOptions } from '../advice/refresh.ts';
import type { WebhookLogEntry } from '../notify/webhook.ts';
import { openStorage } from '../storage/open.ts';
import { safeErrorForLog } from '../errors.ts';
import type { Storage } from '../storage/storage.ts';

const PRUNE_EVERY_MS = 10 * 60_000;

export interface RunningService {
  /** http(s)://host:port, as listening (the port chosen by the system when 0 was asked). */
  url: string;
  app: FastifyInstance;
  storage: Storage;
  /** The separate metrics listener's address (--metrics-listen), when there is one. */
  metricsUrl?: string;
  close(): Promise<void>;
}

export interface StartOptions {
  /** Where the first admin's generated password is told (once); stdout by default. */
  announce?: (text: string) => void;
  /** Where log lines go (stdout by default). */
  logStream?: { write(line: string): void };
  /** How long a client may take to send a whole request (30 s; shorter in tests). */
  requestTimeoutMs?: number;
  /** Where leases' time counts from (the storage's now() by default; a test's clock in tests). */
  leaseClock?: () => Date;
  /** The watch on kept configurations: how often it looks, and its periods (shorter in tests). */
  watch?: Partial<WatchOptions> & { everyMs?: number };
  /** The advice kept for the fleet: how often it looks, and how often a database is computed. */
  advice?: Partial<AdviceRefreshOptions> & { everyMs?: number };
}

const WATCH_TICK_MS = 15_000;
const ADVICE_TICK_MS = 15_000;
/** How often the webhook's outbox looks for events due (new ones are sent at once; retries wait
 * for their backoff, whose first step is about a second). */
const WEBHOOK_TICK_MS = 1000;

export async function startService(config: ServiceConfig, options: StartOptions = {}): Promise<RunningService> {
  const metrics = config.metricsToken || config.metricsListen ? createServiceMetrics() : undefined;
  const storage = await openStorage({
    databaseUrl: config.databaseUrl,
    dataDir: config.dataDir,
    poolSize: config.databasePoolSize,
    onError: metrics?.storageError,
  });
  metrics?.readGaugesFrom(storage);
  // The webhook logs through the app's logger, once there is one.
  const webhookLog: { to?: (entry: WebhookLogEntry) => void } = {};
  const ctx = createServiceContext(storage, config, {
    metrics,
    leaseClock: options.leaseClock,
    webhookLog: (entry) => webhookLog.to?.(entry),
  });
  let app: FastifyInstance | undefined;
  let metricsListener: MetricsListener | undefined;
  try {
    await ensureFirstAdmin(ctx, options.announce ?? ((text) => process.stdout.write(text)));
    app = buildApp(ctx, {
      ...(options.logStream && { logStream: options.logStream }),
      ...(options.requestTimeoutMs && { requestTimeoutMs: options.requestTimeoutMs }),
    });
    await app.listen({ host: config.host, port: config.port });
    if (metrics && config.metricsListen) metricsListener = await startMetricsListener(config.metricsListen, metrics, config.metricsToken);
  } catch (err) {
    await app?.close().catch(() => undefined);
    await storage.close().catch(() => undefined);
    throw err;
  }
  const listening = app;
  webhookLog.to = ({ level, message, ...fields }) => listening.log[level](fields, message);
  // An unreachable provider does not stop the service: password login (if on) keeps working, the
  // login page says why SSO is unavailable, and the next sign-in attempt asks the provider again.
  void ctx.sso?.discover().then(
    () => listening.log.info({ issuer: config.sso?.issuer }, 'single sign-on: provider discovered'),
    (err: unknown) => listening.log.error(`single sign-on: ${(err as Error).message}; it is tried again at the next sign-in`),
  );
  let pruning: Promise<void> = Promise.resolve();
  const prune = async () => {
    try {
      const removed = await storage.prune({
        maxAgeDays: config.retentionDays,
        maxReportsPerDatabase: config.retentionReportsPerDatabase,
        maxEventsPerDatabase: config.retentionReportsPerDatabase,
        auditMaxAgeDays: config.auditRetentionDays,
      });
      if (removed.reports + removed.events + removed.auditEvents > 0) listening.log.info(removed, 'retention: old rows removed');
    } catch (err) {
      listening.log.warn({ err: { name: (err as Error).name } }, 'retention job failed; it runs again later');
    }
  };
  pruning = prune();
  const timer = setInterval(() => {
    pruning = pruning.then(prune);
  }, PRUNE_EVERY_MS);
  timer.unref();

  // Tuning sessions move with reports and acks; the ticker catches what no request brings.
  const tuningSessionTicker = startTuningSessionTicker(ctx, listening.log);
  // The watch judges kept configurations on the reports that keep coming (watch/).
  const { everyMs: watchEveryMs = WATCH_TICK_MS, ...watchOptions } = options.watch ?? {};
  const watchTicker = startWatchTicker(ctx, listening.log, { ...WATCH_DEFAULTS, ...watchOptions }, watchEveryMs);
  // The advice the fleet shows, computed after reports arrive, off the page's request (advice/).
  const { everyMs: adviceEveryMs = ADVICE_TICK_MS, ...adviceOptions } = options.advice ?? {};
  const adviceRefresh = startAdviceRefresh(ctx, listening.log, { ...ADVICE_REFRESH_DEFAULTS, ...adviceOptions }, adviceEveryMs);
  // Every replica sends from the outbox; the claims keep two from sending one event.
  ctx.webhook.start(WEBHOOK_TICK_MS, (err) =>
    listening.log.warn({ err: safeErrorForLog(err) }, 'webhook: could not read the outbox; it tries again'),
  );

  const address = listening.server.address();
  const port = typeof address === 'object' && address ? address.port : config.port;
  const host = config.host.includes(':') ? `[${config.host}]` : config.host === '0.0.0.0' ? '127.0.0.1' : config.host;
  let closing: Promise<void> | undefined;
  return {
    url: `${config.tls ? 'https' : 'http'}://${host}:${port}`,
    app: listening,
    storage,
    ...(metricsListener && { metricsUrl: metricsListener.url }),
    close: () =>
      (closing ??= (async () => {
        await metricsListener?.close();
        clearInterval(timer);
        await tuningSessionTicker.stop();
        await watchTicker.stop();
        await adviceRefresh.stop();
        await ctx.webhook.close();
        await listening.close();
        await pruning;
        await storage.close();
      })()),
  };
}

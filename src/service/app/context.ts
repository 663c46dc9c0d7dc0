// What every part of the running service shares: one of each per running service. The storage
// reaches the features as their ports (<feature>/store.ts), each feature declaring the few it
// uses (its Deps type), never as the whole Storage; the routes call the features' queries and
// actions, never a port.
import type { AgentStore, LeasePolicy } from '../agents/store.ts';
import type { DatabaseStore } from '../databases/store.ts';
import type { FleetStore } from '../fleet/store.ts';
import type { ApiTokenStore, LoginFailureStore, PeopleStore } from '../people/store.ts';
import type { Storage } from '../storage/storage.ts';
import type { TuningStore } from '../tuning/store.ts';
import type { WatchStore } from '../watch/store.ts';
import type { WebhookLogEntry } from '../notify/webhook.ts';
import { WebhookDestinations } from '../notify/destinations.ts';
import { WebhookOutbox } from '../notify/outbox.ts';
import type { WebhookOutboxStore, WebhookStore } from '../notify/store.ts';
import type { AdviceStore } from '../advice/store.ts';
import type { AuditStore } from '../audit/store.ts';
import { RunningSessions } from '../tuning/running.ts';
import { SsoClient } from '../people/sso-client.ts';
import type { ServiceConfig } from './config.ts';
import type { ServiceMetrics } from './metrics.ts';

/** The features' ports: the same storage, seen through each feature's narrow interface. */
export interface FeatureStores {
  people: PeopleStore;
  databases: DatabaseStore;
  agents: AgentStore;
  tuning: TuningStore;
  fleet: FleetStore;
  watch: WatchStore;
  webhooks: WebhookOutboxStore & WebhookStore;
  advice: AdviceStore;
  audit: AuditStore;
  tokens: ApiTokenStore;
  loginFailures: LoginFailureStore;
}

export interface ServiceContext {
  stores: FeatureStores;
  /** Throws when the storage does not answer (the health check). */
  ping(): Promise<void>;
  config: ServiceConfig;
  leasePolicy: LeasePolicy;
  /** Which databases have a running tuning session, as this replica last saw it (a cache). */
  runningSessions: RunningSessions;
  /** Present when metrics are served (TUNER_METRICS_TOKEN or --metrics-listen). */
  metrics?: ServiceMetrics;
  /** The webhooks' sender for the watch's events (their outbox in the storage): to the
   * organizations' webhooks, and to TUNER_WEBHOOK_URL when set; started with the service, closed
   * on shutdown. */
  webhook: WebhookOutbox;
  /** Where organizations' webhooks may send (public addresses, and TUNER_WEBHOOK_ALLOW_NETWORKS). */
  webhookDestinations: WebhookDestinations;
  /** The OpenID provider's client, when single sign-on is configured (TUNER_SSO_ISSUER). */
  sso?: SsoClient;
}

export interface ServiceContextOptions {
  /** Present when metrics are served. */
  metrics?: ServiceMetrics | undefined;
  /** Where leases' time counts from (the storage's now() by default; a test's clock in tests). */
  leaseClock?: (() => Date) | undefined;
  /** Where the webhook's deliveries are logged. */
  webhookLog?: ((entry: WebhookLogEntry) => void) | undefined;
}

export function createServiceContext(
  storage: Storage,
  config: ServiceConfig,
  { metrics, leaseClock, webhookLog }: ServiceContextOptions = {},
): ServiceContext {
  const webhookDestinations = new WebhookDestinations(config.webhookAllowNetworks);
  const webhook = new WebhookOutbox(storage, {
    ...(config.webhookUrl && config.webhookSecret && { serviceWide: { url: config.webhookUrl, secret: config.webhookSecret } }),
    destinations: webhookDestinations,
    ...(webhookLog && { log: webhookLog }),
  });
  return {
    stores: {
      people: storage,
      databases: storage,
      agents: storage,
      tuning: storage,
      fleet: storage,
      watch: storage,
      webhooks: storage,
      advice: storage,
      audit: storage,
      tokens: storage,
      loginFailures: storage,
    },
    ping: () => storage.ping(),
    config,
    leasePolicy: leasePolicyOf(config, leaseClock),
    runningSessions: new RunningSessions(),
    ...(metrics && { metrics }),
    webhook,
    webhookDestinations,
    ...(config.sso && { sso: new SsoClient(config.sso) }),
  };
}

/** The protocol's rule: a lease lasts max(3 × report interval, 30 s) (the minimum configurable). */
function leasePolicyOf(config: ServiceConfig, clock?: () => Date): LeasePolicy {
  return {
    defaultIntervalSeconds: config.reportIntervalSeconds,
    intervalsPerLease: 3,
    minLeaseSeconds: config.leaseMinSeconds,
    ...(clock && { clock }),
  };
}

// The service's storage: each feature's port (people/, databases/, agents/, tuning/ store.ts),
// and the housekeeping of the whole. One implementation (sql-storage.ts, one SQL module per
// feature) serves both PGlite and PostgreSQL with the same SQL.
import type { AgentStore } from '../agents/store.ts';
import type { DatabaseStore } from '../databases/store.ts';
import type { ApiTokenStore, LoginFailureStore, PeopleStore } from '../people/store.ts';
import type { TuningStore } from '../tuning/store.ts';
import type { MetricsSnapshot } from './sql-metrics.ts';
import type { FleetStore } from '../fleet/store.ts';
import type { WatchStore } from '../watch/store.ts';
import type { WebhookOutboxStore, WebhookStore } from '../notify/store.ts';
import type { AdviceStore } from '../advice/store.ts';
import type { AuditStore } from '../audit/store.ts';

export interface RetentionPolicy {
  /** Reports and events older than this are deleted. */
  maxAgeDays: number;
  /** At most this many reports are kept per database (the newest). */
  maxReportsPerDatabase: number;
  /** At most this many agent events are kept per database (the newest). */
  maxEventsPerDatabase: number;
  /** Audit entries older than this are deleted (the one delete the audit log allows). */
  auditMaxAgeDays: number;
}

export interface Storage
  extends
    PeopleStore,
    DatabaseStore,
    AgentStore,
    TuningStore,
    FleetStore,
    WatchStore,
    WebhookOutboxStore,
    WebhookStore,
    AdviceStore,
    AuditStore,
    ApiTokenStore,
    LoginFailureStore {
  readonly kind: 'pglite' | 'postgres';

  // Housekeeping
  /** Throws when the storage does not answer (the health check). */
  ping(): Promise<void>;
  /** The figures the Prometheus gauges show (src/service/app/metrics.ts). */
  metricsSnapshot(): Promise<MetricsSnapshot>;
  /** Removes old rows; `analyzed`: the statistics were refreshed too (PGlite, which has no autovacuum). */
  prune(
    policy: RetentionPolicy,
  ): Promise<{ reports: number; events: number; loginSessions: number; auditEvents: number; analyzed: boolean }>;
  close(): Promise<void>;
}

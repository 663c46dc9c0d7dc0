// What every part of the running service shares: one of each per running service.
import type { LeasePolicy } from '../agents/store.ts';
import type { Storage } from '../storage/storage.ts';
import { RunningSessions } from '../tuning/running.ts';
import type { ServiceConfig } from './config.ts';
import type { ServiceMetrics } from './metrics.ts';

export interface ServiceContext {
  storage: Storage;
  config: ServiceConfig;
  leasePolicy: LeasePolicy;
  /** Which databases have a running tuning session, as this replica last saw it (a cache). */
  runningSessions: RunningSessions;
  /** Present when metrics are served (TUNER_METRICS_TOKEN or --metrics-listen). */
  metrics?: ServiceMetrics;
}

export function createServiceContext(
  storage: Storage,
  config: ServiceConfig,
  metrics?: ServiceMetrics,
  leaseClock?: () => Date,
): ServiceContext {
  return {
    storage,
    config,
    leasePolicy: leasePolicyOf(config, leaseClock),
    runningSessions: new RunningSessions(),
    ...(metrics && { metrics }),
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

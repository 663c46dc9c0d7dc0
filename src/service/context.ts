// What every part of the running service shares.
import type { ServiceConfig } from './config.ts';
import type { ServiceMetrics } from './metrics.ts';
import type { LeasePolicy, Storage } from './storage/storage.ts';

export interface ServiceContext {
  storage: Storage;
  config: ServiceConfig;
  leasePolicy: LeasePolicy;
  /** Present when metrics are served (TUNER_METRICS_TOKEN or --metrics-listen). */
  metrics?: ServiceMetrics;
}

/** The protocol's rule: a lease lasts max(3 × report interval, 30 s) (the minimum configurable). */
export function leasePolicyOf(config: ServiceConfig): LeasePolicy {
  return { defaultIntervalSeconds: config.reportIntervalSeconds, intervalsPerLease: 3, minLeaseSeconds: config.leaseMinSeconds };
}

// The Patroni target's definition: what the registry (src/agent/targets/registry.ts, issue #32)
// reads about it. Data only; createPatroniTarget (target.ts) makes the target.
import { PATRONI_KEYS } from './config.ts';

export const PATRONI_DEFINITION = {
  kind: 'patroni',
  flag: '--patroni',
  label: 'Patroni cluster',
  configSection: 'patroni',
  configKeys: PATRONI_KEYS,
  capabilities: {
    /** Restart-only parameters are applied by restarting members through Patroni's API
     * (POST /restart, replicas first, then the leader), never with pg_ctl. */
    restart: 'patroni-api',
    /** Replication lag and streaming per replica (metrics.ts). */
    metrics: true,
    /** The self-hosted catalog: every member is a self-hosted server. */
    catalogKind: 'local',
  },
} as const;

export { createPatroniTarget, type PatroniTarget } from './target.ts';
export { patroniConfigFrom, PATRONI_KEYS, type PatroniConfig } from './config.ts';
export { patroniPermissionsText } from './permissions.ts';
export { patroniPreflight } from './preflight.ts';

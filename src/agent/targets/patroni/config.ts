// The Patroni target's agent.yaml keys (section patroni, AGENT_PATRONI_* variables), loaded and
// checked with every other key by src/agent/config/load.ts. The TLS keys take Patroni's own
// spellings (restapi.cafile, certfile, keyfile); the loader reads each key by its section, so a
// name may repeat another section's (tuner.ca_file).
import type { TargetAgentConfig } from '../../../target/config.ts';
import { compact, targetSection, type AllOrNone, type KeySpec } from '../../../target/config.ts';

export const PATRONI_KEYS: readonly KeySpec[] = [
  {
    section: 'patroni',
    key: 'rest_api_urls',
    env: 'AGENT_PATRONI_REST_API_URLS',
    kind: 'http-url-list',
    secret: false,
    requiredFor: ['patroni'],
    ours: true,
    help: "the REST API of the cluster's members, e.g. https://pg1:8008,https://pg2:8008 (a list in agent.yaml, comma-separated in the environment); any one answering is enough, all of them let the agent follow a failover",
  },
  {
    section: 'patroni',
    key: 'username',
    env: 'AGENT_PATRONI_USERNAME',
    kind: 'string',
    secret: false,
    requiredFor: [],
    ours: true,
    help: "restapi.authentication.username of Patroni's configuration (PATCH /config and POST /restart need it)",
  },
  {
    section: 'patroni',
    key: 'password',
    env: 'AGENT_PATRONI_PASSWORD',
    kind: 'string',
    secret: true,
    requiredFor: [],
    ours: true,
    help: "restapi.authentication.password of Patroni's configuration",
  },
  {
    section: 'patroni',
    key: 'cafile',
    env: 'AGENT_PATRONI_CAFILE',
    kind: 'string',
    secret: false,
    requiredFor: [],
    ours: true,
    help: "PEM file of the CA that issued the REST API's certificate (Patroni's restapi.certfile), when it is not in the system's store",
  },
  {
    section: 'patroni',
    key: 'certfile',
    env: 'AGENT_PATRONI_CERTFILE',
    kind: 'string',
    secret: false,
    requiredFor: [],
    ours: true,
    help: 'client certificate (PEM) for a REST API that verifies clients (restapi.verify_client)',
  },
  {
    section: 'patroni',
    key: 'keyfile',
    env: 'AGENT_PATRONI_KEYFILE',
    kind: 'string',
    secret: false,
    requiredFor: [],
    ours: true,
    help: "the client certificate's private key (PEM)",
  },
  {
    section: 'patroni',
    key: 'apply_timeout_seconds',
    env: 'AGENT_PATRONI_APPLY_TIMEOUT_SECONDS',
    kind: 'positive-integer',
    secret: false,
    requiredFor: [],
    ours: true,
    help: "seconds the agent waits for Patroni's loop (a few loop_wait) to apply a change on every member before it puts the configuration back (default 120)",
  },
  {
    section: 'patroni',
    key: 'max_replica_lag_mb',
    env: 'AGENT_PATRONI_MAX_REPLICA_LAG_MB',
    kind: 'positive-integer',
    secret: false,
    requiredFor: [],
    ours: true,
    help: 'a trial is reverted when a replica lags the leader by more than this many MB of WAL (default 64)',
  },
];

/** Keys that mean something only together. */
export const PATRONI_ALL_OR_NONE: readonly AllOrNone[] = [
  {
    keys: ['username', 'password'],
    targets: ['patroni'],
    why: "Patroni's REST API authenticates a user name and a password together: set both, or neither",
  },
  { keys: ['certfile', 'keyfile'], targets: ['patroni'], why: 'a client certificate is used with its private key: set both, or neither' },
];

export const DEFAULT_APPLY_TIMEOUT_SECONDS = 120;
export const DEFAULT_MAX_REPLICA_LAG_MB = 64;

/** --patroni's keys as given (patroniConfigOf fills in the defaults). */
export interface PatroniKeys {
  restApiUrls?: string[];
  username?: string;
  password?: string;
  caFile?: string;
  certFile?: string;
  keyFile?: string;
  applyTimeoutSeconds?: number;
  maxReplicaLagMb?: number;
}

export const patroniSection = targetSection<PatroniKeys>('patroni', PATRONI_KEYS, PATRONI_ALL_OR_NONE, (v) =>
  compact({
    restApiUrls: v.list('rest_api_urls'),
    username: v.string('username'),
    password: v.string('password'),
    caFile: v.string('cafile'),
    certFile: v.string('certfile'),
    keyFile: v.string('keyfile'),
    applyTimeoutSeconds: v.number('apply_timeout_seconds'),
    maxReplicaLagMb: v.number('max_replica_lag_mb'),
  }),
);

export interface PatroniConfig {
  restApiUrls: string[];
  username?: string;
  password?: string;
  caFile?: string;
  certFile?: string;
  keyFile?: string;
  applyTimeoutSeconds: number;
  maxReplicaLagMb: number;
}

/** The target's settings from the loaded configuration, defaults filled in (rest_api_urls is
 * required with --patroni, so the loader has refused a configuration without it). */
export function patroniConfigOf(config: TargetAgentConfig): PatroniConfig {
  const { restApiUrls, applyTimeoutSeconds, maxReplicaLagMb, ...rest } = patroniSection.of(config);
  if (!restApiUrls) throw new Error('patroni.rest_api_urls is not set (required with --patroni)');
  return {
    restApiUrls,
    applyTimeoutSeconds: applyTimeoutSeconds ?? DEFAULT_APPLY_TIMEOUT_SECONDS,
    maxReplicaLagMb: maxReplicaLagMb ?? DEFAULT_MAX_REPLICA_LAG_MB,
    ...rest,
  };
}

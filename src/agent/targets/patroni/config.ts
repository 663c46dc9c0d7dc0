// The Patroni target's configuration: agent.yaml section `patroni` and AGENT_PATRONI_* variables
// (the environment wins), in the style of src/agent/config/keys.ts. Every problem is one line
// naming the key, the value (secrets never shown) and the expected form.
// Not yet in keys.ts: the integrator adds PATRONI_KEYS there (section 'patroni') or calls
// patroniConfigFrom() from load.ts; the machine's size comes from local.memory_mb/vcpus.
import { z } from 'zod';

export interface PatroniKeySpec {
  section: 'patroni';
  key: string;
  env: string;
  kind: 'http-url-list' | 'string' | 'positive-integer';
  secret: boolean;
  /** Must be set with --patroni. */
  required: boolean;
  help: string;
}

export const PATRONI_KEYS: readonly PatroniKeySpec[] = [
  {
    section: 'patroni',
    key: 'rest_api_urls',
    env: 'AGENT_PATRONI_REST_API_URLS',
    kind: 'http-url-list',
    secret: false,
    required: true,
    help: "the REST API of the cluster's members, e.g. https://pg1:8008,https://pg2:8008 (a list in agent.yaml, comma-separated in the environment); any one answering is enough, all of them let the agent follow a failover",
  },
  {
    section: 'patroni',
    key: 'username',
    env: 'AGENT_PATRONI_USERNAME',
    kind: 'string',
    secret: false,
    required: false,
    help: "restapi.authentication.username of Patroni's configuration (PATCH /config and POST /restart need it)",
  },
  {
    section: 'patroni',
    key: 'password',
    env: 'AGENT_PATRONI_PASSWORD',
    kind: 'string',
    secret: true,
    required: false,
    help: "restapi.authentication.password of Patroni's configuration",
  },
  {
    section: 'patroni',
    key: 'ca_file',
    env: 'AGENT_PATRONI_CA_FILE',
    kind: 'string',
    secret: false,
    required: false,
    help: "PEM file of the CA that issued the REST API's certificate (Patroni's restapi.certfile), when it is not in the system's store",
  },
  {
    section: 'patroni',
    key: 'cert_file',
    env: 'AGENT_PATRONI_CERT_FILE',
    kind: 'string',
    secret: false,
    required: false,
    help: 'client certificate (PEM) for a REST API that verifies clients (restapi.verify_client)',
  },
  {
    section: 'patroni',
    key: 'key_file',
    env: 'AGENT_PATRONI_KEY_FILE',
    kind: 'string',
    secret: false,
    required: false,
    help: "the client certificate's private key (PEM)",
  },
  {
    section: 'patroni',
    key: 'apply_timeout_seconds',
    env: 'AGENT_PATRONI_APPLY_TIMEOUT_SECONDS',
    kind: 'positive-integer',
    secret: false,
    required: false,
    help: "how long the agent waits for Patroni's loop to apply a change on every member before it puts the configuration back (default 120; a few loop_wait)",
  },
  {
    section: 'patroni',
    key: 'max_replica_lag_mb',
    env: 'AGENT_PATRONI_MAX_REPLICA_LAG_MB',
    kind: 'positive-integer',
    secret: false,
    required: false,
    help: 'a trial is reverted when a replica lags the leader by more than this many MB of WAL (default 64)',
  },
];

/** Keys that mean something only together. */
export const PATRONI_ALL_OR_NONE: ReadonlyArray<{ keys: readonly string[]; why: string }> = [
  { keys: ['username', 'password'], why: "Patroni's REST API authenticates a user name and a password together: set both, or neither" },
  { keys: ['cert_file', 'key_file'], why: 'a client certificate is used with its private key: set both, or neither' },
];

export const DEFAULT_APPLY_TIMEOUT_SECONDS = 120;
export const DEFAULT_MAX_REPLICA_LAG_MB = 64;

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

const httpUrl = z.string().refine((s) => {
  try {
    const u = new URL(s);
    return ['http:', 'https:'].includes(u.protocol) && u.hostname !== '' && !u.username && !u.password;
  } catch {
    return false;
  }
});

const SCHEMAS: Record<PatroniKeySpec['kind'], z.ZodType> = {
  'http-url-list': z.array(httpUrl).min(1),
  string: z.string().trim().min(1),
  'positive-integer': z.number().int().positive(),
};

const EXPECTED: Record<PatroniKeySpec['kind'], string> = {
  'http-url-list':
    'one or more http:// or https:// URLs without credentials, e.g. https://pg1:8008,https://pg2:8008 (credentials go in patroni.username and patroni.password)',
  string: 'a non-empty string',
  'positive-integer': 'a whole number greater than 0',
};

/** Environment strings (and a single URL in agent.yaml) into the kind's type. */
function normalize(kind: PatroniKeySpec['kind'], raw: unknown, fromEnvironment: boolean): unknown {
  if (kind === 'http-url-list' && typeof raw === 'string') {
    return raw
      .split(',')
      .map((s) => s.trim())
      .filter((s) => s !== '')
      .map((s) => s.replace(/\/+$/, ''));
  }
  if (kind === 'http-url-list' && Array.isArray(raw))
    return (raw as unknown[]).map((s) => (typeof s === 'string' ? s.trim().replace(/\/+$/, '') : s));
  if (fromEnvironment && kind === 'positive-integer' && typeof raw === 'string' && /^\s*\d+\s*$/.test(raw)) return Number(raw);
  return raw;
}

function show(spec: PatroniKeySpec, raw: unknown): string {
  return spec.secret ? '(hidden)' : JSON.stringify(raw);
}

/**
 * The `patroni` section from agent.yaml's values (`patroni.<key>` → raw value) and the
 * environment. `problems` is empty when the configuration can be used with --patroni.
 */
export function patroniConfigFrom(
  fromFile: ReadonlyMap<string, unknown>,
  env: NodeJS.ProcessEnv,
): { config: PatroniConfig | null; problems: string[] } {
  const problems: string[] = [];
  const resolved = new Map<string, unknown>();
  for (const spec of PATRONI_KEYS) {
    const envRaw = env[spec.env];
    const fromEnvironment = envRaw !== undefined && envRaw !== '';
    const raw = fromEnvironment ? envRaw : fromFile.get(`patroni.${spec.key}`);
    const where = fromEnvironment ? spec.env : `patroni.${spec.key}`;
    if (raw === undefined || raw === null) {
      if (spec.required)
        problems.push(`patroni.${spec.key} is missing (required with --patroni): set it in agent.yaml or ${spec.env} (${spec.help})`);
      continue;
    }
    const parsed = SCHEMAS[spec.kind].safeParse(normalize(spec.kind, raw, fromEnvironment));
    if (!parsed.success) {
      problems.push(`${where}: expected ${EXPECTED[spec.kind]}, got ${show(spec, raw)}`);
      continue;
    }
    resolved.set(spec.key, parsed.data);
  }
  for (const group of PATRONI_ALL_OR_NONE) {
    const given = group.keys.filter((k) => resolved.has(k));
    if (given.length > 0 && given.length < group.keys.length) {
      const missing = group.keys.filter((k) => !resolved.has(k)).map((k) => `patroni.${k}`);
      problems.push(`${given.map((k) => `patroni.${k}`).join(' and ')} set but ${missing.join(' and ')} not: ${group.why}`);
    }
  }
  if (problems.length > 0) return { config: null, problems };
  const str = (key: string) => resolved.get(key) as string | undefined;
  const config: PatroniConfig = {
    restApiUrls: resolved.get('rest_api_urls') as string[],
    applyTimeoutSeconds: (resolved.get('apply_timeout_seconds') as number | undefined) ?? DEFAULT_APPLY_TIMEOUT_SECONDS,
    maxReplicaLagMb: (resolved.get('max_replica_lag_mb') as number | undefined) ?? DEFAULT_MAX_REPLICA_LAG_MB,
  };
  for (const [field, key] of [
    ['username', 'username'],
    ['password', 'password'],
    ['caFile', 'ca_file'],
    ['certFile', 'cert_file'],
    ['keyFile', 'key_file'],
  ] as const) {
    const value = str(key);
    if (value !== undefined) config[field] = value;
  }
  return { config, problems };
}

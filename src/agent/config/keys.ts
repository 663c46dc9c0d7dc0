// Every configuration key the agent knows, in one table: the agent.yaml section and key, the
// environment variable, the kind of value, whether it is secret, and which targets need it.
// Names are spelled exactly as the spec spells them (including its irregular env names);
// keys the spec does not name are ours and marked `ours` for the docs.
import type { AllOrNone, KeySpec } from '../../target/config.ts';
import type { TargetDefinition } from '../../target/definition.ts';
import { TARGETS, type TargetRegistry } from '../targets/registry.ts';

export type { AllOrNone, KeySpec, ValueKind } from '../../target/config.ts';

/** The keys every target has, before and after the targets' own. */
const COMMON_BEFORE: readonly KeySpec[] = [
  {
    section: 'postgresql',
    key: 'connection_url',
    env: 'AGENT_POSTGRESQL_CONNECTION_URL',
    kind: 'postgres-url',
    secret: false,
    requiredFor: ['any'],
    help: 'postgresql://agent_user:<password>@<host>:5432/<dbname>',
  },
  {
    section: 'postgresql',
    key: 'extra_ca_file',
    env: 'AGENT_POSTGRESQL_EXTRA_CA_FILE',
    kind: 'string',
    secret: false,
    requiredFor: [],
    ours: true,
    help: "PEM file of CA certificates trusted besides the target's own (--managed-a, --managed-a-cluster: the RDS CA bundles; otherwise Node's store) when connection_url names no sslrootcert",
  },
  {
    section: 'postgresql',
    key: 'include_queries',
    env: 'AGENT_POSTGRESQL_INCLUDE_QUERIES',
    kind: 'boolean',
    secret: false,
    requiredFor: [],
    help: 'send query texts to the tuning service (default true)',
  },
  {
    section: 'postgresql',
    key: 'include_plans',
    env: 'AGENT_POSTGRESQL_INCLUDE_PLANS',
    kind: 'boolean',
    secret: false,
    requiredFor: [],
    ours: true,
    help: "ask the planner for the generic plans of the top statements (EXPLAIN without ANALYZE, in a read-only transaction rolled back); --check then says whether the agent's user can plan them (default false; docs/plans.md)",
  },
  {
    section: 'postgresql',
    key: 'allow_restart',
    env: 'AGENT_POSTGRESQL_ALLOW_RESTART',
    kind: 'boolean',
    secret: false,
    requiredFor: [],
    ours: true,
    help: 'allow the agent to restart the database to apply restart-only parameters (default false: reload-only)',
  },
];

const COMMON_AFTER: readonly KeySpec[] = [
  {
    section: 'tuner',
    key: 'server_url',
    env: 'AGENT_TUNER_SERVER_URL',
    kind: 'http-url',
    secret: false,
    requiredFor: ['service'],
    help: 'address of the tuning service, e.g. https://tuner.example.com',
  },
  {
    section: 'tuner',
    key: 'api_key',
    env: 'AGENT_TUNER_API_KEY',
    kind: 'string',
    secret: true,
    requiredFor: ['service'],
    help: 'API key from the agent setup page of the tuning service',
  },
  {
    section: 'tuner',
    key: 'database_id',
    env: 'AGENT_TUNER_DATABASE_ID',
    kind: 'string',
    secret: false,
    requiredFor: ['service'],
    help: 'database id from the agent setup page of the tuning service',
  },
  {
    section: 'tuner',
    key: 'proxy_url',
    env: 'AGENT_TUNER_PROXY_URL',
    kind: 'proxy-url',
    secret: false,
    requiredFor: [],
    ours: true,
    help: "egress proxy for the tuning service and the clouds' APIs, e.g. http://user:<password>@proxy.internal:3128 (default: HTTPS_PROXY / HTTP_PROXY / NO_PROXY; never used for instance metadata)",
  },
  {
    section: 'tuner',
    key: 'ca_file',
    env: 'AGENT_TUNER_CA_FILE',
    kind: 'string',
    secret: false,
    requiredFor: [],
    ours: true,
    help: "PEM file of CA certificates trusted besides the system's, for the tuning service, the proxy and custom cloud endpoints",
  },
  {
    section: 'tuner',
    key: 'metrics_listen',
    env: 'AGENT_TUNER_METRICS_LISTEN',
    kind: 'string',
    secret: false,
    requiredFor: [],
    ours: true,
    help: 'serve Prometheus metrics on GET /metrics at this HOST:PORT, e.g. 127.0.0.1:9187 (default: none; --metrics-listen wins; docs/metrics.md)',
  },
  {
    section: 'tuner',
    key: 'debug',
    env: 'AGENT_TUNER_DEBUG',
    kind: 'boolean',
    secret: false,
    requiredFor: [],
    help: 'debug logging (default false)',
  },
  // The guardrails' thresholds (src/agent/applying/guardrails.ts): each may be made stricter than the safe
  // default; looser only with guardrails.allow_looser (src/agent/config/guardrails.ts checks).
  {
    section: 'guardrails',
    key: 'memory_floor_percent',
    env: 'AGENT_GUARDRAILS_MEMORY_FLOOR_PERCENT',
    kind: 'positive-number',
    secret: false,
    requiredFor: [],
    ours: true,
    help: 'revert a trial when available memory falls below this percent of the total (default 5; higher is stricter, at most 50)',
  },
  {
    section: 'guardrails',
    key: 'memory_floor_mb',
    env: 'AGENT_GUARDRAILS_MEMORY_FLOOR_MB',
    kind: 'positive-integer',
    secret: false,
    requiredFor: [],
    ours: true,
    help: 'revert a trial when available memory falls below this many MB, whichever floor is higher (default 256; higher is stricter)',
  },
  {
    section: 'guardrails',
    key: 'runtime_factor',
    env: 'AGENT_GUARDRAILS_RUNTIME_FACTOR',
    kind: 'positive-number',
    secret: false,
    requiredFor: [],
    ours: true,
    help: 'revert a trial when queries run this many times slower than known-good in two windows in a row (default 2; lower is stricter, above 1)',
  },
  {
    section: 'guardrails',
    key: 'error_rate_increase_percent',
    env: 'AGENT_GUARDRAILS_ERROR_RATE_INCREASE_PERCENT',
    kind: 'positive-number',
    secret: false,
    requiredFor: [],
    ours: true,
    help: 'revert a trial when the share of rolled-back transactions rises by more than this many points over known-good (default 20; lower is stricter)',
  },
  {
    section: 'guardrails',
    key: 'connection_share_percent',
    env: 'AGENT_GUARDRAILS_CONNECTION_SHARE_PERCENT',
    kind: 'positive-number',
    secret: false,
    requiredFor: [],
    ours: true,
    help: 'revert a trial when client connections reach this percent of max_connections (default 95; lower is stricter)',
  },
  {
    section: 'guardrails',
    key: 'allow_looser',
    env: 'AGENT_GUARDRAILS_ALLOW_LOOSER',
    kind: 'boolean',
    secret: false,
    requiredFor: [],
    ours: true,
    help: 'allow guardrail thresholds looser than the safe defaults (default false: such a value is refused)',
  },
];

export function keyPath(spec: KeySpec): string {
  return spec.section ? `${spec.section}.${spec.key}` : spec.key;
}

/** Every key of a registry's targets, with the common ones; a path or an environment variable
 * named twice is refused here, so that no two keys can be mistaken for each other. */
export function keysOf(registry: TargetRegistry): readonly KeySpec[] {
  const keys = [...COMMON_BEFORE, ...registry.definitions.flatMap((d) => d.config.keys), ...COMMON_AFTER];
  for (const name of ['path', 'env'] as const) {
    const seen = new Set<string>();
    for (const spec of keys) {
      const id = name === 'path' ? keyPath(spec) : spec.env;
      if (seen.has(id)) throw new Error(`configuration key ${id} is defined twice`);
      seen.add(id);
    }
  }
  return keys;
}

/** The agent.yaml sections of a registry's targets, between the common ones. */
export function sectionsOf(registry: TargetRegistry): readonly string[] {
  return ['postgresql', ...new Set(registry.definitions.map((d) => d.config.section).filter((s) => s !== null)), 'tuner', 'guardrails'];
}

/** A group of keys that go together, by their paths, with the definition that owns them. */
export interface KeyGroup extends AllOrNone {
  specs: readonly KeySpec[];
}

export function allOrNoneOf(registry: TargetRegistry): readonly KeyGroup[] {
  return registry.definitions.flatMap((d: TargetDefinition) =>
    d.config.allOrNone.map((group) => ({
      ...group,
      specs: group.keys.map((key) => {
        const spec = d.config.keys.find((k) => k.key === key);
        if (!spec) throw new Error(`allOrNone names ${key}, which is not a key of section ${d.config.section}`);
        return spec;
      }),
    })),
  );
}

export const KEYS: readonly KeySpec[] = keysOf(TARGETS);
export const ALL_OR_NONE: readonly KeyGroup[] = allOrNoneOf(TARGETS);
export const SECTIONS: readonly string[] = sectionsOf(TARGETS);

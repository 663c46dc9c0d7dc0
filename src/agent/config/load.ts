// Configuration: agent.yaml in the working directory, then the environment (env wins), checked
// against the key table. Every problem is one line naming the key, the value (secrets never
// shown) and the expected form; all problems are reported at once, not one per run.
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { LineCounter, isMap, isScalar, parseDocument } from 'yaml';
import { z } from 'zod';
import type { TargetKind } from '../../knobs/index.ts';
import { redact, registerConnectionString, registerSecret } from '../process/redact.ts';
import type { GuardThresholds } from '../applying/guardrails.ts';
import { guardThresholdsFrom } from './guardrails.ts';
import { ALL_OR_NONE, KEYS, SECTIONS, keyPath, type KeySpec, type ValueKind } from './keys.ts';

export const CONFIG_FILE_NAME = 'agent.yaml';

export interface AgentConfig {
  postgresql: { connectionUrl: string; extraCaFile?: string; includeQueries: boolean; allowRestart: boolean };
  local: { restartCommand?: string; memoryMb?: number; vcpus?: number };
  managedA: { accessKeyId?: string; secretAccessKey?: string; region?: string; databaseIdentifier?: string };
  managedBFlex: {
    subscriptionId?: string;
    resourceGroupName?: string;
    serverName?: string;
    resourceManagerEndpoint?: string;
    managedIdentityClientId?: string;
    clientId?: string;
    clientSecret?: string;
    tenantId?: string;
  };
  /** --patroni's keys as given (patroni/config.ts fills in the defaults). */
  patroni?: {
    restApiUrls?: string[];
    username?: string;
    password?: string;
    caFile?: string;
    certFile?: string;
    keyFile?: string;
    applyTimeoutSeconds?: number;
    maxReplicaLagMb?: number;
  };
  tuner: {
    serverUrl?: string;
    apiKey?: string;
    databaseId?: string;
    proxyUrl?: string;
    caFile?: string;
    metricsListen?: string;
    debug: boolean;
  };
  /** The guardrails' thresholds: the safe defaults, or stricter ones (looser only if allowed). */
  guardrails: GuardThresholds;
}

export interface LoadOptions {
  cwd: string;
  env: NodeJS.ProcessEnv;
  target: TargetKind;
  /** The command talks to the tuning service, so the `tuner` keys are required. */
  needsService: boolean;
  /** Path of the config file; default `<cwd>/agent.yaml`. */
  file?: string;
}

export interface LoadResult {
  config: AgentConfig;
  warnings: string[];
  /** Where the configuration came from, for the startup log line. */
  source: string;
}

export class ConfigError extends Error {
  readonly problems: readonly string[];
  constructor(problems: string[]) {
    super(problems.join('\n'));
    this.name = 'ConfigError';
    this.problems = problems;
  }
}

type Value = string | boolean | number | string[];

const EXPECTED: Record<ValueKind, string> = {
  string: 'a non-empty string',
  boolean: 'true or false',
  'postgres-url': 'a URL of the form postgresql://agent_user:<password>@<host>:5432/<dbname>',
  'http-url': 'an http:// or https:// URL such as https://tuner.example.com',
  'http-url-list':
    'one or more http:// or https:// URLs without a user name or password, e.g. https://pg1:8008,https://pg2:8008 (a list in agent.yaml, comma-separated in the environment)',
  'proxy-url': 'an http:// or https:// proxy URL such as http://proxy.internal:3128',
  'positive-integer': 'a whole number greater than 0',
  'positive-number': 'a number greater than 0, e.g. 1.5',
};

function parseUrl(s: string): URL | null {
  try {
    return new URL(s);
  } catch {
    return null;
  }
}

// A socket path (`?host=/var/run/postgresql`) leaves the host empty, which PostgreSQL allows.
const isPostgresUrl = (s: string) => ['postgresql:', 'postgres:'].includes(parseUrl(s)?.protocol ?? '');
const isHttpUrl = (s: string) => {
  const url = parseUrl(s);
  return url !== null && ['http:', 'https:'].includes(url.protocol) && url.hostname !== '';
};

const SCHEMAS: Record<ValueKind, z.ZodType<Value>> = {
  string: z.string().trim().min(1),
  boolean: z.boolean(),
  'postgres-url': z.string().refine(isPostgresUrl),
  'http-url': z.string().refine(isHttpUrl),
  'http-url-list': z.preprocess(
    // A string is a comma-separated list (the environment's form, accepted in agent.yaml too).
    (raw) => (typeof raw === 'string' ? raw.split(',').filter((s) => s.trim() !== '') : raw),
    z
      .array(z.string().refine((s) => isHttpUrl(s) && !parseUrl(s)!.username && !parseUrl(s)!.password))
      .min(1)
      .transform((urls) => urls.map((u) => u.trim().replace(/\/+$/, ''))),
  ),
  'proxy-url': z.string().refine(isHttpUrl),
  'positive-integer': z.number().int().positive(),
  'positive-number': z.number().positive().finite(),
};

/** Environment variables are strings: turn them into the kind's type before the schema sees them. */
function fromEnv(kind: ValueKind, raw: string): Value {
  if (kind === 'boolean') {
    const lower = raw.trim().toLowerCase();
    return lower === 'true' ? true : lower === 'false' ? false : raw;
  }
  if (kind === 'positive-integer' && /^\s*\d+\s*$/.test(raw)) return Number(raw);
  if (kind === 'positive-number' && /^\s*\d+(\.\d+)?\s*$/.test(raw)) return Number(raw);
  return raw;
}

function show(spec: KeySpec, value: unknown): string {
  if (spec.secret) return '(hidden)';
  if (typeof value === 'string') return JSON.stringify(redact(value));
  return redact(JSON.stringify(value) ?? String(value));
}

function suggest(word: string, candidates: readonly string[]): string {
  let best: string | undefined;
  let bestDistance = 3;
  for (const c of candidates) {
    const d = levenshtein(word.toLowerCase(), c.toLowerCase());
    if (d < bestDistance) {
      best = c;
      bestDistance = d;
    }
  }
  return best ? ` (did you mean ${best}?)` : '';
}

function levenshtein(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    let diagonal = row[0]!;
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const above = row[j]!;
      row[j] = Math.min(row[j]! + 1, row[j - 1]! + 1, diagonal + (a[i - 1] === b[j - 1] ? 0 : 1));
      diagonal = above;
    }
  }
  return row[b.length]!;
}

/** Reads agent.yaml into plain `section -> key -> value`, reporting syntax and shape problems;
 * null when the file cannot be read or parsed at all. */
function readFile(path: string, problems: string[], warnings: string[]): Map<string, unknown> | null {
  const values = new Map<string, unknown>();
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    problems.push(
      code === 'EISDIR'
        ? `${path}: is a directory, not a file: give the path of the configuration file (agent.yaml)`
        : `${path}: cannot be read (${code ?? (err as Error).message}): check that the agent's user may read it`,
    );
    return null;
  }
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { uniqueKeys: true, prettyErrors: false, lineCounter });
  if (doc.errors.length > 0) {
    for (const e of doc.errors) {
      const at = lineCounter.linePos(e.pos[0]);
      problems.push(`${path} line ${at.line}, column ${at.col}: invalid YAML: ${e.message.split('\n')[0]}`);
    }
    return null;
  }
  if (doc.contents === null) return values;
  if (!isMap(doc.contents)) {
    problems.push(`${path}: expected a mapping of sections (${SECTIONS.join(', ')}), got ${typeof doc.toJS()}`);
    return values;
  }
  for (const sectionPair of doc.contents.items) {
    const section = isScalar(sectionPair.key) ? String(sectionPair.key.value) : String(sectionPair.key);
    if (!(SECTIONS as readonly string[]).includes(section)) {
      warnings.push(`${path}: unknown section "${section}" is ignored${suggest(section, SECTIONS)}`);
      continue;
    }
    const body = sectionPair.value;
    if (body === null || (isScalar(body) && body.value === null)) continue;
    if (!isMap(body)) {
      problems.push(`${path}: section ${section} must be a mapping of keys, e.g. "${section}:\\n  key: value"`);
      continue;
    }
    const known = KEYS.filter((k) => k.section === section).map((k) => k.key);
    for (const pair of body.items) {
      const key = isScalar(pair.key) ? String(pair.key.value) : String(pair.key);
      if (!known.includes(key)) {
        warnings.push(`${path}: unknown key ${section}.${key} is ignored${suggest(key, known)}`);
        continue;
      }
      const value: unknown = isScalar(pair.value) ? pair.value.value : (pair.value as { toJSON?: () => unknown } | null)?.toJSON?.();
      values.set(`${section}.${key}`, value);
    }
  }
  return values;
}

export function loadConfig(options: LoadOptions): LoadResult {
  const problems: string[] = [];
  const warnings: string[] = [];
  const file = options.file ?? join(options.cwd, CONFIG_FILE_NAME);
  const fileExists = existsSync(file);
  const envSet = KEYS.filter((k) => options.env[k.env] !== undefined && options.env[k.env] !== '');

  if (!fileExists && envSet.length === 0) {
    throw new ConfigError([
      `no configuration: ${file} does not exist and no agent environment variable is set; ` +
        `create ${CONFIG_FILE_NAME} (see docs/configuration.md) or set AGENT_POSTGRESQL_CONNECTION_URL and the other AGENT_* variables`,
    ]);
  }
  if (options.file && !fileExists) problems.push(`${file}: no such file`);

  const read = fileExists ? readFile(file, problems, warnings) : new Map<string, unknown>();
  // A file that cannot be read says so; every key it would have set is then unknown, not missing.
  const fileUnreadable = read === null;
  const fromFile = read ?? new Map<string, unknown>();

  // Secrets are registered before any message is built, so that none can leak into one.
  for (const spec of KEYS) {
    for (const raw of [options.env[spec.env], fromFile.get(keyPath(spec))]) {
      if (typeof raw !== 'string') continue;
      if (spec.secret) registerSecret(raw);
      if (spec.kind === 'postgres-url' || spec.kind === 'http-url' || spec.kind === 'proxy-url') registerConnectionString(raw);
    }
  }

  for (const name of Object.keys(options.env)) {
    if (name.startsWith('AGENT_') && !KEYS.some((k) => k.env === name)) {
      warnings.push(
        `environment variable ${name} is not an agent setting and is ignored${suggest(
          name,
          KEYS.map((k) => k.env),
        )}`,
      );
    }
  }

  const resolved = new Map<string, Value>();
  for (const spec of KEYS) {
    const envRaw = options.env[spec.env];
    const fromEnvironment = envRaw !== undefined && envRaw !== '';
    const raw: unknown = fromEnvironment ? fromEnv(spec.kind, envRaw) : fromFile.get(keyPath(spec));
    const where = fromEnvironment ? spec.env : keyPath(spec);
    if (raw === undefined || raw === null) {
      if (isRequired(spec, options) && !fileUnreadable) {
        const also = spec.section ? `set ${keyPath(spec)} in ${CONFIG_FILE_NAME} or ${spec.env}` : `set ${spec.env}`;
        problems.push(`${keyPath(spec)} is missing${requiredReason(spec, options)}: ${also} (${spec.help})`);
      }
      continue;
    }
    const parsed = SCHEMAS[spec.kind].safeParse(raw);
    if (!parsed.success) {
      const hint = spec.kind === 'string' && typeof raw === 'number' ? ' (put the value in quotes)' : '';
      problems.push(`${where}: expected ${EXPECTED[spec.kind]}, got ${show(spec, raw)}${hint}`);
      continue;
    }
    const credentials = spec.kind === 'http-url' ? credentialsProblem(parsed.data as string) : null;
    if (credentials) {
      problems.push(`${where}: ${credentials}, got ${show(spec, raw)}`);
      continue;
    }
    resolved.set(spec.key, parsed.data);
  }

  const num = (key: string) => resolved.get(key) as number | undefined;
  const guard = guardThresholdsFrom({
    ...compact({
      memoryFloorPercent: num('memory_floor_percent'),
      memoryFloorMb: num('memory_floor_mb'),
      runtimeFactor: num('runtime_factor'),
      errorRateIncreasePercent: num('error_rate_increase_percent'),
      connectionSharePercent: num('connection_share_percent'),
    }),
    allowLooser: (resolved.get('allow_looser') as boolean | undefined) ?? false,
  });
  problems.push(...guard.problems);
  problems.push(...partialCredentials(resolved, options.target));

  if (problems.length > 0) throw new ConfigError(problems);

  const str = (key: string) => resolved.get(key) as string | undefined;
  const bool = (key: string, fallback: boolean) => (resolved.get(key) as boolean | undefined) ?? fallback;
  const int = (key: string) => resolved.get(key) as number | undefined;
  const config: AgentConfig = {
    postgresql: {
      connectionUrl: str('connection_url')!,
      ...compact({ extraCaFile: str('extra_ca_file') }),
      includeQueries: bool('include_queries', true),
      allowRestart: bool('allow_restart', false),
    },
    local: compact({ restartCommand: str('restart_command'), memoryMb: int('memory_mb'), vcpus: int('vcpus') }),
    managedA: compact({
      accessKeyId: str('ACCESS_KEY_ID'),
      secretAccessKey: str('SECRET_ACCESS_KEY'),
      region: str('REGION'),
      databaseIdentifier: str('DATABASE_IDENTIFIER'),
    }),
    managedBFlex: compact({
      subscriptionId: str('subscription_id'),
      resourceGroupName: str('resource_group_name'),
      serverName: str('server_name'),
      resourceManagerEndpoint: str('resource_manager_endpoint'),
      managedIdentityClientId: str('managed_identity_client_id'),
      clientId: str('CLOUDB_CLIENT_ID'),
      clientSecret: str('CLOUDB_CLIENT_SECRET'),
      tenantId: str('CLOUDB_TENANT_ID'),
    }),
    patroni: compact({
      restApiUrls: resolved.get('rest_api_urls') as string[] | undefined,
      username: str('username'),
      password: str('password'),
      caFile: str('cafile'),
      certFile: str('certfile'),
      keyFile: str('keyfile'),
      applyTimeoutSeconds: int('apply_timeout_seconds'),
      maxReplicaLagMb: int('max_replica_lag_mb'),
    }),
    tuner: {
      ...compact({
        serverUrl: str('server_url'),
        apiKey: str('api_key'),
        databaseId: str('database_id'),
        proxyUrl: str('proxy_url'),
        caFile: str('ca_file'),
        metricsListen: str('metrics_listen'),
      }),
      debug: bool('debug', false),
    },
    guardrails: guard.thresholds,
  };
  const source = [fileExists ? file : null, envSet.length > 0 ? `${envSet.length} environment variable(s)` : null]
    .filter(Boolean)
    .join(' + ');
  return { config, warnings, source };
}

/** Half a credential, named by the places it can be set (its values are secrets, never shown). */
function partialCredentials(resolved: ReadonlyMap<string, Value>, target: TargetKind): string[] {
  const problems: string[] = [];
  for (const group of ALL_OR_NONE) {
    if (!group.targets.includes(target)) continue;
    const specs = group.keys.map((key) => KEYS.find((k) => k.key === key)!);
    const given = specs.filter((s) => resolved.has(s.key));
    if (given.length === 0 || given.length === specs.length) continue;
    const place = (s: KeySpec) => (s.section ? `${keyPath(s)} (${s.env})` : s.env);
    const missing = specs.filter((s) => !resolved.has(s.key));
    problems.push(
      `${given.map(place).join(' and ')} ${given.length === 1 ? 'is' : 'are'} set but ${missing.map(place).join(' and ')} ${missing.length === 1 ? 'is' : 'are'} not: ${group.why}`,
    );
  }
  return problems;
}

function isRequired(spec: KeySpec, options: LoadOptions): boolean {
  return spec.requiredFor.some((r) => r === 'any' || r === options.target || (r === 'service' && options.needsService));
}

function requiredReason(spec: KeySpec, options: LoadOptions): string {
  if (spec.requiredFor.includes(options.target)) return ` (required with --${options.target})`;
  if (spec.requiredFor.includes('service') && options.needsService) return ' (required to report to the tuning service)';
  return '';
}

/** The tuning service is reached with the API key alone: a URL with a user name or password
 * would be refused by every request (and could leak the password into logs). */
function credentialsProblem(url: string): string | null {
  const parsed = new URL(url);
  return parsed.username || parsed.password ? 'must not carry a user name or password (the agent authenticates with tuner.api_key)' : null;
}

/** Drops undefined members, so optional fields are absent rather than present-but-undefined. */
function compact<T extends Record<string, unknown>>(o: T): { [K in keyof T]?: Exclude<T[K], undefined> } {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as { [K in keyof T]?: Exclude<T[K], undefined> };
}

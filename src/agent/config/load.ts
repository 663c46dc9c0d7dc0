// Configuration: agent.yaml (where location.ts finds it), then the environment (env wins), checked
// against the key table. Every problem is one line naming the key, the value (secrets never
// shown) and the expected form; all problems are reported at once, not one per run.
import { existsSync, readFileSync } from 'node:fs';
import { LineCounter, isMap, isScalar, parseDocument } from 'yaml';
import { z } from 'zod';
import type { TargetKind } from '../../knobs/index.ts';
import { redact, registerConnectionString, registerSecret } from '../base/redact.ts';
import { guardThresholdsFrom } from './guardrails.ts';
import { compact, type ConfigValue, type SectionValues } from '../../target/config.ts';
import { TARGETS, type TargetRegistry } from '../targets/registry.ts';
import type { AgentConfig } from './agent-config.ts';
import { allOrNoneOf, keyPath, keysOf, sectionsOf, type KeyGroup, type KeySpec, type ValueKind } from './keys.ts';
import { CONFIG_FILE_NAME, CONFIG_PATH_ENV, describeSource, locateConfig, missingNamedFile } from './location.ts';

export { CONFIG_FILE_NAME };

export type { AgentConfig };

export interface LoadOptions {
  cwd: string;
  env: NodeJS.ProcessEnv;
  target: TargetKind;
  /** The command talks to the tuning service, so the `tuner` keys are required. */
  needsService: boolean;
  /** --config: the path of the config file (else AGENT_CONFIG, else the search path). */
  file?: string;
  /** The system-wide file of the search path (default /etc/tuner-agent/agent.yaml). */
  systemFile?: string;
  /** The targets whose keys are read (default: the agent's own, TARGETS). */
  registry?: TargetRegistry;
}

export interface LoadResult {
  config: AgentConfig;
  warnings: string[];
  /** Where the configuration came from, in words: the file read (or none) and the variables. */
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

type Value = ConfigValue;

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
function readFile(path: string, table: KeyTable, problems: string[], warnings: string[]): Map<string, unknown> | null {
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
    problems.push(`${path}: expected a mapping of sections (${table.sections.join(', ')}), got ${typeof doc.toJS()}`);
    return values;
  }
  for (const sectionPair of doc.contents.items) {
    const section = isScalar(sectionPair.key) ? String(sectionPair.key.value) : String(sectionPair.key);
    if (!table.sections.includes(section)) {
      warnings.push(`${path}: unknown section "${section}" is ignored${suggest(section, table.sections)}`);
      continue;
    }
    const body = sectionPair.value;
    if (body === null || (isScalar(body) && body.value === null)) continue;
    if (!isMap(body)) {
      problems.push(`${path}: section ${section} must be a mapping of keys, e.g. "${section}:\\n  key: value"`);
      continue;
    }
    const known = table.keys.filter((k) => k.section === section).map((k) => k.key);
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

/** The keys, sections and key groups of a registry's targets. */
interface KeyTable {
  keys: readonly KeySpec[];
  sections: readonly string[];
  groups: readonly KeyGroup[];
}

const tables = new WeakMap<TargetRegistry, KeyTable>();

function tableOf(registry: TargetRegistry): KeyTable {
  let table = tables.get(registry);
  if (!table) {
    table = { keys: keysOf(registry), sections: sectionsOf(registry), groups: allOrNoneOf(registry) };
    tables.set(registry, table);
  }
  return table;
}

export function loadConfig(options: LoadOptions): LoadResult {
  const registry = options.registry ?? TARGETS;
  const table = tableOf(registry);
  const problems: string[] = [];
  const warnings: string[] = [];
  const location = locateConfig({ cwd: options.cwd, env: options.env, flag: options.file, systemFile: options.systemFile });
  const fileExists = location.file !== null && existsSync(location.file);
  const envSet = table.keys.filter((k) => options.env[k.env] !== undefined && options.env[k.env] !== '');

  // A file named on purpose is never silently replaced by another, or by the environment alone.
  if (location.origin !== 'search' && !fileExists) throw new ConfigError([missingNamedFile(location)]);
  if (!fileExists && envSet.length === 0) {
    throw new ConfigError([
      `no configuration: none of ${location.searched.join(', ')} exists and no agent environment variable is set; ` +
        `create ${CONFIG_FILE_NAME} (see docs/configuration.md), name one with --config or ${CONFIG_PATH_ENV}, or set AGENT_POSTGRESQL_CONNECTION_URL and the other AGENT_* variables`,
    ]);
  }

  const read = fileExists ? readFile(location.file!, table, problems, warnings) : new Map<string, unknown>();
  // A file that cannot be read says so; every key it would have set is then unknown, not missing.
  const fileUnreadable = read === null;
  const fromFile = read ?? new Map<string, unknown>();

  // Secrets are registered before any message is built, so that none can leak into one.
  for (const spec of table.keys) {
    for (const raw of [options.env[spec.env], fromFile.get(keyPath(spec))]) {
      if (typeof raw !== 'string') continue;
      if (spec.secret) registerSecret(raw);
      if (spec.kind === 'postgres-url' || spec.kind === 'http-url' || spec.kind === 'proxy-url') registerConnectionString(raw);
    }
  }

  for (const name of Object.keys(options.env)) {
    if (name.startsWith('AGENT_') && name !== CONFIG_PATH_ENV && !table.keys.some((k) => k.env === name)) {
      warnings.push(
        `environment variable ${name} is not an agent setting and is ignored${suggest(
          name,
          table.keys.map((k) => k.env),
        )}`,
      );
    }
  }

  const resolved = new Map<string, Value>();
  for (const spec of table.keys) {
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
    resolved.set(keyPath(spec), parsed.data);
  }

  // Every value by its path (section.key, or the variable of an environment-only key): two
  // sections' keys of the same name are two values.
  const num = (key: string) => resolved.get(`guardrails.${key}`) as number | undefined;
  const guard = guardThresholdsFrom({
    ...compact({
      memoryFloorPercent: num('memory_floor_percent'),
      memoryFloorMb: num('memory_floor_mb'),
      runtimeFactor: num('runtime_factor'),
      errorRateIncreasePercent: num('error_rate_increase_percent'),
      connectionSharePercent: num('connection_share_percent'),
    }),
    allowLooser: (resolved.get('guardrails.allow_looser') as boolean | undefined) ?? false,
  });
  problems.push(...guard.problems);
  problems.push(...partialCredentials(table.groups, resolved, options.target));

  if (problems.length > 0) throw new ConfigError(problems);

  const str = (key: string) => resolved.get(key) as string | undefined;
  const bool = (key: string, fallback: boolean) => (resolved.get(key) as boolean | undefined) ?? fallback;
  const targets: Record<string, unknown> = {};
  for (const definition of registry.definitions) {
    const { section, keys } = definition.config;
    if (section === null) continue;
    const valueOf = (key: string): unknown => {
      const spec = keys.find((k) => k.key === key);
      if (!spec) throw new Error(`section ${section} reads ${key}, which is not one of its keys`);
      return resolved.get(keyPath(spec));
    };
    const values: SectionValues = {
      string: (key) => valueOf(key) as string | undefined,
      number: (key) => valueOf(key) as number | undefined,
      list: (key) => valueOf(key) as string[] | undefined,
    };
    targets[section] = definition.config.read(values);
  }
  const config: AgentConfig = {
    postgresql: {
      connectionUrl: str('postgresql.connection_url')!,
      ...compact({ extraCaFile: str('postgresql.extra_ca_file') }),
      includeQueries: bool('postgresql.include_queries', true),
      includePlans: bool('postgresql.include_plans', false),
      allowRestart: bool('postgresql.allow_restart', false),
    },
    tuner: {
      ...compact({
        serverUrl: str('tuner.server_url'),
        apiKey: str('tuner.api_key'),
        databaseId: str('tuner.database_id'),
        proxyUrl: str('tuner.proxy_url'),
        caFile: str('tuner.ca_file'),
        metricsListen: str('tuner.metrics_listen'),
      }),
      debug: bool('tuner.debug', false),
    },
    guardrails: guard.thresholds,
    targets,
  };
  return { config, warnings, source: describeSource(location, envSet.length) };
}

/** Half a credential, named by the places it can be set (its values are secrets, never shown). */
function partialCredentials(groups: readonly KeyGroup[], resolved: ReadonlyMap<string, Value>, target: TargetKind): string[] {
  const problems: string[] = [];
  for (const group of groups) {
    if (!group.targets.includes(target)) continue;
    const specs = group.specs;
    const given = specs.filter((s) => resolved.has(keyPath(s)));
    if (given.length === 0 || given.length === specs.length) continue;
    const place = (s: KeySpec) => (s.section ? `${keyPath(s)} (${s.env})` : s.env);
    const missing = specs.filter((s) => !resolved.has(keyPath(s)));
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

import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, test } from 'node:test';
import { ConfigError, loadConfig, type LoadOptions } from '../src/agent/config/load.ts';
import { KEYS } from '../src/agent/config/keys.ts';
import { SYSTEM_CONFIG_FILE, locateConfig } from '../src/agent/config/location.ts';
import { redact } from '../src/agent/base/redact.ts';
import { DEFAULT_THRESHOLDS } from '../src/agent/applying/guardrails.ts';
import { localConfig } from '../src/agent/targets/local/config.ts';
import { managedAConfig } from '../src/agent/targets/managed-a/config.ts';
import { managedBFlexConfig } from '../src/agent/targets/managed-b-flex/config.ts';

const PASSWORD = 'pw-Secret-123';
const API_KEY = 'tk_live_9f8e7d6c5b4a39281706';
const dirs: string[] = [];

function dirWith(yaml?: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'tuner-config-'));
  dirs.push(dir);
  if (yaml !== undefined) writeFileSync(join(dir, 'agent.yaml'), yaml);
  return dir;
}
afterEach(() => {
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const good = `postgresql:
  connection_url: postgresql://agent_user:${PASSWORD}@db.internal:5432/app
  include_queries: true
tuner:
  server_url: https://tuner.example.com
  api_key: ${API_KEY}
  database_id: 6f1c1a52-8a3e-4c1d-9d2a-0c5b7f0e9a11
  debug: false
`;

function load(cwd: string, extra: Partial<LoadOptions> = {}) {
  return loadConfig({ cwd, env: {}, target: 'local', needsService: true, ...extra });
}

function problems(fn: () => unknown): string[] {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof ConfigError, `expected a ConfigError, got ${String(err)}`);
    return [...err.problems];
  }
  assert.fail('expected a ConfigError');
}

test('a good agent.yaml loads with the spec defaults', () => {
  const { config, warnings } = load(dirWith(good));
  assert.equal(config.postgresql.connectionUrl, `postgresql://agent_user:${PASSWORD}@db.internal:5432/app`);
  assert.equal(config.postgresql.includeQueries, true);
  assert.equal(config.postgresql.allowRestart, false);
  assert.equal(config.tuner.apiKey, API_KEY);
  assert.equal(config.tuner.debug, false);
  assert.deepEqual(warnings, []);
});

test('environment variables override the file, key by key', () => {
  const { config } = load(dirWith(good), {
    env: {
      AGENT_POSTGRESQL_INCLUDE_QUERIES: 'false',
      AGENT_POSTGRESQL_ALLOW_RESTART: 'TRUE',
      AGENT_TUNER_DATABASE_ID: 'from-env',
      AGENT_LOCAL_MEMORY_MB: '2048',
    },
  });
  assert.equal(config.postgresql.includeQueries, false);
  assert.equal(config.postgresql.allowRestart, true);
  assert.equal(config.tuner.databaseId, 'from-env');
  assert.equal(config.tuner.serverUrl, 'https://tuner.example.com');
  assert.equal(localConfig.of(config).memoryMb, 2048);
});

test('environment alone is enough, with every variable of the spec', () => {
  const env = {
    AGENT_POSTGRESQL_CONNECTION_URL: `postgresql://agent_user:${PASSWORD}@h:5432/db`,
    AGENT_TUNER_SERVER_URL: 'http://127.0.0.1:8080',
    AGENT_TUNER_API_KEY: API_KEY,
    AGENT_TUNER_DATABASE_ID: 'db-1',
    AGENT_MANAGEDA_DATABASE_IDENTIFIER: 'prod-db',
    AGENT_CLOUDA_ACCESS_KEY_ID: 'AKIAEXAMPLEEXAMPLE',
    AGENT_CLOUDA_SECRET_ACCESS_KEY: 'secret/access+key',
    AGENT_CLOUDA_REGION: 'eu-west-1',
    AGENT_MANAGEDB_FLEX_SUBSCRIPTION_ID: 'sub',
    AGENT_MANAGEDB_FLEX_RESOURCE_GROUP_NAME: 'rg',
    AGENT_MANAGEDB_FLEX_SERVER_NAME: 'srv',
    CLOUDB_CLIENT_ID: 'app-id',
    CLOUDB_CLIENT_SECRET: 'sp-secret-value',
    CLOUDB_TENANT_ID: 'tenant',
  };
  const { config } = load(dirWith(), { env, target: 'managed-a' });
  assert.equal(managedAConfig.of(config).region, 'eu-west-1');
  assert.equal(managedAConfig.of(config).databaseIdentifier, 'prod-db');
  assert.equal(managedAConfig.of(config).secretAccessKey, 'secret/access+key');
  assert.equal(managedBFlexConfig.of(config).serverName, 'srv');
  assert.equal(managedBFlexConfig.of(config).clientSecret, 'sp-secret-value');
  // Every variable the spec lists is one the agent knows.
  for (const name of Object.keys(env))
    assert.ok(
      KEYS.some((k) => k.env === name),
      name,
    );
});

test('no file and no environment: one line that names the places looked in and says what to create', () => {
  const cwd = dirWith();
  const systemFile = join(dirWith(), 'etc', 'agent.yaml');
  const [line, ...rest] = problems(() => load(cwd, { systemFile }));
  assert.equal(rest.length, 0);
  assert.ok(
    line!.startsWith(`no configuration: none of ${join(cwd, 'agent.yaml')}, ${systemFile} exists and no agent environment variable is set`),
    line,
  );
  assert.match(line!, /--config or AGENT_CONFIG/);
  assert.match(line!, /AGENT_POSTGRESQL_CONNECTION_URL/);
});

// ---- the search path: --config, else AGENT_CONFIG, else ./agent.yaml, else /etc/tuner-agent/agent.yaml

/** An agent.yaml at `path` that says which one it is (its database id). */
function configAt(path: string, id: string): string {
  mkdirSync(join(path, '..'), { recursive: true });
  writeFileSync(path, good.replace(/database_id: .*/, `database_id: ${id}`));
  return path;
}

/** Every step of the search path holds a file; `without` leaves some out. */
function everyPlace(without: Array<'flag' | 'env' | 'cwd' | 'system'> = []) {
  const root = dirWith();
  const cwd = join(root, 'work');
  mkdirSync(cwd);
  const places = {
    flag: join(root, 'flag', 'agent.yaml'),
    env: join(root, 'env', 'agent.yaml'),
    cwd: join(cwd, 'agent.yaml'),
    system: join(root, 'etc', 'tuner-agent', 'agent.yaml'),
  };
  for (const [place, path] of Object.entries(places)) if (!without.includes(place as 'flag')) configAt(path, `from-${place}`);
  return { cwd, places };
}

test('the search path: --config wins over AGENT_CONFIG, ./agent.yaml and the system file', () => {
  const { cwd, places } = everyPlace();
  const { config, source } = load(cwd, { file: places.flag, env: { AGENT_CONFIG: places.env }, systemFile: places.system });
  assert.equal(config.tuner.databaseId, 'from-flag');
  assert.equal(source, `${places.flag} (--config)`);
});

test('the search path: AGENT_CONFIG (relative to the working directory too) wins over ./agent.yaml and the system file', () => {
  const { cwd, places } = everyPlace(['flag']);
  for (const named of [places.env, join('..', 'env', 'agent.yaml')]) {
    const { config, source, warnings } = load(cwd, { env: { AGENT_CONFIG: named }, systemFile: places.system });
    assert.equal(config.tuner.databaseId, 'from-env');
    assert.equal(source, `${places.env} (AGENT_CONFIG)`);
    assert.deepEqual(warnings, [], 'AGENT_CONFIG is not an unknown AGENT_* variable');
  }
});

test('the search path: ./agent.yaml wins over the system file', () => {
  const { cwd, places } = everyPlace(['flag', 'env']);
  const { config, source } = load(cwd, { systemFile: places.system });
  assert.equal(config.tuner.databaseId, 'from-cwd');
  assert.equal(source, `${places.cwd} (the working directory)`);
});

test('the search path: without ./agent.yaml, the system file', () => {
  const { cwd, places } = everyPlace(['flag', 'env', 'cwd']);
  const { config, source } = load(cwd, { systemFile: places.system, env: { AGENT_TUNER_DEBUG: 'true' } });
  assert.equal(config.tuner.databaseId, 'from-system');
  assert.equal(config.tuner.debug, true, 'the environment still wins over the file, key by key');
  assert.equal(
    source,
    `${places.system} (the system's, no agent.yaml in the working directory), and 1 environment variable, which win over the file key by key`,
  );
});

test('the search path: no file anywhere, the environment alone, and the source says so', () => {
  const { cwd, places } = everyPlace(['flag', 'env', 'cwd', 'system']);
  const env = {
    AGENT_POSTGRESQL_CONNECTION_URL: `postgresql://agent_user:${PASSWORD}@h:5432/db`,
    AGENT_TUNER_SERVER_URL: 'http://127.0.0.1:8080',
    AGENT_TUNER_API_KEY: API_KEY,
    AGENT_TUNER_DATABASE_ID: 'from-environment',
  };
  const { config, source } = load(cwd, { systemFile: places.system, env });
  assert.equal(config.tuner.databaseId, 'from-environment');
  assert.equal(source, `no file (none of ${places.cwd}, ${places.system} exists): the environment only, 4 environment variables`);
});

test('a file named with --config or AGENT_CONFIG that does not exist is an error naming it, never a fallback', () => {
  const { cwd, places } = everyPlace(['flag', 'env']);
  const env = { AGENT_POSTGRESQL_CONNECTION_URL: `postgresql://agent_user:${PASSWORD}@h:5432/db` };
  const fromFlag = problems(() => load(cwd, { file: places.flag, env, systemFile: places.system }));
  assert.equal(fromFlag.length, 1);
  assert.match(fromFlag[0]!, new RegExp(`^--config ${places.flag}: no such file; .*looks for ${places.cwd}, then ${places.system}$`));
  const fromEnv = problems(() => load(cwd, { env: { ...env, AGENT_CONFIG: places.env }, systemFile: places.system }));
  assert.equal(fromEnv.length, 1);
  assert.match(fromEnv[0]!, new RegExp(`^AGENT_CONFIG=${places.env}: no such file`));
});

test('an empty AGENT_CONFIG names nothing: the search path applies', () => {
  const { cwd, places } = everyPlace(['flag', 'env']);
  assert.equal(load(cwd, { env: { AGENT_CONFIG: '' }, systemFile: places.system }).config.tuner.databaseId, 'from-cwd');
});

test("the system file's default place is /etc/tuner-agent/agent.yaml, searched after the working directory", () => {
  assert.equal(SYSTEM_CONFIG_FILE, '/etc/tuner-agent/agent.yaml');
  assert.deepEqual(locateConfig({ cwd: '/srv/db1', env: {} }).searched, ['/srv/db1/agent.yaml', '/etc/tuner-agent/agent.yaml']);
});

test('invalid YAML names the line and column', () => {
  const [line] = problems(() => load(dirWith('postgresql:\n  connection_url: postgresql://a@b/c\n  include_queries: [true\n')));
  assert.match(line!, /agent\.yaml line \d+, column \d+: invalid YAML/);
});

test('a duplicate key is invalid YAML, not a silent override', () => {
  const [line] = problems(() => load(dirWith(`${good}tuner:\n  debug: true\n`)));
  assert.match(line!, /line 9, column 1: invalid YAML: Map keys must be unique/);
});

test('wrong types name the key, the value and the expected form', () => {
  const yaml = good.replace('include_queries: true', 'include_queries: "maybe"').replace('debug: false', 'debug: 3');
  const found = problems(() => load(dirWith(yaml)));
  assert.ok(found.includes('postgresql.include_queries: expected true or false, got "maybe"'), found.join('\n'));
  assert.ok(found.includes('tuner.debug: expected true or false, got 3'), found.join('\n'));
  const fromEnv = problems(() => load(dirWith(good), { env: { AGENT_POSTGRESQL_INCLUDE_QUERIES: 'yes please' } }));
  assert.deepEqual(fromEnv, ['AGENT_POSTGRESQL_INCLUDE_QUERIES: expected true or false, got "yes please"']);
  const number = problems(() => load(dirWith(good.replace('database_id: 6f1c1a52-8a3e-4c1d-9d2a-0c5b7f0e9a11', 'database_id: 12345'))));
  assert.deepEqual(number, ['tuner.database_id: expected a non-empty string, got 12345 (put the value in quotes)']);
  const memory = problems(() => load(dirWith(good), { env: { AGENT_LOCAL_VCPUS: 'four' } }));
  assert.deepEqual(memory, ['AGENT_LOCAL_VCPUS: expected a whole number greater than 0, got "four"']);
});

test('a connection_url that is not postgresql:// is refused with the password masked', () => {
  const yaml = good.replace(`postgresql://agent_user:${PASSWORD}@db.internal:5432/app`, `mysql://agent_user:${PASSWORD}@db.internal/app`);
  const [line] = problems(() => load(dirWith(yaml)));
  assert.equal(
    line,
    'postgresql.connection_url: expected a URL of the form postgresql://agent_user:<password>@<host>:5432/<dbname>, got "mysql://agent_user:****@db.internal/app"',
  );
  assert.ok(!line?.includes(PASSWORD));
});

test('a server_url that is not an http(s) URL is refused', () => {
  const [line] = problems(() => load(dirWith(good.replace('https://tuner.example.com', 'tuner.example.com'))));
  assert.equal(line, 'tuner.server_url: expected an http:// or https:// URL such as https://tuner.example.com, got "tuner.example.com"');
});

test('keys required by the chosen target are named with both places to set them', () => {
  const found = problems(() => load(dirWith(good), { target: 'managed-a' }));
  assert.deepEqual(found, [
    'managed_a.REGION is missing (required with --managed-a): set managed_a.REGION in agent.yaml or AGENT_CLOUDA_REGION (region of the database, e.g. us-east-1)',
    'managed_a.DATABASE_IDENTIFIER is missing (required with --managed-a): set managed_a.DATABASE_IDENTIFIER in agent.yaml or AGENT_MANAGEDA_DATABASE_IDENTIFIER (DB instance identifier; for a cluster, the writer instance)',
  ]);
  const flex = problems(() => load(dirWith(good), { target: 'managed-b-flex' }));
  assert.equal(flex.length, 3);
  assert.match(flex[0]!, /^managed_b_flex\.subscription_id is missing \(required with --managed-b-flex\)/);
});

test('the tuner keys are required only by commands that talk to the service', () => {
  const noTuner = `postgresql:\n  connection_url: postgresql://agent_user:${PASSWORD}@h:5432/db\n`;
  assert.doesNotThrow(() => load(dirWith(noTuner), { needsService: false }));
  const found = problems(() => load(dirWith(noTuner), { needsService: true }));
  assert.equal(found.length, 3);
  assert.match(found[1]!, /^tuner\.api_key is missing \(required to report to the tuning service\)/);
});

test('unknown keys and sections are warned about, with a suggestion', () => {
  const yaml = good.replace('include_queries: true', 'include_querys: true') + 'tunner:\n  x: 1\n';
  const { warnings } = load(dirWith(yaml));
  assert.equal(warnings.length, 2);
  assert.match(warnings[0]!, /unknown key postgresql\.include_querys is ignored \(did you mean include_queries\?\)/);
  assert.match(warnings[1]!, /unknown section "tunner" is ignored \(did you mean tuner\?\)/);
  const env = load(dirWith(good), { env: { AGENT_TUNER_APIKEY: 'x' } }).warnings;
  assert.match(env[0]!, /AGENT_TUNER_APIKEY is not an agent setting and is ignored \(did you mean AGENT_TUNER_API_KEY\?\)/);
});

test('a secret of the wrong type is never echoed, and loaded secrets are masked everywhere', () => {
  const found = problems(() => load(dirWith(good.replace(`api_key: ${API_KEY}`, 'api_key: [1, 2]'))));
  assert.deepEqual(found, ['tuner.api_key: expected a non-empty string, got (hidden)']);
  load(dirWith(good));
  assert.equal(redact(`key ${API_KEY} and password ${PASSWORD}`), 'key **** and password ****');
});

test('redact masks a password in every form a user might type it, known or not', () => {
  const cases: Array<[string, string]> = [
    ['postgresql://agent_user:s3cret-pw@db:5432/app', 'postgresql://agent_user:****@db:5432/app'],
    ['got "postgresql://agent_user:pass word@db:5432:x/app"', 'got "postgresql://agent_user:****@db:5432:x/app"'],
    ['postgresql://agent_user:p@ss@db/app', 'postgresql://agent_user:****@db/app'],
    ['host=db user=agent_user password=kw-secret dbname=app', 'host=db user=agent_user password=**** dbname=app'],
    ["host=db password='with spaces' dbname=app", 'host=db password=**** dbname=app'],
    ["host=db password = 'it\\'s' dbname=app", 'host=db password = **** dbname=app'],
    ['postgresql://agent_user@db/app?sslmode=require&password=q-secret', 'postgresql://agent_user@db/app?sslmode=require&password=****'],
    ['PGPASSWORD=env-secret psql', 'PGPASSWORD=**** psql'],
  ];
  for (const [text, masked] of cases) assert.equal(redact(text), masked, text);
  // Ordinary text is left alone.
  for (const text of [
    'the tuning service at http://127.0.0.1:9 cannot be reached',
    'check the password of agent_user',
    'postgresql://agent_user@db:5432/app',
  ]) {
    assert.equal(redact(text), text);
  }
});

test('a section that is not a mapping says how to write it', () => {
  const [line] = problems(() => load(dirWith('postgresql: postgresql://a@b/c\n')));
  assert.match(line!, /section postgresql must be a mapping of keys/);
});

test('docs/configuration.md is generated from the key table and up to date (npm run docs)', async () => {
  const { readFileSync } = await import('node:fs');
  const { configurationDoc } = await import('../src/agent/config/docs.ts');
  const onDisk = readFileSync(join(import.meta.dirname, '..', 'docs', 'configuration.md'), 'utf8');
  assert.equal(onDisk, configurationDoc());
});

test('guardrail thresholds: the safe defaults, and stricter ones from agent.yaml or the environment', () => {
  assert.deepEqual(load(dirWith(good)).config.guardrails, DEFAULT_THRESHOLDS);
  const stricter = `${good}guardrails:
  memory_floor_percent: 10
  memory_floor_mb: 1024
  runtime_factor: 1.5
  error_rate_increase_percent: 5
  connection_share_percent: 80
`;
  const g = load(dirWith(stricter)).config.guardrails;
  assert.deepEqual(
    [g.memoryFloorShare, g.memoryFloorBytes, g.runtimeFactor, g.rollbackRateIncrease, g.connectionShare],
    [0.1, 1024 * 1024 * 1024, 1.5, 0.05, 0.8],
  );
  assert.equal(g.runtimeFactorAtOnce, DEFAULT_THRESHOLDS.runtimeFactorAtOnce, 'a single very slow window still reverts at once');
  const fromEnv = load(dirWith(good), { env: { AGENT_GUARDRAILS_RUNTIME_FACTOR: '1.25', AGENT_GUARDRAILS_MEMORY_FLOOR_PERCENT: '7.5' } })
    .config.guardrails;
  assert.deepEqual([fromEnv.runtimeFactor, fromEnv.memoryFloorShare], [1.25, 0.075]);
});

test('guardrail thresholds looser than the safe defaults are refused, naming the key, unless allow_looser', () => {
  const looser = `${good}guardrails:
  memory_floor_percent: 2
  memory_floor_mb: 64
  runtime_factor: 3
  error_rate_increase_percent: 50
  connection_share_percent: 99
`;
  const refused = problems(() => load(dirWith(looser)));
  assert.equal(refused.length, 5, refused.join('\n'));
  for (const key of [
    'memory_floor_percent',
    'memory_floor_mb',
    'runtime_factor',
    'error_rate_increase_percent',
    'connection_share_percent',
  ]) {
    const line = refused.find((p) => p.startsWith(`guardrails.${key} (AGENT_GUARDRAILS_${key.toUpperCase()})`));
    assert.ok(line, `${key} named: ${refused.join('\n')}`);
    assert.match(line, /looser than the safe default .*guardrails\.allow_looser: true/);
  }
  assert.ok(refused.some((p) => p.includes('queries may run 3× slower than known-good')));
  const allowed = load(dirWith(`${looser}  allow_looser: true\n`)).config.guardrails;
  assert.deepEqual([allowed.runtimeFactor, allowed.runtimeFactorAtOnce, allowed.connectionShare], [3, 5, 0.99]);
  const way = load(dirWith(`${good}guardrails:\n  runtime_factor: 8\n  allow_looser: true\n`)).config.guardrails;
  assert.equal(way.runtimeFactorAtOnce, 8, 'the single-window factor is never below the two-window one');
});

test('guardrail thresholds that protect nothing are refused even with allow_looser, and wrong types name the form', () => {
  const refused = problems(() =>
    load(
      dirWith(
        `${good}guardrails:\n  runtime_factor: 1\n  memory_floor_percent: 60\n  connection_share_percent: 101\n  allow_looser: true\n`,
      ),
    ),
  );
  assert.deepEqual(refused, [
    'guardrails.runtime_factor (AGENT_GUARDRAILS_RUNTIME_FACTOR): expected a number above 1 and at most 100, got 1',
    'guardrails.memory_floor_percent (AGENT_GUARDRAILS_MEMORY_FLOOR_PERCENT): expected a number above 0 and at most 50, got 60',
    'guardrails.connection_share_percent (AGENT_GUARDRAILS_CONNECTION_SHARE_PERCENT): expected a number above 0 and at most 100, got 101',
  ]);
  const typed = problems(() =>
    load(dirWith(good), { env: { AGENT_GUARDRAILS_RUNTIME_FACTOR: 'twice', AGENT_GUARDRAILS_ALLOW_LOOSER: 'yes' } }),
  );
  assert.deepEqual(typed, [
    'AGENT_GUARDRAILS_RUNTIME_FACTOR: expected a number greater than 0, e.g. 1.5, got "twice"',
    'AGENT_GUARDRAILS_ALLOW_LOOSER: expected true or false, got "yes"',
  ]);
});

// The Patroni target's agent.yaml section and AGENT_PATRONI_* variables, loaded with every other
// key: values checked with messages that name the key, the environment winning, secrets never
// shown, half a credential refused.
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { KEYS } from '../src/agent/config/keys.ts';
import { ConfigError, loadConfig } from '../src/agent/config/load.ts';
import { DEFAULT_APPLY_TIMEOUT_SECONDS, PATRONI_KEYS, patroniConfigOf } from '../src/agent/targets/patroni/config.ts';
import { patroniSection } from '../src/agent/targets/patroni/config.ts';

const root = mkdtempSync(join(tmpdir(), 'tuner-patroni-config-'));
after(() => rmSync(root, { recursive: true, force: true }));
let n = 0;

function load(patroniSection: string, env: NodeJS.ProcessEnv = {}) {
  const dir = join(root, String(n++));
  mkdirSync(dir);
  writeFileSync(
    join(dir, 'agent.yaml'),
    `postgresql:\n  connection_url: postgresql://agent_user:pw@pg1:5432/postgres\n${patroniSection ? `patroni:\n${patroniSection}` : ''}`,
  );
  return loadConfig({ cwd: dir, env, target: 'patroni', needsService: false });
}

function problems(fn: () => unknown): string[] {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof ConfigError, String(err));
    return [...err.problems];
  }
  assert.fail('expected a ConfigError');
}

test('a list of URLs in agent.yaml, credentials, defaults for the rest', () => {
  const { config } = load(`  rest_api_urls: [https://pg1:8008/, https://pg2:8008]\n  username: patroni\n  password: s3cret\n`);
  assert.deepEqual(patroniConfigOf(config), {
    restApiUrls: ['https://pg1:8008', 'https://pg2:8008'],
    username: 'patroni',
    password: 's3cret',
    applyTimeoutSeconds: DEFAULT_APPLY_TIMEOUT_SECONDS,
    maxReplicaLagMb: 64,
  });
});

test('the environment wins: comma-separated URLs, numbers from strings; one URL in agent.yaml is a list of one', () => {
  const { config } = load(`  rest_api_urls: http://old:8008\n`, {
    AGENT_PATRONI_REST_API_URLS: 'http://a:8008, http://b:8008',
    AGENT_PATRONI_APPLY_TIMEOUT_SECONDS: '30',
  });
  assert.deepEqual(patroniSection.of(config).restApiUrls, ['http://a:8008', 'http://b:8008']);
  assert.equal(patroniSection.of(config).applyTimeoutSeconds, 30);
  assert.deepEqual(patroniSection.of(load(`  rest_api_urls: http://one:8008\n`).config).restApiUrls, ['http://one:8008']);
});

test('every problem names its key; a secret is never shown; half a credential is refused', () => {
  assert.match(
    problems(() => load(''))[0]!,
    /^patroni\.rest_api_urls is missing \(required with --patroni\): set patroni\.rest_api_urls in agent\.yaml or AGENT_PATRONI_REST_API_URLS/,
  );
  const bad = problems(() =>
    load(`  rest_api_urls: [ftp://pg1, http://user:pw@pg2:8008]\n  apply_timeout_seconds: -1\n  username: u\n  password: 12345\n`, {
      AGENT_PATRONI_MAX_REPLICA_LAG_MB: 'lots',
    }),
  );
  assert.ok(bad.some((p) => p.startsWith('patroni.rest_api_urls: expected one or more http:// or https:// URLs without a user name')));
  assert.ok(bad.includes('patroni.apply_timeout_seconds: expected a whole number greater than 0, got -1'));
  assert.ok(bad.includes('AGENT_PATRONI_MAX_REPLICA_LAG_MB: expected a whole number greater than 0, got "lots"'));
  assert.ok(bad.some((p) => p.startsWith('patroni.password: expected a non-empty string, got (hidden)')));
  assert.deepEqual(
    problems(() => load(`  rest_api_urls: [http://pg1:8008]\n  username: patroni\n`)),
    [
      "patroni.username (AGENT_PATRONI_USERNAME) is set but patroni.password (AGENT_PATRONI_PASSWORD) is not: Patroni's REST API authenticates a user name and a password together: set both, or neither",
    ],
  );
});

test('--local does not need the patroni section; its keys are still known (no unknown-key warning)', () => {
  const dir = join(root, 'local');
  mkdirSync(dir);
  writeFileSync(join(dir, 'agent.yaml'), 'postgresql:\n  connection_url: postgresql://u:p@h/db\npatroni:\n  cafile: /etc/ca.pem\n');
  const { config, warnings } = loadConfig({ cwd: dir, env: {}, target: 'local', needsService: false });
  assert.deepEqual(warnings, []);
  assert.equal(patroniSection.of(config).caFile, '/etc/ca.pem');
  assert.equal(config.tuner.caFile, undefined, "patroni.cafile is not the tuning service's CA");
});

test('every key has an AGENT_PATRONI_ variable and help; no key or variable is defined twice', () => {
  for (const k of PATRONI_KEYS) {
    assert.equal(k.env, `AGENT_PATRONI_${k.key.toUpperCase()}`);
    assert.ok(k.help.length > 20, k.key);
  }
  // The loader reads each key by its section (targets-closed.test.ts): a name may recur in
  // another section, never twice in one, and no environment variable may serve two keys.
  const repeated = (xs: string[]) => xs.filter((x, i) => xs.indexOf(x) !== i);
  assert.deepEqual(repeated(KEYS.map((k) => `${k.section}.${k.key}`)), []);
  assert.deepEqual(repeated(KEYS.map((k) => k.env)), []);
});

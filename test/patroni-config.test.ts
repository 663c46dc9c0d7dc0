// The Patroni target's agent.yaml section and AGENT_PATRONI_* variables: values checked with
// messages that name the key, the environment winning, secrets never shown.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { DEFAULT_APPLY_TIMEOUT_SECONDS, PATRONI_KEYS, patroniConfigFrom } from '../src/agent/targets/patroni/config.ts';

const file = (entries: Record<string, unknown>) => new Map(Object.entries(entries).map(([k, v]) => [`patroni.${k}`, v]));

test('a list of URLs in agent.yaml, credentials, defaults for the rest', () => {
  const { config, problems } = patroniConfigFrom(
    file({ rest_api_urls: ['https://pg1:8008/', 'https://pg2:8008'], username: 'patroni', password: 's3cret' }),
    {},
  );
  assert.deepEqual(problems, []);
  assert.deepEqual(config, {
    restApiUrls: ['https://pg1:8008', 'https://pg2:8008'],
    username: 'patroni',
    password: 's3cret',
    applyTimeoutSeconds: DEFAULT_APPLY_TIMEOUT_SECONDS,
    maxReplicaLagMb: 64,
  });
});

test('the environment wins: comma-separated URLs, numbers from strings', () => {
  const { config } = patroniConfigFrom(file({ rest_api_urls: ['http://old:8008'] }), {
    AGENT_PATRONI_REST_API_URLS: 'http://a:8008, http://b:8008',
    AGENT_PATRONI_APPLY_TIMEOUT_SECONDS: '30',
  });
  assert.deepEqual(config?.restApiUrls, ['http://a:8008', 'http://b:8008']);
  assert.equal(config?.applyTimeoutSeconds, 30);
});

test('every problem names its key; a secret is never shown; half a credential is refused', () => {
  const missing = patroniConfigFrom(new Map(), {});
  assert.equal(missing.config, null);
  assert.match(
    missing.problems[0]!,
    /^patroni\.rest_api_urls is missing \(required with --patroni\): set it in agent\.yaml or AGENT_PATRONI_REST_API_URLS/,
  );

  const bad = patroniConfigFrom(
    file({ rest_api_urls: ['ftp://pg1', 'http://user:pw@pg2:8008'], apply_timeout_seconds: -1, password: 12345 }),
    { AGENT_PATRONI_MAX_REPLICA_LAG_MB: 'lots' },
  );
  assert.equal(bad.config, null);
  assert.ok(
    bad.problems.some((p) => p.startsWith('patroni.rest_api_urls: expected one or more http:// or https:// URLs without credentials')),
  );
  assert.ok(bad.problems.some((p) => p === 'patroni.apply_timeout_seconds: expected a whole number greater than 0, got -1'));
  assert.ok(bad.problems.some((p) => p === 'AGENT_PATRONI_MAX_REPLICA_LAG_MB: expected a whole number greater than 0, got "lots"'));
  assert.ok(bad.problems.some((p) => p === 'patroni.password: expected a non-empty string, got (hidden)'));

  const half = patroniConfigFrom(file({ rest_api_urls: ['http://pg1:8008'], username: 'patroni' }), {});
  assert.deepEqual(half.problems, [
    "patroni.username set but patroni.password not: Patroni's REST API authenticates a user name and a password together: set both, or neither",
  ]);
});

test('every key has an AGENT_PATRONI_ variable and help', () => {
  for (const k of PATRONI_KEYS) {
    assert.equal(k.env, `AGENT_PATRONI_${k.key.toUpperCase()}`);
    assert.ok(k.help.length > 20, k.key);
  }
});

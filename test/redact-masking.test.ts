// The agent's one secret masking (src/agent/base/redact.ts) against every form a user types a password
// in: each form the hostile test found leaking, then a property test of random secrets of every
// printable ASCII character (a seeded PRNG, so a failure reproduces from its case number).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createRng } from '../src/optimizer/index.ts';
import { forgetSecrets, maskPasswordForms, redact, registerConnectionString } from '../src/agent/base/redact.ts';

/** Every 6-character run of `secret` found in `output`. */
function leakedRuns(secret: string, output: string): string[] {
  const runs: string[] = [];
  for (let i = 0; i + 6 <= secret.length; i++) if (output.includes(secret.slice(i, i + 6))) runs.push(secret.slice(i, i + 6));
  return runs;
}

test('the forms the hostile test found leaking are masked, known or not', () => {
  const cases: Array<[string, string]> = [
    ['postgresql://u:k9/Fq+Zt==@host/db', 'postgresql://u:****@host/db'],
    ['AGENT_TUNER_PROXY_URL=http://u:Pr0xy/Pass@proxy:3128', 'AGENT_TUNER_PROXY_URL=http://u:****@proxy:3128'],
    ['server_url: https://agent:Srv/P@ss#1?x@tuner.example.com/', 'server_url: https://agent:****@tuner.example.com/'],
    ['host=db password="AgentPw-S3cret!x" user=agent_user', 'host=db password=**** user=agent_user'],
    ['host=db password=Zq@7\\ xKw9Lm dbname=app', 'host=db password=**** dbname=app'],
    ['host=db password=Agent,Pw-S3cret dbname=app', 'host=db password=**** dbname=app'],
    // The same inside JSON text (--once and --check print JSON): the JSON stays whole.
    [JSON.stringify({ dsn: 'host=db password="AgentPw-S3cret!x"' }), '{"dsn":"host=db password=****"}'],
    [`  "dsn": ${JSON.stringify('password=Agent,Pw-S3cret')},\n  "x": 1`, '  "dsn": "password=****",\n  "x": 1'],
    ['postgresql://u@db/app?password=Q%2Fsecret&sslmode=require', 'postgresql://u@db/app?password=****&sslmode=require'],
    // A message naming two URLs: each password masked, the example's port kept.
    [
      'expected a proxy URL such as http://proxy.internal:3128, got "http://u:Pr0xy/Pass@127.0.0.1:9"',
      'expected a proxy URL such as http://proxy.internal:3128, got "http://u:****@127.0.0.1:9"',
    ],
    [
      "route to Cloud A's RDS API: https://127.0.0.1:41234: through the proxy http://tuner:Pr0xy/Pass@127.0.0.1:3128, trusting",
      "route to Cloud A's RDS API: https://127.0.0.1:41234: through the proxy http://tuner:****@127.0.0.1:3128, trusting",
    ],
  ];
  for (const [text, masked] of cases) assert.equal(maskPasswordForms(text), masked, text);
  // A URL without credentials, and prose, stay as they are.
  for (const text of [
    'through the proxy http://proxy.internal:3128',
    'postgresql://agent_user@db:5432/app?sslmode=require',
    'the password is wrong',
  ]) {
    assert.equal(redact(text), text);
  }
});

/** A secret of 8 to 31 printable ASCII characters (space to ~). */
function randomSecret(rng: ReturnType<typeof createRng>): string {
  const length = 8 + rng.int(24);
  return Array.from({ length }, () => String.fromCharCode(32 + rng.int(95))).join('');
}

/** Where a user types a password: each form as it would appear in agent.yaml, the environment or a message. */
const FORMS: Record<string, (secret: string) => string> = {
  'URL userinfo, as typed': (s) => `postgresql://agent_user:${s}@db.internal:5432/app?sslmode=require`,
  'URL userinfo, percent-encoded': (s) => `postgresql://agent_user:${encodeURIComponent(s)}@db.internal/app`,
  'URL query parameter': (s) => `postgresql://agent_user@db.internal/app?password=${encodeURIComponent(s)}&sslmode=require`,
  'libpq value in single quotes': (s) => `host=db.internal password='${s.replace(/[\\']/g, '\\$&')}' dbname=app`,
  'libpq value in double quotes': (s) => `host=db.internal password="${s.replace(/[\\"]/g, '\\$&')}" dbname=app`,
  'libpq value unquoted': (s) => `host=db.internal password=${s.replace(/^['"]|[\\\s]/g, '\\$&')} dbname=app`,
  'proxy URL in the environment': (s) => `AGENT_TUNER_PROXY_URL=http://proxy-user:${s}@proxy.internal:3128`,
  'server_url with credentials': (s) => `server_url: https://agent:${s}@tuner.example.com/api`,
};
const CASES = 300;

test(`property: ${CASES} random secrets in every form, unknown to the agent, leave no 6-character run`, () => {
  const rng = createRng('redact-masking', 'unknown');
  for (let n = 0; n < CASES; n++) {
    const secret = randomSecret(rng);
    for (const [form, write] of Object.entries(FORMS)) {
      const text = `cannot connect with ${write(secret)} (attempt 1)`;
      const out = maskPasswordForms(text);
      assert.deepEqual(leakedRuns(secret, out), [], `case ${n}, ${form}: ${JSON.stringify(secret)} → ${out}`);
    }
  }
});

test(`property: ${CASES} random secrets registered from the config leave no 6-character run, printed raw or as JSON`, () => {
  const rng = createRng('redact-masking', 'registered');
  for (let n = 0; n < CASES; n++) {
    const secret = randomSecret(rng);
    for (const [form, write] of Object.entries(FORMS)) {
      forgetSecrets();
      const value = write(secret);
      registerConnectionString(value.replace(/^[A-Z_]+=|^server_url: /, ''));
      for (const out of [redact(`loaded ${value}`), redact(JSON.stringify({ value }, null, 2)), redact(JSON.stringify([value]))]) {
        assert.deepEqual(leakedRuns(secret, out), [], `case ${n}, ${form}: ${JSON.stringify(secret)} → ${out}`);
      }
    }
  }
});

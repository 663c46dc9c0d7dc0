// A hostile or careless configuration, through the real agent process: every form in which a
// user might type a secret stays out of everything the agent prints, and each mistake is one
// clear line with exit code 2 (no stack trace, no retrying for ever, no misleading extra line).
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { runAgent, type AgentRun } from './helpers/agent-process.ts';

const dirs: string[] = [];
const transcript: string[] = [];

after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

function dirWith(yaml?: string): string {
  const dir = mkdtempSync(join(tmpdir(), 'tuner-faults-config-'));
  dirs.push(dir);
  if (yaml !== undefined) writeFileSync(join(dir, 'agent.yaml'), yaml);
  return dir;
}

const TUNER = [
  'tuner:',
  '  server_url: http://127.0.0.1:9',
  '  api_key: tk_config_fault_0123456789ab',
  '  database_id: 0b7c2c44-7d7e-4e0b-9b7e-3c4c1f2a9d10',
];

async function agent(cwd: string, args: string[], env: NodeJS.ProcessEnv = {}): Promise<AgentRun> {
  const run = await runAgent(args, { cwd, env, timeoutMs: 60_000 });
  transcript.push(run.stdout, run.stderr);
  return run;
}

/** Connection strings as people type them, each with the secret it must never show. */
const SECRET_FORMS: Array<{ form: string; value: string; secret: string }> = [
  {
    form: 'libpq keyword/value',
    value: 'host=127.0.0.1 port=5432 user=agent_user password=kw-Secret-41 dbname=postgres',
    secret: 'kw-Secret-41',
  },
  {
    form: 'libpq keyword/value, quoted with a space',
    value: "host=127.0.0.1 user=agent_user password='quoted Secret 42' dbname=postgres",
    secret: 'Secret 42',
  },
  {
    form: 'libpq keyword/value, spaces around =',
    value: 'host=127.0.0.1 user=agent_user password = spaced-Secret-43 dbname=postgres',
    secret: 'spaced-Secret-43',
  },
  {
    form: 'a URL whose password has a space, in a URL that is not valid',
    value: 'postgresql://agent_user:pass word-Secret-44@127.0.0.1:5432:x/postgres',
    secret: 'word-Secret-44',
  },
  {
    form: 'a URL whose password has a space, of another scheme',
    value: 'mysql://agent_user:pass word-Secret-45@127.0.0.1/postgres',
    secret: 'word-Secret-45',
  },
  {
    form: 'a password in the query string',
    value: 'mysql://agent_user@127.0.0.1/postgres?sslmode=disable&password=query-Secret-46',
    secret: 'query-Secret-46',
  },
];

for (const { form, value, secret } of SECRET_FORMS) {
  test(`connection_url as ${form}: refused with exit 2, the password nowhere`, async () => {
    const fromFile = await agent(dirWith(['postgresql:', `  connection_url: ${JSON.stringify(value)}`, ...TUNER, ''].join('\n')), [
      '--local',
      '--check',
    ]);
    assert.equal(fromFile.code, 2, fromFile.stderr);
    assert.match(fromFile.stderr, /postgresql\.connection_url: expected a URL/);
    const fromEnv = await agent(dirWith(), ['--local', '--check'], { AGENT_POSTGRESQL_CONNECTION_URL: value });
    assert.equal(fromEnv.code, 2, fromEnv.stderr);
    assert.match(fromEnv.stderr, /AGENT_POSTGRESQL_CONNECTION_URL: expected a URL/);
    for (const run of [fromFile, fromEnv]) assert.ok(!`${run.stdout}${run.stderr}`.includes(secret), `the secret leaked:\n${run.stderr}`);
  });
}

test('a server_url with credentials is refused at once, with exit 2 and the password nowhere', async () => {
  const dir = dirWith(
    [
      'postgresql:',
      '  connection_url: postgresql://agent_user:x@127.0.0.1:9/postgres',
      'tuner:',
      '  server_url: http://tuner:srv-Secret-47@127.0.0.1:9',
      '  api_key: tk_config_fault_0123456789ab',
      '  database_id: 0b7c2c44-7d7e-4e0b-9b7e-3c4c1f2a9d10',
      '',
    ].join('\n'),
  );
  const run = await agent(dir, ['--local']);
  assert.equal(run.code, 2, run.stderr);
  assert.match(run.stderr, /tuner\.server_url: .*must not carry a user name or password/);
  assert.ok(!run.stderr.includes('srv-Secret-47'), run.stderr);
});

test('--config naming a directory is one clear line with exit 2, not a stack trace', async () => {
  const dir = dirWith();
  mkdirSync(join(dir, 'conf.d'));
  const run = await agent(dir, ['--local', '--check', '--config', join(dir, 'conf.d')]);
  assert.equal(run.code, 2, run.stderr);
  assert.match(run.stderr, /conf\.d: is a directory, not a file/);
  assert.doesNotMatch(run.stderr, /\n\s+at /, 'no stack trace');
});

test('invalid YAML is reported alone, without a misleading "is missing" line', async () => {
  const run = await agent(
    dirWith(['postgresql:', '  connection_url: postgresql://a@b/c', '  include_queries: [true', ...TUNER, ''].join('\n')),
    ['--local', '--check'],
  );
  assert.equal(run.code, 2, run.stderr);
  assert.match(run.stderr, /invalid YAML/);
  assert.doesNotMatch(run.stderr, /is missing/);
});

test('nothing the agent printed in this file holds a secret', () => {
  const all = transcript.join('\n');
  assert.ok(all.length > 500, 'the transcript holds the runs above');
  for (const { secret } of SECRET_FORMS) assert.ok(!all.includes(secret), `a secret leaked: ${secret}`);
  assert.ok(!all.includes('tk_config_fault_0123456789ab'), 'the API key leaked');
  assert.ok(!all.includes('srv-Secret-47'), 'the service password leaked');
});

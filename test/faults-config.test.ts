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

test('--check says which configuration file it read: --config, AGENT_CONFIG, ./agent.yaml, or none', async () => {
  const yaml = ['postgresql:', '  connection_url: postgresql://agent_user:x@127.0.0.1:9/postgres', ...TUNER, ''].join('\n');
  const elsewhere = join(dirWith(yaml), 'agent.yaml');
  const cases: Array<{ args: string[]; env: NodeJS.ProcessEnv; cwd: string; says: (cwd: string) => string }> = [
    { args: ['--config', elsewhere], env: {}, cwd: dirWith(), says: () => `configuration: ${elsewhere} (--config)` },
    { args: [], env: { AGENT_CONFIG: elsewhere }, cwd: dirWith(), says: () => `configuration: ${elsewhere} (AGENT_CONFIG)` },
    { args: [], env: {}, cwd: dirWith(yaml), says: (cwd) => `configuration: ${join(cwd, 'agent.yaml')} (the working directory)` },
    {
      args: [],
      env: { AGENT_POSTGRESQL_CONNECTION_URL: 'postgresql://agent_user:x@127.0.0.1:9/postgres' },
      cwd: dirWith(),
      says: (cwd) =>
        `configuration: no file (none of ${join(cwd, 'agent.yaml')}, /etc/tuner-agent/agent.yaml exists): the environment only, 1 environment variable`,
    },
  ];
  for (const { args, env, cwd, says } of cases) {
    const run = await agent(cwd, ['--local', '--check', ...args], env);
    assert.equal(run.code, 3, run.stdout + run.stderr);
    assert.equal(run.stdout.split('\n')[1], says(cwd), run.stdout);
  }
});

test('a --config or AGENT_CONFIG that does not exist is one line naming it, exit 2, even with the environment set', async () => {
  const dir = dirWith(['postgresql:', '  connection_url: postgresql://agent_user:x@127.0.0.1:9/postgres', ''].join('\n'));
  const env = { AGENT_POSTGRESQL_CONNECTION_URL: 'postgresql://agent_user:x@127.0.0.1:9/postgres' };
  const missing = join(dir, 'nowhere', 'agent.yaml');
  for (const [args, extra, named] of [
    [['--config', missing], {}, `--config ${missing}`],
    [[], { AGENT_CONFIG: missing }, `AGENT_CONFIG=${missing}`],
  ] as const) {
    const run = await agent(dir, ['--local', '--check', ...args], { ...env, ...extra });
    assert.equal(run.code, 2, run.stdout + run.stderr);
    assert.equal(run.stderr.trim().split('\n').length, 1, run.stderr);
    assert.ok(run.stderr.startsWith(`tuner-agent: ${named}: no such file; `), run.stderr);
    assert.equal(run.stdout, '', 'no check ran on another file');
  }
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

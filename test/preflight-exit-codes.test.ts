// Issue 28: exit codes exactly as docs/cli.md says. Half a cloud credential (one key of the
// Cloud A access key pair, in agent.yaml or the AGENT_CLOUDA_* variables; some of the CLOUDB_*
// service-principal variables) is a configuration error: exit 2, one line naming the keys, the
// values never shown. It used to exit 1 from deep inside the target, after connecting.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { ConfigError, loadConfig } from '../src/agent/config/load.ts';
import { runAgent, type AgentRun } from './helpers/agent-process.ts';
import { managedAConfig } from '../src/agent/targets/managed-a/config.ts';

const dirs: string[] = [];
const transcript: string[] = [];
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const ACCESS_KEY_ID = 'AKIAHALFSETPAIR00001';
const SECRET_ACCESS_KEY = 'half-set-Secret/Access+Key-0001';
const CLIENT_SECRET = 'sp-Secret~half-set-0002';

// Nothing listens on port 9: a run that got as far as connecting would exit 1, not 2.
const COMMON = [
  'postgresql:',
  '  connection_url: postgresql://agent_user:agent-Pass-1@127.0.0.1:9/postgres',
  'tuner:',
  '  server_url: http://127.0.0.1:9',
  '  api_key: tk_exit_codes_0123456789abcdef',
  '  database_id: 0b7c2c44-7d7e-4e0b-9b7e-3c4c1f2a9d10',
];
const MANAGED_A = ['managed_a:', '  REGION: us-east-1', '  DATABASE_IDENTIFIER: mydb'];
const MANAGED_B = [
  'managed_b_flex:',
  '  subscription_id: 00000000-0000-0000-0000-000000000001',
  '  resource_group_name: rg',
  '  server_name: flex',
];

function dirWith(lines: string[]): string {
  const dir = mkdtempSync(join(tmpdir(), 'tuner-exit-codes-'));
  dirs.push(dir);
  writeFileSync(join(dir, 'agent.yaml'), `${[...COMMON, ...lines].join('\n')}\n`);
  return dir;
}

async function agent(cwd: string, args: string[], env: NodeJS.ProcessEnv = {}): Promise<AgentRun> {
  const run = await runAgent(args, { cwd, env, timeoutMs: 60_000 });
  transcript.push(run.stdout, run.stderr);
  return run;
}

test('only managed_a.ACCESS_KEY_ID in agent.yaml: exit 2, naming both keys', async () => {
  const dir = dirWith([...MANAGED_A, `  ACCESS_KEY_ID: ${ACCESS_KEY_ID}`]);
  for (const args of [['--managed-a'], ['--managed-a-cluster', '--check']]) {
    const run = await agent(dir, args);
    assert.equal(run.code, 2, `${args.join(' ')}: ${run.stdout}${run.stderr}`);
    assert.equal(
      run.stderr,
      'tuner-agent: managed_a.ACCESS_KEY_ID (AGENT_CLOUDA_ACCESS_KEY_ID) is set but managed_a.SECRET_ACCESS_KEY (AGENT_CLOUDA_SECRET_ACCESS_KEY) is not: ' +
        'an access key is its id and its secret together: set both, or neither to use the role attached to this host\n',
    );
  }
});

test('only AGENT_CLOUDA_SECRET_ACCESS_KEY in the environment: exit 2, naming both keys', async () => {
  const run = await agent(dirWith(MANAGED_A), ['--managed-a'], { AGENT_CLOUDA_SECRET_ACCESS_KEY: SECRET_ACCESS_KEY });
  assert.equal(run.code, 2, run.stdout + run.stderr);
  assert.match(
    run.stderr,
    /managed_a\.SECRET_ACCESS_KEY \(AGENT_CLOUDA_SECRET_ACCESS_KEY\) is set but managed_a\.ACCESS_KEY_ID \(AGENT_CLOUDA_ACCESS_KEY_ID\) is not/,
  );
});

test('one key in agent.yaml and the other in the environment make a pair', () => {
  const dir = dirWith([...MANAGED_A, `  ACCESS_KEY_ID: ${ACCESS_KEY_ID}`]);
  const { config } = loadConfig({
    cwd: dir,
    env: { AGENT_CLOUDA_SECRET_ACCESS_KEY: SECRET_ACCESS_KEY },
    target: 'managed-a',
    needsService: true,
  });
  assert.deepEqual([managedAConfig.of(config).accessKeyId, managedAConfig.of(config).secretAccessKey], [ACCESS_KEY_ID, SECRET_ACCESS_KEY]);
});

test('a partial set of CLOUDB_* variables: exit 2, naming the missing ones', async () => {
  const run = await agent(dirWith(MANAGED_B), ['--managed-b-flex'], {
    CLOUDB_CLIENT_ID: '11111111-2222-3333-4444-555555555555',
    CLOUDB_CLIENT_SECRET: CLIENT_SECRET,
  });
  assert.equal(run.code, 2, run.stdout + run.stderr);
  assert.equal(
    run.stderr,
    'tuner-agent: CLOUDB_CLIENT_ID and CLOUDB_CLIENT_SECRET are set but CLOUDB_TENANT_ID is not: ' +
      'a service principal is its appId, password and tenant together: set all three, or none to use the managed identity of this VM\n',
  );
  const check = await agent(dirWith(MANAGED_B), ['--managed-b-flex', '--check'], { CLOUDB_TENANT_ID: 'tenant-1' });
  assert.equal(check.code, 2, check.stdout + check.stderr);
  assert.match(check.stderr, /CLOUDB_TENANT_ID is set but CLOUDB_CLIENT_ID and CLOUDB_CLIENT_SECRET are not/);
});

test('the credentials of another target are not its business', () => {
  const dir = dirWith([...MANAGED_A, `  ACCESS_KEY_ID: ${ACCESS_KEY_ID}`]);
  assert.doesNotThrow(() => loadConfig({ cwd: dir, env: { CLOUDB_CLIENT_ID: 'x' }, target: 'local', needsService: true }));
  assert.throws(
    () => loadConfig({ cwd: dir, env: {}, target: 'managed-a-cluster', needsService: false }),
    (err: unknown) => err instanceof ConfigError && err.problems.length === 1,
  );
});

test('no secret of this file appears in anything the agent printed', () => {
  const all = transcript.join('\n');
  assert.ok(all.length > 0);
  for (const secret of [SECRET_ACCESS_KEY, CLIENT_SECRET]) assert.ok(!all.includes(secret), `leaked: ${secret.slice(0, 4)}…`);
});

// A target is closed: everything about it is in its folder. The noop fixture
// (test/fixtures/targets/noop/) has its own agent.yaml section (with a key `username`, which
// Patroni's section has too), a setup step and a TLS default; the one `.with()` line below is all
// it takes for them to reach the CLI, the configuration loader, --check, the setup page and the
// service's input check. Each test fails when its path reads the built-in list instead.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import YAML from 'yaml';
import { loadConfig } from '../src/agent/config/load.ts';
import { main } from '../src/agent/process/cli.ts';
import { patroniSection } from '../src/agent/targets/patroni/config.ts';
import { TARGETS } from '../src/agent/targets/registry.ts';
import { AGENT_USER_PASSWORD_FOR_TESTS, startCluster, type Cluster } from '../src/lab/cluster.ts';
import { newDatabaseInputSchema } from '../src/service/databases/inputs.ts';
import { setupSnippets } from '../src/service/setup/snippets.ts';
import { noopConfig } from './fixtures/targets/noop/config.ts';
import { noopDefinition } from './fixtures/targets/noop/index.ts';

const registry = TARGETS.with(noopDefinition);

const DATABASE_ID = '0b7e1c9a-3f64-4d2e-8a51-9c0d2e4f6a17';

let cluster: Cluster;
let dir: string;
before(async () => {
  cluster = await startCluster();
  dir = mkdtempSync(join(tmpdir(), 'tuner-noop-'));
});
after(async () => {
  await cluster?.destroy();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

async function run(argv: string[], env: Record<string, string>, cwd = dir) {
  const out: string[] = [];
  const err: string[] = [];
  const code = await main(argv, env, cwd, { out: (t) => out.push(t), err: (t) => err.push(t) }, registry);
  return { code, out: out.join(''), err: err.join('') };
}

test('the setup page shows its step and its keys, with environment names from its key table', () => {
  const snippets = setupSnippets(
    {
      target: 'noop',
      databaseId: DATABASE_ID,
      apiKey: null,
      serverUrl: 'https://tuner.example.com',
      agentImage: 'registry.example.com/tuner-agent:latest',
      installScriptUrl: 'https://tuner.example.com/install.sh',
    },
    registry,
  );
  assert.deepEqual(
    snippets.steps.map((s) => s.id),
    ['noop-step', 'database-sql'],
  );
  assert.equal(snippets.steps[0]!.text, `noop register ${DATABASE_ID}\n`);
  const yaml = YAML.parse(snippets.agentYaml) as Record<string, Record<string, unknown>>;
  assert.deepEqual(yaml['noop'], { endpoint: 'https://noop.invalid', username: '<NOOP_USER>' });
  assert.match(snippets.agentYaml, /^ {2}# The noop API\.\n {2}endpoint: https:\/\/noop\.invalid$/m);
  assert.match(snippets.containerCommand, /^ {2}-e AGENT_NOOP_ENDPOINT=https:\/\/noop\.invalid \\$/m);
  assert.match(snippets.containerCommand, /^ {2}-e AGENT_NOOP_USERNAME='<NOOP_USER>' \\$/m);
  assert.match(
    snippets.agentYaml,
    /connection_url: postgresql:\/\/agent_user:<AGENT_USER_PASSWORD>@noop-db:5432\/postgres\?sslmode=require/,
  );
  assert.equal(snippets.ecsTaskDefinition, null);
  assert.throws(() => setupSnippets({ ...snippetsInput(), target: 'noop' }), /unknown target noop/);
});

function snippetsInput() {
  return {
    databaseId: DATABASE_ID,
    apiKey: null,
    serverUrl: 'https://tuner.example.com',
    agentImage: 'i',
    installScriptUrl: 'https://tuner.example.com/install.sh',
  };
}

test('the loader reads its section by section and key: noop.username and patroni.username are two values', () => {
  const file = join(dir, 'both.yaml');
  writeFileSync(
    file,
    YAML.stringify({
      postgresql: { connection_url: 'postgresql://agent_user@localhost/postgres' },
      noop: { endpoint: 'https://noop.invalid', username: 'noop-user' },
      patroni: { rest_api_urls: ['http://pg1:8008'], username: 'patroni-user', password: 'pw' },
    }),
  );
  const { config, warnings } = loadConfig({
    cwd: dir,
    env: { AGENT_NOOP_USERNAME: 'from-env' },
    target: 'noop',
    needsService: false,
    file,
    registry,
  });
  assert.deepEqual(warnings, []);
  assert.deepEqual(noopConfig.of(config), { endpoint: 'https://noop.invalid', username: 'from-env' });
  assert.equal(patroniSection.of(config).username, 'patroni-user');
  // The built-in list does not know the section: its keys are warned about and ignored.
  const builtIn = loadConfig({ cwd: dir, env: {}, target: 'local', needsService: false, file });
  assert.ok(builtIn.warnings.some((w) => w.includes('unknown section "noop"')));
  assert.deepEqual(noopConfig.of(builtIn.config), {});
});

test('the CLI requires its key with --noop, naming the key and its variable', async () => {
  const { code, err } = await run(['--noop', '--check'], { AGENT_POSTGRESQL_CONNECTION_URL: cluster.agentUrl });
  assert.equal(code, 2, err);
  assert.match(err, /noop\.endpoint is missing \(required with --noop\): set noop\.endpoint in agent\.yaml or AGENT_NOOP_ENDPOINT/);
});

test('--check connects with its TLS default (require), and runs its preflight with its keys', async () => {
  const env = { AGENT_NOOP_ENDPOINT: 'https://noop.invalid' };
  // The test cluster speaks no TLS: with no sslmode in the URL, the target's default refuses it.
  const noTls = await run(['--noop', '--check'], { ...env, AGENT_POSTGRESQL_CONNECTION_URL: cluster.agentUrl });
  assert.equal(noTls.code, 3, noTls.err + noTls.out);
  // (libpq's default, prefer, would have connected without TLS.)
  assert.match(noTls.out, /FAIL {2}TLS with the database at .*sslmode=require requires it/);
  // An sslmode in the URL wins; then the noop target's own preflight line, with its key's value.
  const url = new URL(cluster.agentUrl);
  url.password = AGENT_USER_PASSWORD_FOR_TESTS;
  url.searchParams.set('sslmode', 'disable');
  const plain = await run(['--noop', '--check'], { ...env, AGENT_POSTGRESQL_CONNECTION_URL: url.toString() });
  assert.match(plain.out, /tuner-agent --noop --check: noop \(memory\)/);
  assert.match(plain.out, /noop: nothing to check.*its API: https:\/\/noop\.invalid/);
});

test("the service's input check takes its kind from the same registry", () => {
  assert.ok(newDatabaseInputSchema(registry).safeParse({ name: 'x', target: 'noop' }).success);
  assert.ok(!newDatabaseInputSchema(TARGETS).safeParse({ name: 'x', target: 'noop' }).success);
});

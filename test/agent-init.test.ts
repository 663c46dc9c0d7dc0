// `tuner-agent init DIR --TARGET`: the agent.yaml template of each target, filled in, is accepted
// by the agent's own loader; a directory already in use is refused. (Under the binary, init also
// copies the binary: agent-binary.test.ts.)
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { agentYamlTemplate } from '../src/agent/config/template.ts';
import { initInstance } from '../src/agent/process/init.ts';
import { loadConfig } from '../src/agent/config/load.ts';
import { TARGETS } from '../src/agent/targets/registry.ts';
import { runAgent } from './helpers/agent-process.ts';

const dirs: string[] = [];
const tempDir = () => {
  const dir = mkdtempSync(join(tmpdir(), 'tuner-init-'));
  dirs.push(dir);
  return dir;
};
after(() => {
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

const FILLED: Record<string, string> = {
  'postgresql://agent_user:<password>@<host>:5432/<dbname>': 'postgresql://agent_user:pw@db.internal:5432/app',
  '<SERVER_URL>': 'https://tuner.example.com',
  '<API_KEY>': 'tuner_key',
  '<DATABASE_ID>': '6f1c1a52-8a3e-4c1d-9d2a-0c5b7f0e9a11',
  '<REGION>': 'us-east-1',
  '<DATABASE_IDENTIFIER>': 'orders-db',
  '<SUBSCRIPTION_ID>': '00000000-0000-0000-0000-000000000000',
  '<RESOURCE_GROUP_NAME>': 'rg',
  '<SERVER_NAME>': 'flex',
  '<REST_API_URLS>': 'https://pg1:8008,https://pg2:8008',
  '<PROJECT>': 'my-project',
  '<INSTANCE>': 'orders-sql',
};

for (const target of TARGETS.kinds) {
  test(`the agent.yaml template for --${target}, filled in, loads without a warning`, () => {
    const template = agentYamlTemplate(target);
    let filled = template;
    for (const [placeholder, value] of Object.entries(FILLED)) filled = filled.replaceAll(placeholder, value);
    assert.ok(!/^\s*[A-Za-z_]+: .*<[A-Za-z_]+>/m.test(filled), `a required key left with a placeholder:\n${filled}`);
    const dir = tempDir();
    writeFileSync(join(dir, 'agent.yaml'), filled);
    const loaded = loadConfig({ cwd: dir, env: {}, target, needsService: true });
    assert.deepEqual(loaded.warnings, []);
    assert.equal(loaded.config.tuner.apiKey, 'tuner_key');
    // Unfilled, it is refused with the key named, not taken for a real value.
    writeFileSync(join(dir, 'agent.yaml'), template);
    assert.throws(() => loadConfig({ cwd: dir, env: {}, target, needsService: true }), /connection_url/);
  });
}

test('init under Node writes agent.yaml (owner-only) and says there is no binary to copy; a used directory is refused', async () => {
  const host = tempDir();
  const made = await runAgent(['init', 'orders', '--managed-a'], { cwd: host, binary: null });
  assert.equal(made.code, 0, made.stderr);
  assert.deepEqual(readdirSync(join(host, 'orders')), ['agent.yaml']);
  assert.equal(statSync(join(host, 'orders', 'agent.yaml')).mode & 0o777, 0o600);
  assert.equal(readFileSync(join(host, 'orders', 'agent.yaml'), 'utf8'), agentYamlTemplate('managed-a'));
  assert.match(made.stdout, /no single file to copy/);
  assert.match(made.stdout, /npx tuner-agent --managed-a --check/);

  const again = await runAgent(['init', 'orders', '--managed-a'], { cwd: host, binary: null });
  assert.equal(again.code, 2);
  assert.match(again.stderr, /orders is not empty \(it holds agent\.yaml\); give each instance a new directory/);
  const noDir = await runAgent(['init', '--local'], { cwd: host, binary: null });
  assert.equal(noDir.code, 2);
  assert.match(noDir.stderr, /init needs a directory/);
  const noTarget = await runAgent(['init', 'x'], { cwd: host, binary: null });
  assert.equal(noTarget.code, 2);
  assert.match(noTarget.stderr, /choose a target/);
});

test('on Windows, init copies the binary as tuner-agent.exe and says to run it so', () => {
  const cwd = tempDir();
  const executable = join(cwd, 'node.exe');
  writeFileSync(executable, 'MZ');
  const outcome = initInstance('db1', 'local', cwd, executable, true, 'win32');
  assert.deepEqual(readdirSync(outcome.dir).sort(), ['agent.yaml', 'tuner-agent.exe']);
  assert.match(outcome.text, /cd \S+db1 && \.\\tuner-agent\.exe --local --check/);
});

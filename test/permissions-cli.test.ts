// Issue 46: every `tuner-agent permissions --<kind>` prints its document alone on stdout, so that
// `tuner-agent permissions --<kind> > file` is that file: JSON that parses (the cloud policy and
// role), or SQL that psql runs as it is (the grants). The notes (why each action, the `#` set-up
// steps) go to stderr. Each kind of the registry is run as a real agent process, and its stdout
// handed to the parser its format names: JSON.parse, or psql against a throwaway cluster.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { localGrantsSql } from '../src/agent/targets/local/permissions.ts';
import { managedAPolicyJson } from '../src/agent/targets/managed-a/permissions.ts';
import { managedBFlexRoleJson } from '../src/agent/targets/managed-b-flex/permissions.ts';
import { managedCRoleJson } from '../src/agent/targets/managed-c/permissions.ts';
import { patroniGrantsSql } from '../src/agent/targets/patroni/permissions.ts';
import { TARGETS } from '../src/agent/targets/registry.ts';
import { startCluster, type Cluster } from '../src/lab/cluster.ts';
import { runAgent, type AgentRun } from './helpers/agent-process.ts';

/** Each kind's document: its format, and what the agent's own module makes of it. */
const DOCUMENTS: Record<string, { format: 'json' | 'sql'; text: string }> = {
  local: { format: 'sql', text: localGrantsSql('agent_user') },
  'managed-a': { format: 'json', text: managedAPolicyJson() },
  'managed-a-cluster': { format: 'json', text: managedAPolicyJson({ cluster: true }) },
  'managed-b-flex': { format: 'json', text: managedBFlexRoleJson(null) },
  'managed-c': { format: 'json', text: managedCRoleJson() },
  patroni: { format: 'sql', text: patroniGrantsSql('agent_user') },
};

const dirs: string[] = [];
let cluster: Cluster;

before(async () => {
  cluster = await startCluster();
});

after(async () => {
  await cluster?.destroy();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

/** An empty working directory: no agent.yaml, so the documents show their placeholders. */
function emptyDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'tuner-permissions-'));
  dirs.push(dir);
  return dir;
}

async function permissions(...args: string[]): Promise<AgentRun> {
  const run = await runAgent(['permissions', ...args], { cwd: emptyDir(), timeoutMs: 60_000 });
  assert.equal(run.code, 0, run.stderr);
  return run;
}

/** `psql -v ON_ERROR_STOP=1 < document`: exit 0 only if every line is SQL the server ran. */
function psql(sql: string): Promise<{ code: number; output: string }> {
  return new Promise((resolve) => {
    const child = execFile(
      join(cluster.binDir, 'psql'),
      ['-X', '-q', '-v', 'ON_ERROR_STOP=1', '-d', cluster.adminUrl],
      { timeout: 30_000 },
      (error, stdout, stderr) => resolve({ code: error ? (typeof error.code === 'number' ? error.code : 1) : 0, output: stdout + stderr }),
    );
    child.stdin!.end(sql);
  });
}

test('every kind of the registry has its document format here', () => {
  assert.deepEqual(Object.keys(DOCUMENTS).sort(), [...TARGETS.kinds].sort());
});

for (const kind of TARGETS.kinds) {
  test(`permissions --${kind}: stdout is the document alone (${DOCUMENTS[kind]?.format ?? 'unknown'}), the notes on stderr`, async () => {
    const document = DOCUMENTS[kind];
    assert.ok(document, `no document format for --${kind}`);
    const run = await permissions(`--${kind}`);
    assert.equal(run.stdout, document.text, "the agent's own document, nothing added");
    if (document.format === 'json') {
      assert.equal(typeof JSON.parse(run.stdout), 'object');
    } else {
      // SQL comments (--) are part of the document; a note (#) would be a syntax error here.
      const ran = await psql(run.stdout);
      assert.equal(ran.code, 0, ran.output);
      assert.doesNotMatch(run.stdout, /^#/m);
    }
    // Whatever the notes are, none of them is on stdout.
    for (const line of run.stderr.split('\n').filter((l) => l.trim() !== '')) assert.ok(!run.stdout.includes(line), line);
  });
}

test('permissions --managed-a[-cluster] --extended: still JSON alone, each action explained on stderr', async () => {
  for (const kind of ['managed-a', 'managed-a-cluster']) {
    const run = await permissions(`--${kind}`, '--extended');
    const policy = JSON.parse(run.stdout) as { Statement: Array<{ Action: string[] }> };
    for (const action of policy.Statement.flatMap((s) => s.Action)) assert.match(run.stderr, new RegExp(`^# ${action} \\(`, 'm'));
  }
});

test('permissions --managed-b-flex: the role as JSON on stdout, the steps that create and assign it on stderr', async () => {
  const run = await permissions('--managed-b-flex');
  const role = JSON.parse(run.stdout) as { Name: string; AssignableScopes: string[] };
  assert.equal(role.Name, 'tuner-agent <server_name>');
  assert.match(run.stderr, /^# 1\. Save the role as tuner-agent-role\.json/m);
  assert.match(run.stderr, /^#\s+tuner-agent permissions --managed-b-flex > tuner-agent-role\.json$/m);
  assert.match(run.stderr, /az role definition create --role-definition @tuner-agent-role\.json/);
  assert.ok(
    run.stderr.split('\n').every((l) => l === '' || l.startsWith('#')),
    'the steps are # lines',
  );
});

test("permissions --patroni: the grants on stdout, the REST API's credentials on stderr", async () => {
  const run = await permissions('--patroni');
  assert.match(run.stdout, /^GRANT pg_monitor TO agent_user;$/m);
  assert.match(run.stderr, /restapi\.authentication/);
  assert.match(run.stderr, /PATCH \/config/);
  assert.doesNotMatch(run.stdout, /restapi/);
});

test('permissions with a --config or AGENT_CONFIG that does not exist: one line naming it, exit 2, no document', async () => {
  const missing = join(emptyDir(), 'agent.yaml');
  for (const [args, env, named] of [
    [['--config', missing], {}, `--config ${missing}`],
    [[], { AGENT_CONFIG: missing }, `AGENT_CONFIG=${missing}`],
  ] as const) {
    const run = await runAgent(['permissions', '--managed-b-flex', ...args], { cwd: emptyDir(), env, timeoutMs: 60_000 });
    assert.equal(run.code, 2, run.stderr);
    assert.equal(run.stdout, '');
    assert.ok(run.stderr.startsWith(`tuner-agent: ${named}: no such file; `), run.stderr);
  }
});

test('permissions --managed-b-flex --config PATH: the role scoped by that file', async () => {
  const file = join(emptyDir(), 'elsewhere.yaml');
  writeFileSync(
    file,
    [
      'postgresql:',
      '  connection_url: postgresql://agent_user:x@127.0.0.1:9/postgres',
      'managed_b_flex:',
      '  subscription_id: sub-46',
      '  resource_group_name: rg-46',
      '  server_name: flex-46',
      '',
    ].join('\n'),
  );
  const run = await permissions('--managed-b-flex', '--config', file);
  const role = JSON.parse(run.stdout) as { Name: string; AssignableScopes: string[] };
  assert.equal(role.Name, 'tuner-agent flex-46');
  assert.deepEqual(role.AssignableScopes, ['/subscriptions/sub-46/resourceGroups/rg-46']);
});

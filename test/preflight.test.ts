// The complete preflight (issue 15): `tuner-agent --check` asks the real tuning service whether
// the API key and database id are accepted (through the protocol's check call, which takes no
// lease), and names the step at which the database endpoint fails. Each failure is its own FAIL
// line with its fix and a non-zero exit, and no secret appears in any form it was typed.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { AGENT_USER_PASSWORD_FOR_TESTS, freePort, type Cluster } from '../src/lab/cluster.ts';
import { startAgentCluster } from './helpers/agent-cluster.ts';
import { runAgent, startAgent, type AgentRun } from './helpers/agent-process.ts';
import { until } from './helpers/until.ts';
import type { PersonClient, TestService } from './helpers/service.ts';
import { startAdminService, type AdminService } from './helpers/service-admin.ts';

const WRONG_PASSWORD = 'wrong-Pass@word/77';
let cluster: Cluster;
let lab: AdminService;
let service: TestService;
let person: PersonClient;
let databaseId: string;
let apiKey: string;
const dirs: string[] = [];
const transcript: string[] = [];

function agentDir(tuner: { serverUrl?: string; apiKey?: string; databaseId?: string } = {}, connectionUrl = cluster.agentUrl): string {
  const dir = mkdtempSync(join(tmpdir(), 'tuner-preflight-'));
  dirs.push(dir);
  const lines = [
    'postgresql:',
    `  connection_url: ${connectionUrl}`,
    'tuner:',
    `  server_url: ${tuner.serverUrl ?? service.url}`,
    `  api_key: ${tuner.apiKey ?? apiKey}`,
    `  database_id: ${tuner.databaseId ?? databaseId}`,
  ];
  writeFileSync(join(dir, 'agent.yaml'), `${lines.join('\n')}\n`);
  return dir;
}

async function check(dir: string): Promise<AgentRun> {
  const run = await runAgent(['--local', '--check'], { cwd: dir });
  transcript.push(run.stdout, run.stderr);
  return run;
}

/** The agent URL with another host, port or password (percent-encoded as a URL must hold it). */
function urlWith(change: { host?: string; port?: number; password?: string }): string {
  const url = new URL(cluster.agentUrl);
  if (change.host) url.hostname = change.host;
  if (change.port) url.port = String(change.port);
  if (change.password) url.password = encodeURIComponent(change.password);
  return url.toString();
}

before(async () => {
  cluster = await startAgentCluster();
  lab = await startAdminService('pglite');
  ({ service, admin: person } = lab);
  ({ databaseId, apiKey } = await person.createDatabase('preflight', 'local'));
});

after(async () => {
  await lab?.close();
  await cluster?.destroy();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

test('everything in place: the service accepts the key and the database id, and no lease is taken', async () => {
  const run = await check(agentDir());
  assert.equal(run.code, 0, run.stdout + run.stderr);
  assert.match(run.stdout, new RegExp(`PASS {2}tuning service reachable at ${service.url}: answered protocol v1`));
  assert.match(run.stdout, new RegExp(`PASS {2}API key accepted for database ${databaseId}: the database is set up for --local`));
  const { body } = await person.get<{ database: { agent: unknown } }>(`/api/manage/databases/${databaseId}`);
  assert.equal(body.database.agent, null, 'the check took no lease');
});

test('a closed service port is a FAIL line of its own, with the fix', async () => {
  const closed = `http://127.0.0.1:${await freePort()}`;
  const run = await check(agentDir({ serverUrl: closed }));
  assert.equal(run.code, 3, run.stdout + run.stderr);
  assert.match(
    run.stdout,
    new RegExp(`FAIL {2}tuning service reachable at ${closed}: the tuning service at ${closed} cannot be reached: ECONNREFUSED`),
  );
  assert.match(run.stdout, /fix: check tuner\.server_url, and that this host may open outbound HTTPS to it/);
  assert.match(run.stdout, /PASS {2}agent_user is a member of pg_monitor/, 'the database is still checked');
});

test('a wrong API key is a FAIL line of its own, with the fix', async () => {
  const wrongKey = `${apiKey.slice(0, -6)}ffffff`;
  const run = await check(agentDir({ apiKey: wrongKey }));
  assert.equal(run.code, 3, run.stdout + run.stderr);
  assert.match(
    run.stdout,
    new RegExp(`FAIL {2}API key accepted for database ${databaseId}: the tuning service does not know this API key`),
  );
  assert.match(run.stdout, /fix: copy tuner\.api_key from the agent setup page/);
  assert.ok(!`${run.stdout}${run.stderr}`.includes(wrongKey), 'the key is never printed');
});

test('an unknown database id with a good key is a FAIL line of its own, with the fix', async () => {
  const unknown = crypto.randomUUID();
  const run = await check(agentDir({ databaseId: unknown }));
  assert.equal(run.code, 3, run.stdout + run.stderr);
  assert.match(
    run.stdout,
    new RegExp(`FAIL {2}database id ${unknown} belongs to the API key: the API key is live, but for another database`),
  );
  assert.match(run.stdout, /fix: copy tuner\.database_id from the agent setup page of the database the API key was created for/);
});

test('a database set up for another target is named, with the flag to use', async () => {
  const other = await person.createDatabase('preflight-flex', 'managed-b-flex');
  const run = await check(agentDir({ apiKey: other.apiKey, databaseId: other.databaseId }));
  assert.equal(run.code, 3, run.stdout + run.stderr);
  assert.match(
    run.stdout,
    /FAIL {2}database .* is set up for this target: it is set up for --managed-b-flex, and this agent runs with --local/,
  );
  assert.match(run.stdout, /fix: start the agent with --managed-b-flex/);
});

test('an unreachable database host: DNS and TCP each get their own FAIL line; the service is still asked', async () => {
  const unresolvable = await check(agentDir({}, urlWith({ host: 'no-such-host.invalid' })));
  assert.equal(unresolvable.code, 3, unresolvable.stdout + unresolvable.stderr);
  assert.match(
    unresolvable.stdout,
    /FAIL {2}database host no-such-host\.invalid resolves \(DNS\): the host name no-such-host\.invalid does not resolve/,
  );
  assert.match(unresolvable.stdout, /fix: check the host and port in postgresql\.connection_url/);
  assert.match(
    unresolvable.stdout,
    new RegExp(`PASS {2}API key accepted for database ${databaseId}`),
    'the other prerequisites still get their lines',
  );

  const port = await freePort();
  const refused = await check(agentDir({}, urlWith({ port })));
  assert.equal(refused.code, 3);
  assert.match(refused.stdout, /PASS {2}database host 127\.0\.0\.1 resolves \(DNS\): passed/);
  assert.match(
    refused.stdout,
    new RegExp(
      `FAIL {2}database port reachable at 127\\.0\\.0\\.1:${port} \\(TCP\\): nothing accepts connections at 127\\.0\\.0\\.1:${port}`,
    ),
  );
});

test('a refused password is the authentication step, and the password appears in no form', async () => {
  const run = await check(agentDir({}, urlWith({ password: WRONG_PASSWORD })));
  assert.equal(run.code, 3, run.stdout + run.stderr);
  assert.match(run.stdout, /PASS {2}database port reachable at 127\.0\.0\.1:\d+ \(TCP\): passed/);
  assert.match(run.stdout, /FAIL {2}authentication as agent_user: password authentication failed for agent_user/);
  assert.match(run.stdout, /fix: check the password of agent_user in postgresql\.connection_url/);
});

test('at start the agent runs the same checks, logs what fails, and the service shows it on the dashboard', async () => {
  // A role that may read the statistics but not change anything: the apply-rights check fails.
  await cluster.sql(`CREATE ROLE agent_readonly LOGIN PASSWORD '${AGENT_USER_PASSWORD_FOR_TESTS}' IN ROLE pg_monitor`);
  const readonlyUrl = new URL(cluster.agentUrl);
  readonlyUrl.username = 'agent_readonly';
  const { databaseId: id, apiKey: key } = await person.createDatabase('preflight-at-start', 'local');
  const dir = agentDir({ databaseId: id, apiKey: key }, readonlyUrl.toString());
  const agent = startAgent(['--local'], { cwd: dir });
  try {
    type Problem = { status: string; name: string; detail: string; fix?: string };
    const shown = await until(
      'the agent connected with its preflight',
      async () => {
        const { body } = await person.get<{ database: { agent: { preflight: Problem[] | null } | null } }>(`/api/manage/databases/${id}`);
        return body.database.agent?.preflight ?? undefined;
      },
      60_000,
    ).catch((err: unknown) => {
      throw new Error(`${(err as Error).message}; the agent printed:\n${agent.output()}`);
    });
    const rights = shown.find((p) => p.name.startsWith('apply rights'));
    assert.equal(rights?.status, 'fail', JSON.stringify(shown));
    assert.match(agent.output(), /preflight: FAIL apply rights/);
    const page = await person.get<string>(`/databases/${id}`);
    assert.equal(page.status, 200);
    assert.match(page.body, /<dt>Preflight<\/dt><dd><ul class="preflight"><li><span class="badge bad">FAIL<\/span> apply rights/);
  } finally {
    agent.child.kill('SIGTERM');
    transcript.push(agent.output());
    assert.equal(await agent.exited, 0, agent.output());
  }
});

test('nothing --check printed in this file holds a secret, in any form it was typed', () => {
  const all = transcript.join('\n');
  assert.ok(all.length > 0);
  const forms = [
    apiKey,
    WRONG_PASSWORD,
    encodeURIComponent(WRONG_PASSWORD),
    AGENT_USER_PASSWORD_FOR_TESTS,
    encodeURIComponent(AGENT_USER_PASSWORD_FOR_TESTS),
  ];
  for (const secret of forms) assert.ok(!all.includes(secret), `a secret leaked: ${secret.slice(0, 3)}…`);
});

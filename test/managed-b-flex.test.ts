// The real tuner-agent process against a fake Cloud B (test/fakes/azure: Resource Manager,
// long-running operations, Azure Monitor, managed identity and service principal tokens, over
// loopback HTTPS) whose server parameters land on a real throwaway PostgreSQL cluster. That
// cluster accepts TLS only, as Cloud B's does; the agent connects with its default for the
// target (verify-full against Node's store), which trusts the fake's CA through NODE_EXTRA_CA_CERTS.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { getCACertificates, setDefaultCACertificates } from 'node:tls';
import { after, before, beforeEach, test } from 'node:test';
import { loadConfig } from '../src/agent/config/load.ts';
import { connectDb, type Db } from '../src/agent/database/db.ts';
import { createLogger } from '../src/agent/base/log.ts';
import { machineOfServer } from '../src/agent/targets/managed-b-flex/machine.ts';
import { estimateComputeSize, knownComputeSize } from '../src/agent/targets/managed-b-flex/skus.ts';
import { createManagedBFlexTarget } from '../src/agent/targets/managed-b-flex/target.ts';
import { createIdentity } from '../src/agent/targets/managed-b-flex/identity.ts';
import { azureTunesReason, intelligentTuningOf } from '../src/agent/targets/managed-b-flex/intelligent-tuning.ts';
import { catalogSettings } from '../src/agent/sending/system.ts';
import { applyChange } from '../src/agent/applying/apply.ts';
import { Journal } from '../src/agent/applying/journal.ts';
import { randomSuggest } from '../src/optimizer/index.ts';
import { buildSpace, sessionSpaceInput } from '../src/service/tuning/space.ts';
import { agentConnectionContext } from '../src/agent/process/db-tls.ts';
import type { Target } from '../src/target/target.ts';
import { GiB } from '../src/knobs/units.ts';
import { AGENT_USER_PASSWORD_FOR_TESTS, startCluster, type Cluster } from '../src/lab/cluster.ts';
import { makeTestCa, type TestCa } from '../src/lab/tls.ts';
import { SettingSchema, TargetMetricSchema } from '../src/protocol/v1.ts';
import { startFakeAzure, type FakeAzure, type RecordedRequest } from './fakes/azure/index.ts';
import { runAgent, type AgentRun } from './helpers/agent-process.ts';

const ROLE_ACTIONS = [
  'Microsoft.DBforPostgreSQL/flexibleServers/restart/action',
  'Microsoft.DBforPostgreSQL/flexibleServers/read',
  'Microsoft.DBforPostgreSQL/flexibleServers/providers/Microsoft.Insights/metricDefinitions/read',
  'Microsoft.DBforPostgreSQL/flexibleServers/configurations/read',
  'Microsoft.DBforPostgreSQL/flexibleServers/configurations/write',
  'Microsoft.Insights/metrics/read',
  'Microsoft.Insights/metricDefinitions/read',
];
const MONITOR_METRICS = [
  'cpu_percent',
  'memory_percent',
  'read_iops',
  'write_iops',
  'disk_queue_depth',
  'active_connections',
  'storage_percent',
];

let cluster: Cluster;
let azure: FakeAzure;
const dirs: string[] = [];
/** Everything any agent printed in this file, to look for secrets at the end. */
const transcript: string[] = [];

type Identity = 'imds' | 'app-service' | 'service-principal';

function agentDir(options: { allowRestart?: boolean; managedIdentityClientId?: string; resourceGroup?: string } = {}): string {
  const dir = mkdtempSync(join(tmpdir(), 'tuner-agent-b-'));
  dirs.push(dir);
  const lines = [
    'postgresql:',
    `  connection_url: ${cluster.agentUrl}`,
    `  allow_restart: ${options.allowRestart ?? false}`,
    'managed_b_flex:',
    `  subscription_id: ${azure.subscriptionId}`,
    `  resource_group_name: ${options.resourceGroup ?? azure.resourceGroup}`,
    `  server_name: ${azure.serverName}`,
    `  resource_manager_endpoint: ${azure.url}`,
    ...(options.managedIdentityClientId ? [`  managed_identity_client_id: ${options.managedIdentityClientId}`] : []),
    'tuner:',
    '  debug: true',
  ];
  writeFileSync(join(dir, 'agent.yaml'), `${lines.join('\n')}\n`);
  return dir;
}

/** The SDK's own variables point it at the fake; the fake's certificate is trusted. */
function identityEnv(identity: Identity, secret = azure.servicePrincipal.clientSecret): NodeJS.ProcessEnv {
  const base = { NODE_EXTRA_CA_CERTS: azure.certFile, NO_PROXY: '127.0.0.1,localhost' };
  switch (identity) {
    case 'imds':
      return { ...base, AZURE_POD_IDENTITY_AUTHORITY_HOST: azure.url };
    case 'app-service':
      return { ...base, IDENTITY_ENDPOINT: `${azure.url}/msi/token`, IDENTITY_HEADER: azure.identityHeader };
    case 'service-principal':
      return {
        ...base,
        AZURE_AUTHORITY_HOST: azure.url,
        CLOUDB_CLIENT_ID: azure.servicePrincipal.clientId,
        CLOUDB_CLIENT_SECRET: secret,
        CLOUDB_TENANT_ID: azure.servicePrincipal.tenantId,
      };
  }
}

async function agent(
  dir: string,
  args: string[],
  identity: Identity = 'imds',
  env: NodeJS.ProcessEnv = identityEnv(identity),
): Promise<AgentRun> {
  const result = await runAgent(['--managed-b-flex', ...args], { cwd: dir, env });
  transcript.push(result.stdout, result.stderr);
  return result;
}

async function setting(name: string): Promise<string> {
  const [row] = await cluster.sql<{ setting: string }>('SELECT setting FROM pg_settings WHERE name = $1', [name]);
  return row!.setting;
}

const armCalls = () => azure.requests.filter((r) => r.path.startsWith('/subscriptions/'));
const writesTo = (name: string) => azure.requests.filter((r) => r.method === 'PATCH' && r.path.endsWith(`/configurations/${name}`));
const show = (requests: RecordedRequest[]) => requests.map((r) => `${r.method} ${r.path} ${r.status}`).join('\n');

let ca: TestCa;

before(async () => {
  ca = makeTestCa('fake Cloud B root CA');
  cluster = await startCluster({ tls: { ca } });
  azure = await startFakeAzure({ cluster, fqdn: '127.0.0.1' });
});

beforeEach(async () => {
  await azure.reset();
});

after(async () => {
  await azure?.close();
  await cluster?.destroy();
  ca?.remove();
  for (const d of dirs) rmSync(d, { recursive: true, force: true });
});

test('permissions --managed-b-flex: the custom role alone on stdout, JSON that parses; the setup steps as # lines on stderr', async () => {
  const empty = mkdtempSync(join(tmpdir(), 'tuner-agent-b-'));
  dirs.push(empty);
  for (const [dir, scope] of [
    [empty, '/subscriptions/<subscription_id>/resourceGroups/<resource_group_name>'],
    [agentDir(), `/subscriptions/${azure.subscriptionId}/resourceGroups/${azure.resourceGroup}`],
  ] as const) {
    const run = await runAgent(['permissions', '--managed-b-flex'], { cwd: dir });
    assert.equal(run.code, 0, run.stderr);
    const role = JSON.parse(run.stdout) as {
      Name: string;
      Description: string;
      Actions: string[];
      AssignableScopes: string[];
    };
    assert.deepEqual(role.Actions, ROLE_ACTIONS);
    assert.deepEqual(role.AssignableScopes, [scope]);
    assert.ok(role.Name && role.Description);
    assert.ok(
      run.stderr.split('\n').every((l) => l === '' || l.startsWith('#')),
      'on stderr, only # lines',
    );
    const steps = run.stderr;
    assert.match(steps, /az role definition create --role-definition @/);
    assert.match(steps, new RegExp(`az role assignment create .*--scope ${scope.replace(/[<>]/g, '.')}`));
    assert.match(steps, /az ad sp create-for-rbac .*--role/);
    assert.match(steps, /appId as CLOUDB_CLIENT_ID, password as CLOUDB_CLIENT_SECRET,\n#\s+tenant as CLOUDB_TENANT_ID/);
  }
});

test('restart mode is refused at start, before any call to Cloud B', async () => {
  const run = await agent(agentDir({ allowRestart: true }), ['--check']);
  assert.notEqual(run.code, 0);
  assert.match(run.stderr, /postgresql\.allow_restart is true, but restart mode is not supported on Cloud B/);
  assert.match(run.stderr, /set postgresql\.allow_restart: false/);
  assert.equal(azure.requests.length, 0, show(azure.requests));
});

test("--check passes with the VM's managed identity (IMDS form), every Resource Manager call carrying its token", async () => {
  const run = await agent(agentDir(), ['--check']);
  assert.equal(run.code, 0, run.stdout + run.stderr);
  assert.match(
    run.stdout,
    /PASS {2}connection encryption: encrypted \(TLSv1\.[23]\), sslmode=verify-full \(the default for --managed-b-flex\); the server's certificate was verified against Node's trust store and NODE_EXTRA_CA_CERTS, and it names 127\.0\.0\.1/,
  );
  assert.match(run.stdout, /PASS {2}Cloud B token for the managed identity of this host/);
  assert.match(
    run.stdout,
    /PASS {2}flexible server readable \(Microsoft\.DBforPostgreSQL\/flexibleServers\/read\): tuner-flex-1: SKU Standard_D4ds_v5 \(GeneralPurpose\)/,
  );
  assert.match(run.stdout, /PASS {2}machine size: 16 GiB RAM and 4 vCPUs/);
  assert.match(run.stdout, /PASS {2}extension allow-list \(server parameter azure\.extensions\) contains pg_stat_statements/);
  assert.match(run.stdout, /PASS {2}server parameter pg_stat_statements\.track is ALL or TOP: pg_stat_statements\.track = all/);
  assert.match(run.stdout, /PASS {2}tuned parameters are changeable without a restart: all 13/);
  assert.match(run.stdout, /PASS {2}Azure Monitor metrics readable/);

  const imds = azure.requests.filter((r) => r.path.startsWith('/metadata/identity/oauth2/token'));
  assert.ok(imds.length >= 1 && imds.every((r) => r.status === 200), show(azure.requests));
  assert.equal(imds[0]!.query['resource'], azure.url, 'the token is for the configured Resource Manager endpoint');
  const arm = armCalls();
  assert.ok(arm.length >= 3);
  assert.ok(
    arm.every((r) => r.caller === 'managed identity (IMDS)' && r.status === 200),
    show(arm),
  );
  const flex = arm.filter((r) => !r.path.includes('/Microsoft.Insights/'));
  assert.ok(
    flex.every((r) => r.query['api-version'] === '2025-08-01'),
    'a pinned GA api-version',
  );
  const [metrics] = arm.filter((r) => r.path.endsWith('/providers/Microsoft.Insights/metrics'));
  assert.equal(metrics?.query['interval'], 'PT1M');
  assert.deepEqual(metrics?.query['metricnames']?.split(','), MONITOR_METRICS);
  assert.match(metrics?.query['timespan'] ?? '', /^\d{4}-\d\d-\d\dT[\d:.]+Z\/\d{4}-\d\d-\d\dT[\d:.]+Z$/);
});

test("--check with the service principal from CLOUDB_*: the tenant's OpenID configuration, then a client-credentials token", async () => {
  const run = await agent(agentDir(), ['--check'], 'service-principal');
  assert.equal(run.code, 0, run.stdout + run.stderr);
  const { tenantId, clientId } = azure.servicePrincipal;
  assert.match(run.stdout, new RegExp(`PASS {2}Cloud B token for the service principal ${clientId}`));
  const tokenSide = azure.requests.filter((r) => !r.path.startsWith('/subscriptions/'));
  assert.equal(tokenSide[0]?.path, `/${tenantId}/v2.0/.well-known/openid-configuration`, 'MSAL reads the OpenID configuration first');
  assert.ok(!tokenSide.some((r) => r.path.includes('/discovery/instance')), 'no authority validation against the public cloud');
  const grants = tokenSide.filter((r) => r.method === 'POST' && r.path === `/${tenantId}/oauth2/v2.0/token`);
  assert.ok(grants.length >= 1 && grants.every((r) => r.status === 200), show(tokenSide));
  const form = new URLSearchParams(grants[0]!.body);
  assert.equal(form.get('grant_type'), 'client_credentials');
  assert.equal(form.get('client_id'), clientId);
  assert.equal(form.get('scope'), `${azure.url}/.default`);
  assert.ok(
    armCalls().every((r) => r.caller === `service principal ${clientId}`),
    show(armCalls()),
  );

  const wrong = await agent(agentDir(), ['--check'], 'service-principal', identityEnv('service-principal', 'not-the-Secret-4411'));
  assert.equal(wrong.code, 3);
  assert.match(wrong.stdout, /FAIL {2}Cloud B token for the service principal .*AADSTS7000215: Invalid client secret provided/);
  assert.match(wrong.stdout, /fix: check CLOUDB_CLIENT_ID, CLOUDB_CLIENT_SECRET and CLOUDB_TENANT_ID/);
  assert.ok(!`${wrong.stdout}${wrong.stderr}`.includes('not-the-Secret-4411'));
});

test('--check with the App Service form of managed identity (IDENTITY_ENDPOINT, IDENTITY_HEADER)', async () => {
  const run = await agent(agentDir(), ['--check'], 'app-service');
  assert.equal(run.code, 0, run.stdout + run.stderr);
  assert.ok(
    azure.requests.some((r) => r.path === '/msi/token' && r.status === 200 && r.query['api-version'] === '2019-08-01'),
    show(azure.requests),
  );
  assert.ok(
    armCalls().every((r) => r.caller === 'managed identity (App Service)'),
    show(armCalls()),
  );
});

test('--check with a user-assigned managed identity chosen by client id (IMDS with client_id); one not on the VM fails with its fix', async () => {
  const [clientId] = azure.userAssignedClientIds;
  const run = await agent(agentDir({ managedIdentityClientId: clientId! }), ['--check']);
  assert.equal(run.code, 0, run.stdout + run.stderr);
  assert.match(run.stdout, new RegExp(`PASS {2}Cloud B token for the user-assigned managed identity ${clientId}`));
  const imds = azure.requests.filter((r) => r.path.startsWith('/metadata/identity/oauth2/token'));
  assert.ok(imds.length >= 1 && imds.every((r) => r.query['client_id'] === clientId && r.status === 200), show(imds));
  assert.ok(
    armCalls().every((r) => r.caller === `managed identity (IMDS) user-assigned ${clientId}`),
    show(armCalls()),
  );

  const stranger = '00000000-1111-4222-8333-444444444444';
  const wrong = await agent(agentDir({ managedIdentityClientId: stranger }), ['--check']);
  assert.equal(wrong.code, 3, wrong.stdout + wrong.stderr);
  assert.match(wrong.stdout, new RegExp(`FAIL {2}Cloud B token for the user-assigned managed identity ${stranger}`));
  assert.match(wrong.stdout, new RegExp(`fix: check that the user-assigned identity with client id ${stranger} is assigned to this VM`));
});

test("--check with workload identity on AKS: the federated token file exchanged for the identity's token", async () => {
  const { clientId, tenantId, federatedToken } = azure.workloadIdentity;
  const dir = agentDir();
  const tokenFile = join(dir, 'azure-identity-token');
  writeFileSync(tokenFile, federatedToken);
  const env = {
    ...identityEnv('imds'),
    AZURE_AUTHORITY_HOST: azure.url,
    AZURE_FEDERATED_TOKEN_FILE: tokenFile,
    AZURE_CLIENT_ID: clientId,
    AZURE_TENANT_ID: tenantId,
  };
  const run = await agent(dir, ['--check'], 'imds', env);
  assert.equal(run.code, 0, run.stdout + run.stderr);
  assert.match(run.stdout, new RegExp(`PASS {2}Cloud B token for the workload identity ${clientId}`));
  const grants = azure.requests.filter((r) => r.method === 'POST' && r.path === `/${tenantId}/oauth2/v2.0/token`);
  assert.ok(grants.length >= 1 && grants.every((r) => r.status === 200), show(azure.requests));
  assert.equal(new URLSearchParams(grants[0]!.body).get('client_assertion'), federatedToken);
  assert.ok(!azure.requests.some((r) => r.path.startsWith('/metadata/identity')), "workload identity wins over the node's IMDS");
  assert.ok(
    armCalls().every((r) => r.caller === `workload identity ${clientId}`),
    show(armCalls()),
  );

  // A token file the identity is not federated with is refused by the token endpoint.
  writeFileSync(tokenFile, 'eyJ.not-federated.x');
  const refused = await agent(dir, ['--check'], 'imds', env);
  assert.equal(refused.code, 3);
  assert.match(refused.stdout, /FAIL {2}Cloud B token for the workload identity .*AADSTS70021/);
  assert.match(refused.stdout, /fix: check that the user-assigned identity .* has a federated credential for this pod's service account/);
});

test('which Cloud B identity is used when several are present: service principal, workload identity, user-assigned, system-assigned', () => {
  const sp = { clientId: 'sp-id', clientSecret: 'sp-secret-9431', tenantId: 'tenant-1' };
  const workload = {
    AZURE_FEDERATED_TOKEN_FILE: '/var/run/secrets/azure/tokens/azure-identity-token',
    AZURE_CLIENT_ID: 'wi-id',
    AZURE_TENANT_ID: 'tenant-1',
  };
  const chosen = (config: Parameters<typeof createIdentity>[0], env: NodeJS.ProcessEnv = {}) => createIdentity(config, env).description;
  assert.equal(chosen({ ...sp, managedIdentityClientId: 'ua-id' }, workload), 'service principal sp-id (tenant tenant-1)');
  assert.equal(
    chosen({ managedIdentityClientId: 'ua-id' }, workload),
    'workload identity ua-id (tenant tenant-1)',
    'the configured client id names the federated identity',
  );
  assert.equal(chosen({}, workload), 'workload identity wi-id (tenant tenant-1)');
  assert.equal(chosen({ managedIdentityClientId: 'ua-id' }), 'user-assigned managed identity ua-id');
  assert.equal(chosen({}), 'managed identity of this host');
  assert.throws(
    () => chosen({}, { AZURE_FEDERATED_TOKEN_FILE: '/t', AZURE_CLIENT_ID: 'wi-id' }),
    /AZURE_FEDERATED_TOKEN_FILE is set .* but AZURE_TENANT_ID is/,
  );
  assert.throws(
    () => chosen({ clientId: 'sp-id' }),
    /a service principal needs all of CLOUDB_CLIENT_ID, CLOUDB_CLIENT_SECRET and CLOUDB_TENANT_ID/,
  );
});

test('--check reports pg_stat_statements missing from the extension allow-list, with the az command that adds it', async () => {
  azure.server.setExtensions('pgcrypto,hstore');
  const run = await agent(agentDir(), ['--check']);
  assert.equal(run.code, 3, run.stdout);
  assert.match(
    run.stdout,
    /FAIL {2}extension allow-list \(server parameter azure\.extensions\) contains pg_stat_statements: azure\.extensions = pgcrypto,hstore\n/,
  );
  assert.match(
    run.stdout,
    /fix: az postgres flexible-server parameter set --resource-group tuner-rg --server-name tuner-flex-1 --name azure\.extensions --value pgcrypto,hstore,pg_stat_statements, then as the admin user: CREATE EXTENSION IF NOT EXISTS pg_stat_statements;/,
  );
  assert.match(run.stdout, /preflight: 1 of \d+ checks failed/);
});

test('--check fails on pg_stat_statements.track other than ALL or TOP, with the az command that sets it', async () => {
  await azure.server.set('pg_stat_statements.track', 'none');
  const run = await agent(agentDir(), ['--check']);
  assert.equal(run.code, 3, run.stdout);
  assert.match(run.stdout, /FAIL {2}server parameter pg_stat_statements\.track is ALL or TOP: pg_stat_statements\.track = none\n/);
  assert.match(
    run.stdout,
    /fix: az postgres flexible-server parameter set --resource-group tuner-rg --server-name tuner-flex-1 --name pg_stat_statements\.track --value top\n/,
  );
  await azure.server.set('pg_stat_statements.track', 'TOP');
  const top = await agent(agentDir(), ['--check']);
  assert.match(top.stdout, /PASS {2}server parameter pg_stat_statements\.track is ALL or TOP: pg_stat_statements\.track = top\n/);
});

test('a role without an action: --check names it, and a refused write changes nothing', async () => {
  azure.deny('Microsoft.DBforPostgreSQL/flexibleServers/configurations/read');
  const check = await agent(agentDir(), ['--check']);
  assert.equal(check.code, 3);
  assert.match(
    check.stdout,
    /FAIL {2}server parameters readable .*: reading the server parameters of the flexible server tuner-flex-1 .*: the managed identity of this host is not allowed Microsoft\.DBforPostgreSQL\/flexibleServers\/configurations\/read \(AuthorizationFailed\)/,
  );
  assert.match(check.stdout, /fix: add Microsoft\.DBforPostgreSQL\/flexibleServers\/configurations\/read to the custom role/);

  azure.allowAll();
  azure.deny('Microsoft.DBforPostgreSQL/flexibleServers/configurations/write');
  const workMem = await setting('work_mem');
  const apply = await agent(agentDir(), ['--apply', 'work_mem=8MB']);
  assert.equal(apply.code, 1, apply.stdout + apply.stderr);
  assert.match(apply.stderr, /not allowed Microsoft\.DBforPostgreSQL\/flexibleServers\/configurations\/write \(AuthorizationFailed\)/);
  assert.equal(await setting('work_mem'), workMem);
  assert.equal((await azure.server.parameter('work_mem')).source, 'system-default');
});

test('--apply reaches pg_settings through long-running operations, and --revert puts every value back', async () => {
  const dir = agentDir();
  const before = {
    work_mem: await setting('work_mem'),
    random_page_cost: await setting('random_page_cost'),
    bgwriter_delay: await setting('bgwriter_delay'),
  };
  const applied = await agent(dir, ['--apply', 'work_mem=8MB', '--apply', 'random_page_cost=1.1', '--apply', 'bgwriter_delay=50ms']);
  assert.equal(applied.code, 0, applied.stderr);
  assert.match(applied.stdout, /applied and read back from pg_settings: work_mem = 8192, random_page_cost = 1\.1, bgwriter_delay = 50/);
  assert.equal(await setting('work_mem'), '8192');
  assert.equal(await setting('random_page_cost'), '1.1');
  assert.equal(await setting('bgwriter_delay'), '50');
  assert.deepEqual(await azure.server.parameter('work_mem'), { value: '8192', source: 'user-override', pending: false });

  // One write at a time, each a long-running operation: PATCH → 202, poll the
  // Azure-AsyncOperation until Succeeded, then read the configuration.
  const sequence = armCalls().filter(
    (r) => r.method === 'PATCH' || r.path.includes('/azureAsyncOperation/') || /\/configurations\/\w+$/.test(r.path),
  );
  const names = ['work_mem', 'random_page_cost', 'bgwriter_delay'];
  for (const name of names) {
    const at = sequence.findIndex((r) => r.method === 'PATCH' && r.path.endsWith(`/${name}`));
    assert.ok(at >= 0, `${name} was written`);
    assert.equal(sequence[at]!.status, 202);
    assert.deepEqual(JSON.parse(sequence[at]!.body!), {
      properties: { value: { work_mem: '8192', random_page_cost: '1.1', bgwriter_delay: '50' }[name], source: 'user-override' },
    });
    assert.ok(sequence[at + 1]!.path.includes('/azureAsyncOperation/'), show(sequence));
    const done = sequence.slice(at + 1).find((r) => r.method === 'GET' && r.path.endsWith(`/configurations/${name}`));
    assert.ok(done, `the final GET of ${name}`);
  }

  const reverted = await agent(dir, ['--revert']);
  assert.equal(reverted.code, 0, reverted.stderr);
  assert.match(reverted.stdout, /reverted and read back from pg_settings/);
  for (const [name, value] of Object.entries(before)) {
    assert.equal(await setting(name), value, name);
    assert.equal((await azure.server.parameter(name)).source, 'system-default', `${name} is back at the server's default`);
  }
  // Back to the default = the default value written (what the Azure CLI does for a reset).
  const reset = writesTo('work_mem').at(-1)!;
  assert.deepEqual(JSON.parse(reset.body!), { properties: { value: before.work_mem, source: 'user-override' } });
});

test('a busy server is waited out: 409 ServerIsBusy and a ServerBusy operation failure are both retried', async () => {
  azure.busy('conflict', 'operation-failed');
  const run = await agent(agentDir(), ['--apply', 'work_mem=16MB']);
  assert.equal(run.code, 0, run.stderr);
  assert.match(run.stderr, /the server is busy \(409 ServerIsBusy\); trying again in 1\.0 s \(attempt 2 of 8\)/);
  assert.match(run.stderr, /the server is busy \(ServerBusy\); trying again in 2\.0 s \(attempt 3 of 8\)/);
  assert.deepEqual(
    writesTo('work_mem').map((r) => r.status),
    [409, 202, 202],
  );
  assert.equal(await setting('work_mem'), '16384');
});

// The value reaches the server only when its operation completes (the fake applies it then):
// an agent that read pg_settings back before would find the old value and fail.
test('--apply reads back only after the operation completed', async () => {
  const run = await agent(agentDir(), ['--apply', 'work_mem=12MB']);
  assert.equal(run.code, 0, run.stderr);
  assert.match(run.stdout, /applied and read back from pg_settings: work_mem = 12288/);
  const op = azure.operations.find((o) => o.kind === 'configuration' && o.target === 'work_mem')!;
  const ended = Date.parse(op.endTime!);
  const polls = armCalls().filter((r) => r.path.includes(`/azureAsyncOperation/${op.id}`));
  assert.ok(
    polls.some((r) => r.at < ended),
    'the agent polled while the operation ran',
  );
  const finalRead = armCalls().find((r) => r.method === 'GET' && r.path.endsWith('/configurations/work_mem') && r.at >= ended);
  assert.ok(finalRead, `the configuration was read once the operation was over\n${show(armCalls())}`);
  assert.equal(await setting('work_mem'), '12288');
});

// Someone restarts the server from the portal just as the agent writes: the write meets 409
// ServerIsBusy while the restart runs (PostgreSQL down meanwhile, the agent's session lost), and
// the agent gets through once it is over, within its retry budget.
test('a restart from the portal as the agent writes: busy answers retried until it is over, then applied', async () => {
  azure.restartBeforeNextWrite();
  const run = await agent(agentDir(), ['--apply', 'work_mem=20MB']);
  assert.equal(run.code, 0, run.stdout + run.stderr);
  assert.match(run.stderr, /the server is busy \(409 ServerIsBusy\); trying again in 1\.0 s \(attempt 2 of 8\)/);
  assert.match(run.stdout, /applied and read back from pg_settings: work_mem = 20480/);
  const statuses = writesTo('work_mem').map((r) => r.status);
  assert.deepEqual([statuses[0], statuses.at(-1)], [409, 202], statuses.join(' '));
  const [restart, write] = azure.operations;
  assert.deepEqual(
    [restart?.kind, restart?.outcome?.status, write?.kind, write?.outcome?.status],
    ['restart', 'Succeeded', 'configuration', 'Succeeded'],
  );
  assert.ok(Date.parse(write!.startTime) >= Date.parse(restart!.endTime!), 'the write went through after the restart');
  assert.equal(await setting('work_mem'), '20480');
});

test('a parameter that already waits for a restart is refused, nothing written', async () => {
  azure.server.needRestartFor('bgwriter_delay');
  const before = await setting('bgwriter_delay');
  assert.deepEqual(await azure.server.write('bgwriter_delay', '120', 'user-override'), { ok: true });
  assert.equal((await azure.server.parameter('bgwriter_delay')).pending, true);
  const run = await agent(agentDir(), ['--apply', 'bgwriter_delay=120ms']);
  assert.notEqual(run.code, 0, run.stdout + run.stderr);
  assert.match(
    run.stderr,
    /bgwriter_delay already waits for a server restart on this server \(isConfigPendingRestart: 120 is configured, not running\), and Cloud B is tuned reload-only/,
  );
  assert.deepEqual(writesTo('bgwriter_delay'), [], show(azure.requests));
  assert.equal(await setting('bgwriter_delay'), before);
});

test('a parameter that turns out to wait for a restart: the whole change is undone and reported', async () => {
  azure.server.needRestartFor('bgwriter_delay');
  const before = { work_mem: await setting('work_mem'), bgwriter_delay: await setting('bgwriter_delay') };
  const run = await agent(agentDir(), ['--apply', 'work_mem=12MB', '--apply', 'bgwriter_delay=120ms']);
  assert.equal(run.code, 1, run.stdout + run.stderr);
  assert.match(run.stderr, /Cloud B reports bgwriter_delay as waiting for a server restart/);
  assert.match(
    run.stderr,
    /bgwriter_delay would take effect only after a server restart on this server \(isConfigPendingRestart\), and Cloud B is tuned reload-only, without restarts: the change was undone \(work_mem, bgwriter_delay were put back\)/,
  );
  assert.equal(await setting('work_mem'), before.work_mem);
  assert.equal(await setting('bgwriter_delay'), before.bgwriter_delay);
  assert.deepEqual(await azure.server.parameter('bgwriter_delay'), {
    value: before.bgwriter_delay,
    source: 'system-default',
    pending: false,
  });
  assert.equal((await azure.server.parameter('work_mem')).source, 'system-default');
  assert.ok(!azure.requests.some((r) => r.path.endsWith('/restart')), 'the agent never restarts Cloud B');
});

test('a write carried out but reported as failed: the agent reads the server back and puts it back', async () => {
  const before = await setting('work_mem');
  azure.failNextWriteAfterApplying();
  const run = await agent(agentDir(), ['--apply', 'work_mem=12MB']);
  assert.equal(run.code, 1, run.stdout + run.stderr);
  assert.match(run.stderr, /InternalServerError.*; work_mem was put back/);
  assert.equal(await setting('work_mem'), before);
  assert.equal((await azure.server.parameter('work_mem')).source, 'system-default');
});

test('an unknown SKU: a warning, vCPUs from its name and memory on the small side, and changes still work', async () => {
  azure.server.sku = { name: 'Standard_D6zz_v9', tier: 'GeneralPurpose' };
  const dir = agentDir();
  const check = await agent(dir, ['--check']);
  assert.equal(check.code, 0, check.stdout);
  assert.match(
    check.stdout,
    /WARN {2}machine size: 24 GiB RAM and 6 vCPUs: SKU Standard_D6zz_v9 is not in tuner-agent's table of Cloud B compute sizes: the agent assumes 6 vCPUs and 24 GiB/,
  );
  const run = await agent(dir, ['--apply', 'work_mem=4MB']);
  assert.equal(run.code, 0, run.stderr);
  assert.match(
    run.stderr,
    /warn {2}SKU Standard_D6zz_v9 is not in tuner-agent's table of Cloud B compute sizes: the agent assumes 6 vCPUs and 24 GiB, on the small side/,
  );
  assert.equal(await setting('work_mem'), '4096');
});

test("a value Cloud B's own allowedValues refuse: a clear refusal naming them, nothing written (issue 13)", async () => {
  azure.server.narrowAllowedValues('work_mem', '64-65536');
  const run = await agent(agentDir(), ['--apply', 'random_page_cost=2', '--apply', 'work_mem=128MB']);
  assert.notEqual(run.code, 0, run.stderr);
  assert.match(
    run.stderr,
    /work_mem = 131072 is not a value Cloud B allows for it on this server \(expected a number from 64 to 65536; allowed values: 64-65536\)/,
  );
  assert.match(run.stderr, /nothing was written/);
  assert.deepEqual([...writesTo('work_mem'), ...writesTo('random_page_cost')], [], show(azure.requests));
  assert.equal(await setting('random_page_cost'), '4');
});

test('a read-only server parameter: --check fails on it and --apply refuses it, nothing written (issue 13)', async () => {
  azure.server.makeReadOnly('work_mem');
  const dir = agentDir();
  const check = await agent(dir, ['--check']);
  assert.notEqual(check.code, 0, check.stdout);
  assert.match(check.stdout, /work_mem read-only/);
  const run = await agent(dir, ['--apply', 'work_mem=4MB']);
  assert.equal(run.code, 4, `refused by the agent before anything is written: ${run.stderr}`);
  assert.match(run.stderr, /work_mem cannot be changed here: read-only on the /);
  assert.deepEqual(writesTo('work_mem'), []);
  assert.equal((await azure.server.parameter('work_mem')).source, 'system-default');
});

/** The Cloud B target in this process, against the fake, with its log lines; closed after `run`. */
async function inProcess(run: (target: Target, db: Db, lines: string[]) => Promise<void>): Promise<string[]> {
  // This process trusts the fake's certificate as the agent process does through NODE_EXTRA_CA_CERTS.
  setDefaultCACertificates([...getCACertificates('default'), readFileSync(azure.certFile, 'utf8')]);
  const saved = process.env['AZURE_POD_IDENTITY_AUTHORITY_HOST'];
  process.env['AZURE_POD_IDENTITY_AUTHORITY_HOST'] = azure.url;
  const { config } = loadConfig({ cwd: agentDir(), env: {}, target: 'managed-b-flex', needsService: false });
  const db = await connectDb(cluster.agentUrl, { connection: await agentConnectionContext('managed-b-flex') });
  const lines: string[] = [];
  const target = await createManagedBFlexTarget({ db, config, log: createLogger({ debug: true, write: (l) => lines.push(l) }) });
  try {
    await run(target, db, lines);
  } finally {
    await target.close();
    await db.close();
    if (saved === undefined) delete process.env['AZURE_POD_IDENTITY_AUTHORITY_HOST'];
    else process.env['AZURE_POD_IDENTITY_AUTHORITY_HOST'] = saved;
  }
  return lines;
}

test('in process: machine, overrides and Azure Monitor metrics at the 1-minute grain, canonical names included', async () => {
  const lines = await inProcess(async (target, db) => {
    const { machine } = await target.machine();
    assert.deepEqual(machine, { vcpus: 4, memoryBytes: 16 * GiB, storage: 'ssd', storageBytes: 128 * GiB });
    assert.deepEqual(await target.readOverrides(['work_mem']), { work_mem: { set: false } });
    assert.equal(await target.applyBlockedReason(), null);

    // A read-only parameter is reported as such, and the session's search space leaves it out:
    // the service never proposes it (issue 13).
    azure.server.makeReadOnly('work_mem');
    const settings = await catalogSettings(db, target);
    assert.match(
      settings.find((s) => s.name === 'work_mem')?.unwritable ?? '',
      /^read-only on the flexible server tuner-flex-1 \(resource group /,
    );
    assert.equal(settings.find((s) => s.name === 'random_page_cost')?.unwritable, undefined);
    const space = buildSpace(sessionSpaceInput({ target: 'managed-b-flex', mode: 'reload-only', machine, settings, maxConnections: 100 }));
    assert.ok(!space.dimensions.some((d) => d.name === 'work_mem'));
    assert.match(space.excluded.find((e) => e.name === 'work_mem')?.reason ?? '', /^read-only on the flexible server tuner-flex-1/);

    azure.metricFigures = { ...azure.metricFigures, cpu_percent: 37.5, memory_percent: 25 };
    const metrics = await target.metrics();
    for (const m of metrics) TargetMetricSchema.parse(m);
    const byName = new Map(metrics.map((m) => [m.name, m]));
    for (const name of MONITOR_METRICS)
      assert.ok(byName.has(`azure-monitor:${name}`), `azure-monitor:${name} in ${[...byName.keys()].join(', ')}`);
    assert.equal(byName.get('cpu_percent')?.value, 37.5);
    assert.equal(byName.get('azure-monitor:memory_percent')?.unit, 'percent');
    assert.equal(byName.get('memory_total_bytes')?.value, 16 * GiB);
    assert.equal(byName.get('memory_available_bytes')?.value, 12 * GiB);
    // The newest minute is not published yet: the value is the minute before.
    const at = Date.parse(byName.get('cpu_percent')!.at);
    assert.ok(Date.now() - at >= 60_000 && Date.now() - at < 180_000, byName.get('cpu_percent')!.at);
  });
  assert.ok(!lines.some((l) => l.includes(AGENT_USER_PASSWORD_FOR_TESTS)));
});

test('in process: a restart in progress is waited out before a change, PostgreSQL back included', async () => {
  await inProcess(async (target, db, lines) => {
    const restarted = azure.restart();
    assert.equal(await target.applyBlockedReason(), null);
    const restart = azure.operations.find((o) => o.kind === 'restart');
    assert.equal(restart?.outcome?.status, 'Succeeded', 'the restart was over before the agent went on');
    assert.ok(
      lines.some((l) => /the flexible server tuner-flex-1 is Restarting: waiting for it to be Ready before changing anything/.test(l)),
      lines.join('\n'),
    );
    assert.equal((await db.query<{ one: number }>('SELECT 1 AS one'))[0]?.one, 1, "the agent's session works again");
    await restarted;
  });
});

// The specification's custom role, exactly (permissions.ts prints it): enough for everything the
// agent does on Cloud B.
test("with exactly the specification's role: --check passes, a change applies, reads back and reverts", async () => {
  azure.useRole(ROLE_ACTIONS);
  const dir = agentDir();
  const check = await agent(dir, ['--check']);
  assert.equal(check.code, 0, check.stdout + check.stderr);
  assert.doesNotMatch(check.stdout, /^FAIL/m, check.stdout);
  const before = await setting('random_page_cost');
  const applied = await agent(dir, ['--apply', 'random_page_cost=1.3']);
  assert.equal(applied.code, 0, applied.stdout + applied.stderr);
  assert.match(applied.stdout, /applied and read back from pg_settings: random_page_cost = 1\.3/);
  assert.equal(await setting('random_page_cost'), '1.3');
  const reverted = await agent(dir, ['--revert']);
  assert.equal(reverted.code, 0, reverted.stdout + reverted.stderr);
  assert.equal(await setting('random_page_cost'), before);
  const refused = azure.requests.filter((r) => r.status === 403);
  assert.deepEqual(refused, [], show(refused));
});

test('--check against a resource group that does not exist: ResourceGroupNotFound, and the setting to fix', async () => {
  const run = await agent(agentDir({ resourceGroup: 'no-such-rg' }), ['--check']);
  assert.equal(run.code, 3, run.stdout);
  assert.match(
    run.stdout,
    /FAIL {2}flexible server readable .*\(ResourceGroupNotFound: Resource group 'no-such-rg' could not be found\.\)/,
  );
  assert.match(run.stdout, /fix: check managed_b_flex\.resource_group_name\n/);
});

// Resource Manager throttles with 429 and Retry-After: the SDK the agent uses waits as long as
// it says and tries again; throttled still after that, the agent says so clearly.
test('in process: throttling (429 with Retry-After) is waited out as it asks, or reported clearly when it persists', async () => {
  await inProcess(async (target) => {
    const first = azure.requests.length; // by position: a time stamp may share the last request's millisecond
    azure.throttle({ requests: 1, retryAfterSeconds: 2 });
    assert.deepEqual(await target.readOverrides(['work_mem']), { work_mem: { set: false } });
    // The first page of the list (the others follow its nextLink).
    const lists = azure.requests.slice(first).filter((r) => r.path.endsWith('/configurations') && !r.query['$skipToken']);
    assert.deepEqual(
      lists.map((r) => r.status),
      [429, 200],
    );
    assert.ok(lists[1]!.at - lists[0]!.at >= 2_000, `tried again ${lists[1]!.at - lists[0]!.at} ms later`);

    azure.throttle({ requests: 100, retryAfterSeconds: 1 });
    await assert.rejects(target.readOverrides(['work_mem']), (err: Error) =>
      /reading the server parameters of the flexible server tuner-flex-1 .*: Resource Manager is throttling the requests of the managed identity of this host \(SubscriptionRequestsThrottled, retry after 1 s\), still after the SDK waited and tried again as it asked: Number of 'read' requests for subscription/.test(
        err.message,
      ),
    );
  });
});

const AZURE_TUNED = ['checkpoint_completion_target', 'min_wal_size', 'max_wal_size', 'bgwriter_delay'];

// Azure's intelligent tuning changes these four itself when it is on
// (https://learn.microsoft.com/azure/postgresql/flexible-server/concepts-intelligent-tuning):
// the agent reports them unwritable at every report, so the session's space leaves them out,
// and refuses a change to them anyway (a session that began before it was turned on).
test('in process: with intelligent tuning on, the service is told, and a trial never touches what Azure tunes', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'tuner-agent-b-journal-'));
  dirs.push(dir);
  await inProcess(async (target, db) => {
    const { machine } = await target.machine();
    const { config } = loadConfig({ cwd: agentDir(), env: {}, target: 'managed-b-flex', needsService: false });
    const ctx = { db, target, journal: Journal.open(dir, target.identity), config, log: createLogger({ write: () => {} }) };
    const spaceNow = async () => {
      const settings = await catalogSettings(db, target);
      return {
        settings,
        space: buildSpace(sessionSpaceInput({ target: 'managed-b-flex', mode: 'reload-only', machine, settings, maxConnections: 100 })),
      };
    };

    // Off (the default): all 13 are in the space.
    const off = await spaceNow();
    for (const name of AZURE_TUNED)
      assert.ok(
        off.space.dimensions.some((d) => d.name === name),
        `${name} tuned while intelligent tuning is off`,
      );

    // Turned on while the agent runs: the next report says so.
    await azure.server.set('intelligent_tuning', 'on');
    await azure.server.set('intelligent_tuning.metric_targets', 'all');
    const on = await spaceNow();
    for (const name of AZURE_TUNED) {
      assert.match(
        on.settings.find((s) => s.name === name)?.unwritable ?? '',
        /^changed by Azure's intelligent tuning on this server \(intelligent_tuning = on, intelligent_tuning\.metric_targets = all\)/,
        name,
      );
      assert.ok(!on.space.dimensions.some((d) => d.name === name), `${name} is out of the space`);
      assert.match(on.space.excluded.find((e) => e.name === name)?.reason ?? '', /intelligent tuning/);
    }
    assert.equal(on.space.dimensions.length, 9, 'the other nine are tuned');

    // A trial drawn from that space, applied as the agent applies one: the four are never written.
    azure.requests.length = 0;
    const trial = randomSuggest({ space: on.space, history: [], seed: 28 });
    const applied = await applyChange(ctx, trial.config, { accept: false });
    assert.equal(applied.status, 'applied', JSON.stringify(applied));
    const patched = azure.requests.filter((r) => r.method === 'PATCH').map((r) => r.path.split('/').at(-1)!);
    assert.ok(patched.length > 0, 'the trial wrote something');
    assert.deepEqual(
      patched.filter((n) => AZURE_TUNED.includes(n)),
      [],
      `written: ${patched.join(', ')}`,
    );

    // A session that began before intelligent tuning was turned on may still ask: refused, nothing written.
    azure.requests.length = 0;
    const stale = await applyChange(ctx, { work_mem: '6MB', bgwriter_delay: '50ms' }, { accept: false });
    assert.equal(stale.status, 'refused', 'refused by the agent before anything is written');
    assert.match(
      'errors' in stale ? stale.errors.join('; ') : '',
      /bgwriter_delay cannot be changed here: changed by Azure's intelligent tuning on this server \(intelligent_tuning = on/,
    );
    assert.deepEqual(
      azure.requests.filter((r) => r.method === 'PATCH'),
      [],
      'nothing written, work_mem neither',
    );

    // Only the targets named: only those are left to Azure; none at all when metric_targets is none.
    await azure.server.set('intelligent_tuning.metric_targets', 'Storage-bgwriter_delay,tuning-autovacuum');
    assert.deepEqual(
      (await spaceNow()).space.excluded.filter((e) => /intelligent tuning/.test(e.reason)).map((e) => e.name),
      ['bgwriter_delay'],
    );
    await azure.server.set('intelligent_tuning.metric_targets', 'none,all');
    assert.deepEqual(
      (await spaceNow()).settings.filter((s) => s.unwritable),
      [],
      'none wins over all',
    );
  });
});

test('--check with intelligent tuning on: a WARN naming what Azure tunes, what it means and how to turn it off', async () => {
  await azure.server.set('intelligent_tuning', 'on');
  await azure.server.set('intelligent_tuning.metric_targets', 'Storage-max_wal_size,Storage-min_wal_size');
  const run = await agent(agentDir(), ['--check']);
  assert.equal(run.code, 0, run.stdout + run.stderr);
  assert.match(
    run.stdout,
    /WARN {2}Azure's intelligent tuning leaves the tuned parameters to the agent \(server parameter intelligent_tuning\): intelligent_tuning = on, intelligent_tuning\.metric_targets = Storage-max_wal_size,Storage-min_wal_size: Azure changes min_wal_size, max_wal_size itself, so the agent leaves them out of its search and refuses changes to them; it tunes the other 11\n/,
  );
  assert.match(
    run.stdout,
    /fix: to let the tuner tune them instead, turn intelligent tuning off: az postgres flexible-server parameter set --resource-group tuner-rg --server-name tuner-flex-1 --name intelligent_tuning --value off/,
  );
  assert.match(run.stdout, /PASS {2}tuned parameters are changeable without a restart: all 13/);
});

test('which parameters intelligent tuning takes, from intelligent_tuning and its metric targets; the reason fits the protocol', () => {
  const of = (on: string | undefined, targets: string | undefined) =>
    intelligentTuningOf(
      new Map([
        ...(on === undefined ? [] : [['intelligent_tuning', { name: 'intelligent_tuning', value: on }] as const]),
        ...(targets === undefined
          ? []
          : [['intelligent_tuning.metric_targets', { name: 'intelligent_tuning.metric_targets', value: targets }] as const]),
      ]),
    ).parameters;
  assert.deepEqual(of(undefined, undefined), [], 'a server without the parameters (PostgreSQL 18)');
  assert.deepEqual(of('off', 'all'), []);
  assert.deepEqual(of('on', 'none'), []);
  assert.deepEqual(of('on', 'all,none'), [], 'none wins over all');
  assert.deepEqual(of('on', 'tuning-autovacuum'), []);
  assert.deepEqual(of('ON', 'all'), AZURE_TUNED);
  assert.deepEqual(of('on', 'STORAGE-bgwriter_delay, Storage-min_wal_size'), ['min_wal_size', 'bgwriter_delay']);
  const long = intelligentTuningOf(
    new Map([
      ['intelligent_tuning', { name: 'intelligent_tuning', value: 'on' }],
      [
        'intelligent_tuning.metric_targets',
        { name: 'intelligent_tuning.metric_targets', value: Array(40).fill('Storage-max_wal_size').join(',') },
      ],
    ]),
  );
  const reason = azureTunesReason(long);
  assert.ok(reason.length <= 300, `${reason.length} characters`);
  SettingSchema.parse({
    name: 'max_wal_size',
    setting: '1024',
    unit: 'MB',
    context: 'sighup',
    source: null,
    pendingRestart: false,
    unwritable: reason,
  });
});

test('the SKU table, its estimate for a size it does not know, and the agent.yaml figures that override it', () => {
  assert.deepEqual(knownComputeSize('Standard_B1ms'), { vcpus: 1, memoryBytes: 2 * GiB });
  assert.deepEqual(knownComputeSize('GP_Standard_D8ads_v5'), { vcpus: 8, memoryBytes: 32 * GiB });
  assert.deepEqual(knownComputeSize('standard_e64ds_v4'), { vcpus: 64, memoryBytes: 432 * GiB });
  assert.deepEqual(knownComputeSize('Standard_E96ads_v5'), { vcpus: 96, memoryBytes: 672 * GiB });
  assert.equal(knownComputeSize('Standard_D128ds_v6'), undefined);
  assert.deepEqual(estimateComputeSize('Standard_E12zz_v9', 'MemoryOptimized'), { vcpus: 12, memoryBytes: 96 * GiB });
  assert.deepEqual(estimateComputeSize('Standard_X3', undefined), { vcpus: 3, memoryBytes: 6 * GiB });
  assert.equal(estimateComputeSize('Standard_Zeta_v1', 'GeneralPurpose'), undefined);

  const server = { sku: { name: 'Standard_Zeta_v1', tier: 'GeneralPurpose' }, storage: { storageSizeGB: 64 } };
  const fromConfig = machineOfServer(server, { memoryMb: 12_288, vcpus: 3 });
  assert.deepEqual(fromConfig.info.machine, { memoryBytes: 12 * GiB, vcpus: 3, storage: 'ssd', storageBytes: 64 * GiB });
  assert.match(
    fromConfig.warning ?? '',
    /SKU Standard_Zeta_v1 is not in tuner-agent's table .*: using local\.memory_mb = 12288 and local\.vcpus = 3/,
  );
  assert.throws(() => machineOfServer(server, {}), /its name gives no vCPU count: set local\.memory_mb and local\.vcpus in agent\.yaml/);
});

test('no secret appears in anything the agent printed in this file', () => {
  const all = transcript.join('\n');
  assert.ok(all.length > 2000, 'the transcript holds the runs above');
  for (const secret of [
    AGENT_USER_PASSWORD_FOR_TESTS,
    azure.servicePrincipal.clientSecret,
    azure.identityHeader,
    azure.workloadIdentity.federatedToken,
  ]) {
    assert.ok(!all.includes(secret), `a secret leaked: ${secret.slice(0, 3)}…`);
  }
});

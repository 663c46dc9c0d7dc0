// The fake Cloud B driven through the real Azure SDK client, checked against Azure's documented
// behaviour (issue 13). Each case names the page it follows.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { getCACertificates, setDefaultCACertificates } from 'node:tls';
import { after, before, test } from 'node:test';
import { MonitorClient } from '@azure/arm-monitor';
import { PostgreSQLManagementFlexibleServerClient } from '@azure/arm-postgresql-flexible';
import { ClientSecretCredential } from '@azure/identity';
import { startCluster, type Cluster } from '../src/lab/cluster.ts';
import { makeTestCa, type TestCa } from '../src/lab/tls.ts';
import { FLEXIBLE_SERVER_API_VERSION, FLEXIBLE_SERVER_API_VERSIONS, startFakeAzure, type FakeAzure } from './fakes/azure/index.ts';

let ca: TestCa;
let cluster: Cluster;
let azure: FakeAzure;
let credential: ClientSecretCredential;
let flex: PostgreSQLManagementFlexibleServerClient;

/** A client of the real SDK pointed at the fake, speaking `apiVersion`. */
function flexClient(apiVersion: string = FLEXIBLE_SERVER_API_VERSION): PostgreSQLManagementFlexibleServerClient {
  return new PostgreSQLManagementFlexibleServerClient(credential, azure.subscriptionId, {
    $host: azure.url,
    endpoint: azure.url,
    credentialScopes: [`${azure.url}/.default`],
    apiVersion,
  });
}

async function setting(name: string): Promise<string> {
  const [row] = await cluster.sql<{ setting: string }>('SELECT setting FROM pg_settings WHERE name = $1', [name]);
  return row!.setting;
}

/** Whether PostgreSQL stops taking connections within a few seconds. */
async function goesDown(): Promise<boolean> {
  for (const deadline = Date.now() + 5_000; Date.now() < deadline; await sleep(50)) {
    if (
      await cluster.sql('SELECT 1').then(
        () => false,
        () => true,
      )
    )
      return true;
  }
  return false;
}

interface AzureError {
  statusCode?: number;
  code?: string;
  message: string;
}
/** An SDK error: an HTTP refusal (status and code) or a failed operation (code in the message). */
const refusedWith = (status: number | undefined, code: string) => (err: AzureError) =>
  (status === undefined || err.statusCode === status) && (err.code === code || err.message.includes(code));

before(async () => {
  ca = makeTestCa('fake Cloud B fidelity CA');
  cluster = await startCluster({ tls: { ca } });
  azure = await startFakeAzure({ cluster, fqdn: '127.0.0.1' });
  setDefaultCACertificates([...getCACertificates('default'), readFileSync(azure.certFile, 'utf8')]);
  const { tenantId, clientId, clientSecret } = azure.servicePrincipal;
  credential = new ClientSecretCredential(tenantId, clientId, clientSecret, {
    authorityHost: azure.url,
    disableInstanceDiscovery: true,
  });
  flex = flexClient();
});

after(async () => {
  await azure?.close();
  await cluster?.destroy();
  ca?.remove();
});

// https://learn.microsoft.com/azure/postgresql/flexible-server/concepts-server-parameters ("Read-only")
test('read-only server parameters: isReadOnly true, and a write is refused with nothing applied', async () => {
  const port = await flex.configurations.get(azure.resourceGroup, azure.serverName, 'port');
  assert.equal(port.isReadOnly, true);
  const work = await flex.configurations.get(azure.resourceGroup, azure.serverName, 'work_mem');
  assert.equal(work.isReadOnly, false);
  const before = await cluster.sql<{ setting: string }>(`SELECT setting FROM pg_settings WHERE name = 'port'`);
  await assert.rejects(
    flex.configurations.beginUpdateAndWait(azure.resourceGroup, azure.serverName, 'port', { value: '6543', source: 'user-override' }),
    (err: { statusCode?: number; code?: string; message: string }) => err.statusCode === 400 && /read-only/.test(err.message),
  );
  const afterWrite = await cluster.sql<{ setting: string }>(`SELECT setting FROM pg_settings WHERE name = 'port'`);
  assert.deepEqual(afterWrite, before);
  const autoConf = await cluster.sql<{ n: string }>(
    `SELECT count(*)::text AS n FROM pg_file_settings WHERE name = 'port' AND sourcefile LIKE '%postgresql.auto.conf'`,
  );
  assert.equal(autoConf[0]?.n, '0');
});

// Azure answers a write to a static parameter with the new configured value and
// isConfigPendingRestart true, from the write's result, a get and the list alike
// (https://learn.microsoft.com/rest/api/postgresql/flexibleserver/configurations/get).
test('a static parameter written: the configured value with isConfigPendingRestart, on every path', async () => {
  const before = await cluster.sql<{ setting: string }>(`SELECT setting FROM pg_settings WHERE name = 'max_prepared_transactions'`);
  const wanted = String(Number(before[0]!.setting) + 7);
  try {
    const written = await flex.configurations.beginUpdateAndWait(azure.resourceGroup, azure.serverName, 'max_prepared_transactions', {
      value: wanted,
      source: 'user-override',
    });
    assert.deepEqual([written.value, written.isConfigPendingRestart], [wanted, true], 'the write answers with the configured value');
    const got = await flex.configurations.get(azure.resourceGroup, azure.serverName, 'max_prepared_transactions');
    assert.deepEqual([got.value, got.isConfigPendingRestart], [wanted, true]);
    let listed: { value?: string; isConfigPendingRestart?: boolean } | undefined;
    for await (const c of flex.configurations.listByServer(azure.resourceGroup, azure.serverName)) {
      if (c.name === 'max_prepared_transactions') listed = c;
    }
    assert.deepEqual([listed?.value, listed?.isConfigPendingRestart], [wanted, true]);
    const running = await cluster.sql<{ setting: string }>(`SELECT setting FROM pg_settings WHERE name = 'max_prepared_transactions'`);
    assert.deepEqual(running, before, 'the server still runs the old value until a restart');
  } finally {
    await azure.reset();
  }
});

// Azure refuses a value outside the configuration's allowedValues itself, with 400
// InvalidParameterValue, before PostgreSQL sees it: no units, no synonyms, nothing out of range
// (https://learn.microsoft.com/azure/postgresql/flexible-server/how-to-configure-server-parameters).
test("values outside allowedValues are refused by Cloud B itself, and PostgreSQL's other spellings with them", async () => {
  const refuse = async (name: string, value: string) =>
    assert.rejects(
      flex.configurations.beginUpdateAndWait(azure.resourceGroup, azure.serverName, name, { value, source: 'user-override' }),
      (err: { statusCode?: number; code?: string; message: string }) =>
        err.statusCode === 400 && err.code === 'InvalidParameterValue' && err.message.includes(`Invalid value given for parameter ${name}`),
      `${name} = ${value}`,
    );
  await refuse('jit', 'true');
  await refuse('checkpoint_timeout', '10min');
  await refuse('work_mem', '16MB');
  await refuse('checkpoint_timeout', '5');
  const untouched = await cluster.sql<{ n: string }>(
    `SELECT count(*)::text AS n FROM pg_file_settings WHERE name IN ('jit', 'checkpoint_timeout', 'work_mem') AND sourcefile LIKE '%postgresql.auto.conf'`,
  );
  assert.equal(untouched[0]?.n, '0', 'nothing reached PostgreSQL');
  const ok = await flex.configurations.beginUpdateAndWait(azure.resourceGroup, azure.serverName, 'work_mem', {
    value: '16384',
    source: 'user-override',
  });
  assert.equal(ok.value, '16384');
  await azure.reset();
});

// A configuration write is a long-running operation
// (https://learn.microsoft.com/azure/azure-resource-manager/management/async-operations): 202,
// then InProgress until the service has applied it, the server Updating meanwhile
// (https://learn.microsoft.com/rest/api/postgresql/servers/get, ServerState). What it changes
// is not in pg_settings before the operation completes.
test('a configuration write takes effect when its operation completes, not before', async () => {
  const before = await setting('work_mem');
  const wanted = String(Number(before) * 2);
  azure.timing = { ...azure.timing, operationMs: 1_200 };
  try {
    const poller = await flex.configurations.beginUpdate(azure.resourceGroup, azure.serverName, 'work_mem', {
      value: wanted,
      source: 'user-override',
    });
    await poller.poll();
    assert.equal(poller.getOperationState().status, 'running', 'the operation is InProgress');
    assert.equal(await setting('work_mem'), before, 'not in pg_settings before the operation completes');
    const during = await flex.configurations.get(azure.resourceGroup, azure.serverName, 'work_mem');
    assert.equal(during.value, before, 'the configuration still shows the value the server runs');
    assert.equal((await flex.servers.get(azure.resourceGroup, azure.serverName)).state, 'Updating');

    const done = await poller.pollUntilDone();
    assert.equal(done.value, wanted);
    assert.equal(await setting('work_mem'), wanted, 'in pg_settings once it completed');
    assert.equal((await flex.servers.get(azure.resourceGroup, azure.serverName)).state, 'Ready');
    const op = azure.operations.at(-1)!;
    assert.ok(Date.parse(op.endTime!) - Date.parse(op.startTime) >= 1_200, 'the operation took its time');
  } finally {
    await azure.reset();
  }
});

// One operation at a time: while one runs, a configuration write is refused with 409
// ServerIsBusy (https://github.com/Azure/azure-postgresql/issues/134 quotes the service's answer).
test('a second write while an operation runs gets 409 ServerIsBusy, and goes through once it is over', async () => {
  try {
    const first = await flex.configurations.beginUpdate(azure.resourceGroup, azure.serverName, 'work_mem', {
      value: '8192',
      source: 'user-override',
    });
    await assert.rejects(
      flex.configurations.beginUpdateAndWait(azure.resourceGroup, azure.serverName, 'random_page_cost', {
        value: '1.5',
        source: 'user-override',
      }),
      (err: AzureError) =>
        refusedWith(409, 'ServerIsBusy')(err) && err.message.includes(`server '${azure.serverName}' is busy processing another operation`),
    );
    await first.pollUntilDone();
    await flex.configurations.beginUpdateAndWait(azure.resourceGroup, azure.serverName, 'random_page_cost', {
      value: '1.5',
      source: 'user-override',
    });
    assert.equal(await setting('random_page_cost'), '1.5');
  } finally {
    await azure.reset();
  }
});

// A restart takes time, with PostgreSQL down (ServerState Restarting). Meanwhile a restart is
// accepted and its operation fails with ServerIsNotReady ("Restart or Stop Server can only be
// performed on Started servers", https://github.com/hashicorp/terraform-provider-azurerm/issues/29219),
// a configuration write is refused with 409 ServerIsBusy (not a 400 from a PostgreSQL that is
// down), and Resource Manager's reads still answer: they are the service's, not PostgreSQL's.
test('a restart: PostgreSQL down, a second restart refused, writes refused busy, reads answered', async () => {
  azure.timing = { ...azure.timing, restartDownMs: 1_500 };
  try {
    const restart = await flex.servers.beginRestart(azure.resourceGroup, azure.serverName);
    await restart.poll();
    assert.equal(restart.getOperationState().status, 'running');
    assert.equal((await flex.servers.get(azure.resourceGroup, azure.serverName)).state, 'Restarting');
    assert.ok(await goesDown(), 'PostgreSQL refuses connections during the restart');

    await assert.rejects(flex.servers.beginRestartAndWait(azure.resourceGroup, azure.serverName), (err: AzureError) =>
      /ServerIsNotReady.*Current Server State = Restarting/s.test(err.message),
    );
    await assert.rejects(
      flex.configurations.beginUpdateAndWait(azure.resourceGroup, azure.serverName, 'work_mem', {
        value: '8192',
        source: 'user-override',
      }),
      refusedWith(409, 'ServerIsBusy'),
    );
    const read = await flex.configurations.get(azure.resourceGroup, azure.serverName, 'work_mem');
    assert.equal(read.name, 'work_mem');
    let listed = 0;
    for await (const _ of flex.configurations.listByServer(azure.resourceGroup, azure.serverName)) listed++;
    assert.ok(listed > 100, `the configurations list answers during the restart (${listed})`);

    await restart.pollUntilDone();
    assert.equal((await flex.servers.get(azure.resourceGroup, azure.serverName)).state, 'Ready');
    assert.deepEqual(await cluster.sql('SELECT 1 AS one'), [{ one: 1 }]);
    assert.deepEqual(
      azure.operations.map((o) => [o.kind, o.outcome?.status]),
      [
        ['restart', 'Succeeded'],
        ['refused', 'Failed'],
      ],
      'one restart ran; the second was refused',
    );
  } finally {
    await azure.reset();
  }
});

// Resource Manager's paths, and the names in them, are case-insensitive
// (https://learn.microsoft.com/azure/azure-resource-manager/management/resource-name-rules:
// resource names are case-insensitive; PostgreSQL's parameter names are too).
test('paths and configuration names are case-insensitive', async () => {
  try {
    const got = await flex.configurations.get(azure.resourceGroup.toUpperCase(), azure.serverName.toUpperCase(), 'Work_Mem');
    assert.equal(got.name, 'work_mem');
    const written = await flex.configurations.beginUpdateAndWait(azure.resourceGroup, azure.serverName.toUpperCase(), 'WORK_MEM', {
      value: '6144',
      source: 'user-override',
    });
    assert.equal(written.name, 'work_mem');
    assert.equal(await setting('work_mem'), '6144');
  } finally {
    await azure.reset();
  }
});

// Every documented api-version is accepted
// (https://learn.microsoft.com/azure/templates/microsoft.dbforpostgresql/allversions); another
// is refused with 400 InvalidApiVersionParameter, which lists the supported ones.
test('documented api-versions are accepted; another is refused, listing the supported ones', async () => {
  for (const version of ['2022-12-01', '2024-08-01', '2023-06-01-preview']) {
    const server = await flexClient(version).servers.get(azure.resourceGroup, azure.serverName);
    assert.equal(server.name, azure.serverName, version);
  }
  await assert.rejects(
    flexClient('2019-01-01').servers.get(azure.resourceGroup, azure.serverName),
    (err: AzureError) =>
      refusedWith(400, 'InvalidApiVersionParameter')(err) && err.message.includes(FLEXIBLE_SERVER_API_VERSIONS.join(',')),
  );
});

// Azure Monitor returns the aggregations asked for, no others, and refuses an unknown one with
// 400 (https://learn.microsoft.com/rest/api/monitor/metrics/list, "aggregation").
test('Azure Monitor honours aggregation: only the ones asked for, an unknown one refused', async () => {
  const monitor = new MonitorClient(credential, azure.subscriptionId, {
    endpoint: azure.url,
    credentials: { scopes: [`${azure.url}/.default`] },
  });
  const resourceUri = `subscriptions/${azure.subscriptionId}/resourceGroups/${azure.resourceGroup}/providers/Microsoft.DBforPostgreSQL/flexibleServers/${azure.serverName}`;
  const end = new Date();
  const timespan = `${new Date(end.getTime() - 5 * 60_000).toISOString()}/${end.toISOString()}`;
  const points = async (aggregation?: string) => {
    const answer = await monitor.metrics.list(resourceUri, {
      metricnames: 'cpu_percent',
      timespan,
      interval: 'PT1M',
      ...(aggregation && { aggregation }),
    });
    return answer.value[0]!.timeseries[0]!.data!.filter((p) => Object.keys(p).length > 1);
  };
  const keys = (p: object) =>
    Object.entries(p)
      .filter(([k, v]) => k !== 'timeStamp' && v !== undefined)
      .map(([k]) => k)
      .sort();
  assert.deepEqual(keys((await points('Minimum,Total'))[0]!), ['minimum', 'total']);
  assert.deepEqual(keys((await points('count'))[0]!), ['count']);
  assert.deepEqual(keys((await points())[0]!), ['average'], "without aggregation: the metric's primary one");
  await assert.rejects(points('Median'), (err: AzureError) => err.statusCode === 400 && /Median/.test(err.message));
});

// ---- issue 28: where the fake still differed from Azure (found with the Python Azure SDK) ----

/** Every configuration, as the SDK lists them. */
async function listed(): Promise<
  Map<string, { name?: string; value?: string; isReadOnly?: boolean; isDynamicConfig?: boolean; allowedValues?: string }>
> {
  const all = new Map<string, { name?: string; value?: string; isReadOnly?: boolean; isDynamicConfig?: boolean; allowedValues?: string }>();
  for await (const c of flex.configurations.listByServer(azure.resourceGroup, azure.serverName)) all.set(c.name!, c);
  return all;
}

// Azure lists DateStyle, IntervalStyle and TimeZone with PostgreSQL's spelling, and, its names
// being case-insensitive, answers a GET or PATCH of them in any case
// (https://learn.microsoft.com/azure/postgresql/flexible-server/concepts-server-parameters).
test('DateStyle, IntervalStyle and TimeZone: listed, then read and written in any case', async () => {
  try {
    const all = await listed();
    for (const name of ['DateStyle', 'IntervalStyle', 'TimeZone']) {
      assert.ok(all.has(name), `${name} is listed`);
      for (const asked of [name, name.toLowerCase(), name.toUpperCase()]) {
        const got = await flex.configurations.get(azure.resourceGroup, azure.serverName, asked);
        assert.equal(got.name, name, asked);
      }
    }
    const written = await flex.configurations.beginUpdateAndWait(azure.resourceGroup, azure.serverName, 'timezone', {
      value: 'Europe/Paris',
      source: 'user-override',
    });
    assert.deepEqual([written.name, written.value, written.source], ['TimeZone', 'Europe/Paris', 'user-override']);
    assert.equal(await setting('TimeZone'), 'Europe/Paris');
    await flex.configurations.beginUpdateAndWait(azure.resourceGroup, azure.serverName, 'DATESTYLE', {
      value: 'ISO, DMY',
      source: 'user-override',
    });
    assert.equal(await setting('DateStyle'), 'ISO, DMY');
  } finally {
    await azure.reset();
  }
});

// wal_level can be set to logical (https://learn.microsoft.com/azure/postgresql/flexible-server/concepts-logical,
// "set the server parameter wal_level to logical"; it takes a restart), and max_wal_senders is
// a server parameter users set too: neither is read-only. Azure allows replica and logical only.
test('wal_level and max_wal_senders are writable static parameters; wal_level = logical waits for a restart', async () => {
  try {
    const all = await listed();
    for (const name of ['wal_level', 'max_wal_senders']) {
      assert.deepEqual([all.get(name)?.isReadOnly, all.get(name)?.isDynamicConfig], [false, false], name);
    }
    assert.equal(all.get('wal_level')?.allowedValues, 'replica,logical');
    const written = await flex.configurations.beginUpdateAndWait(azure.resourceGroup, azure.serverName, 'wal_level', {
      value: 'logical',
      source: 'user-override',
    });
    assert.deepEqual([written.value, written.isConfigPendingRestart], ['logical', true]);
    assert.equal(await setting('wal_level'), 'replica', 'running the old value until a restart');
    await assert.rejects(
      flex.configurations.beginUpdateAndWait(azure.resourceGroup, azure.serverName, 'wal_level', {
        value: 'minimal',
        source: 'user-override',
      }),
      refusedWith(400, 'InvalidParameterValue'),
    );
  } finally {
    await azure.reset();
  }
});

// azure.extensions is a set: each extension must be one of its allowedValues, or Azure refuses
// the whole value (https://learn.microsoft.com/azure/postgresql/extensions/how-to-allow-extensions).
// The same for intelligent_tuning.metric_targets, and intelligent_tuning takes on or off.
test('azure.extensions and the intelligent tuning parameters take only their allowed values', async () => {
  try {
    const all = await listed();
    assert.equal(all.get('intelligent_tuning')?.allowedValues, 'on,off');
    assert.match(all.get('intelligent_tuning.metric_targets')?.allowedValues ?? '', /^none,Storage-checkpoint_completion_target,.*,all$/);
    const refuse = (name: string, value: string) =>
      assert.rejects(
        flex.configurations.beginUpdateAndWait(azure.resourceGroup, azure.serverName, name, { value, source: 'user-override' }),
        (err: AzureError) => refusedWith(400, 'InvalidParameterValue')(err) && err.message.includes(name),
        `${name} = ${value}`,
      );
    await refuse('azure.extensions', 'pg_stat_statements,no_such_extension');
    await refuse('intelligent_tuning', 'maybe');
    await refuse('intelligent_tuning.metric_targets', 'Storage-shared_buffers');
    assert.equal((await azure.server.parameter('azure.extensions')).value, 'pgcrypto,pg_stat_statements', 'unchanged');
    const ok = await flex.configurations.beginUpdateAndWait(azure.resourceGroup, azure.serverName, 'azure.extensions', {
      value: 'pg_stat_statements,HSTORE',
      source: 'user-override',
    });
    assert.equal(ok.value, 'pg_stat_statements,HSTORE');
    const targets = await flex.configurations.beginUpdateAndWait(
      azure.resourceGroup,
      azure.serverName,
      'intelligent_tuning.metric_targets',
      {
        value: 'Storage-bgwriter_delay,Storage-max_wal_size',
        source: 'user-override',
      },
    );
    assert.equal(targets.value, 'Storage-bgwriter_delay,Storage-max_wal_size');
  } finally {
    await azure.reset();
  }
});

function monitorClient(): MonitorClient {
  return new MonitorClient(credential, azure.subscriptionId, { endpoint: azure.url, credentials: { scopes: [`${azure.url}/.default`] } });
}
const resourceUri = () =>
  `subscriptions/${azure.subscriptionId}/resourceGroups/${azure.resourceGroup}/providers/Microsoft.DBforPostgreSQL/flexibleServers/${azure.serverName}`;
const DAY = 86_400_000;

// Azure Monitor has data up to now, and keeps platform metrics 93 days
// (https://learn.microsoft.com/azure/azure-monitor/essentials/data-platform-metrics, "Retention"):
// a window in the future has no values, one that ends before the retention is refused ("Query
// endTime: … is out of the Max metrics retention period: 93.00:00:00",
// https://github.com/Azure/azure-sdk-for-python/issues/13547). Without timespan, Azure takes
// the last hour (https://learn.microsoft.com/rest/api/monitor/metrics/list).
test('Azure Monitor: values up to now only, 93 days kept, and the last hour when no timespan is given', async () => {
  const monitor = monitorClient();
  const valued = (answer: { value: Array<{ timeseries: Array<{ data?: object[] }> }> }) =>
    answer.value[0]!.timeseries[0]!.data!.filter((p) => Object.entries(p).some(([k, v]) => k !== 'timeStamp' && v !== undefined));
  const future = Date.now() + 365 * DAY;
  const ahead = await monitor.metrics.list(resourceUri(), {
    metricnames: 'cpu_percent',
    timespan: `${new Date(future).toISOString()}/${new Date(future + 10 * 60_000).toISOString()}`,
    interval: 'PT1M',
  });
  assert.deepEqual(valued(ahead), [], 'no values in the future');
  await assert.rejects(
    monitor.metrics.list(resourceUri(), {
      metricnames: 'cpu_percent',
      timespan: `${new Date(Date.now() - 2000 * DAY).toISOString()}/${new Date(Date.now() - 2000 * DAY + 10 * 60_000).toISOString()}`,
      interval: 'PT1M',
    }),
    (err: AzureError) => err.statusCode === 400 && /out of the Max metrics retention period: 93\.00:00:00/.test(err.message),
  );
  const lastHour = await monitor.metrics.list(resourceUri(), { metricnames: 'cpu_percent', interval: 'PT1M' });
  const [from, to] = (lastHour.timespan ?? '').split('/').map((t) => Date.parse(t));
  assert.ok(Math.abs(to! - Date.now()) < 60_000 && Math.abs(to! - from! - 3_600_000) < 1_000, lastHour.timespan);
  const points = valued(lastHour);
  assert.ok(points.length >= 58, `about an hour of one-minute values (${points.length})`);
});

// Resource Manager's answers for what does not exist
// (https://learn.microsoft.com/azure/azure-resource-manager/troubleshooting/error-not-found):
// ResourceGroupNotFound for a resource group, ResourceNotFound for a resource in one that exists.
test('unknown resource group and unknown server: ResourceGroupNotFound and ResourceNotFound, as Resource Manager words them', async () => {
  await assert.rejects(
    flex.servers.get('no-such-rg', azure.serverName),
    (err: AzureError) =>
      refusedWith(404, 'ResourceGroupNotFound')(err) && err.message === "Resource group 'no-such-rg' could not be found.",
  );
  await assert.rejects(
    flex.configurations.get(azure.resourceGroup, 'no-such-server', 'work_mem'),
    (err: AzureError) =>
      refusedWith(404, 'ResourceNotFound')(err) &&
      err.message ===
        `The Resource 'Microsoft.DBforPostgreSQL/flexibleServers/no-such-server' under resource group '${azure.resourceGroup}' was not found. For more details please go to https://aka.ms/ARMResourceNotFoundFix`,
  );
});

// Resource Manager throttles with 429 and Retry-After
// (https://learn.microsoft.com/azure/azure-resource-manager/management/request-limits-and-throttling);
// the SDK waits as long as it says and tries again.
test('injected throttling: 429 with Retry-After, which the SDK waits out', async () => {
  try {
    // The requests from here on, by position: a time stamp would take in the previous test's last
    // request when it fell in the same millisecond (CI saw its 404 here).
    const first = azure.requests.length;
    azure.throttle({ requests: 1, retryAfterSeconds: 2 });
    const got = await flex.configurations.get(azure.resourceGroup, azure.serverName, 'work_mem');
    assert.equal(got.name, 'work_mem');
    const calls = azure.requests.slice(first).filter((r) => r.path.endsWith('/configurations/work_mem'));
    assert.deepEqual(
      calls.map((r) => r.status),
      [429, 200],
    );
    assert.ok(calls[1]!.at - calls[0]!.at >= 2_000, `the retry came ${calls[1]!.at - calls[0]!.at} ms later`);
  } finally {
    await azure.reset();
  }
});

// A role assignment grants its role's actions and nothing else: any other answers 403
// AuthorizationFailed (https://learn.microsoft.com/azure/role-based-access-control/troubleshooting).
test('a given role is enforced: an action outside it answers 403 AuthorizationFailed, naming the action and scope', async () => {
  try {
    azure.useRole(['Microsoft.DBforPostgreSQL/flexibleServers/read']);
    const server = await flex.servers.get(azure.resourceGroup, azure.serverName);
    assert.equal(server.name, azure.serverName);
    await assert.rejects(
      flex.configurations.get(azure.resourceGroup, azure.serverName, 'work_mem'),
      (err: AzureError) =>
        refusedWith(403, 'AuthorizationFailed')(err) &&
        /^The client '[^']+' with object id '[0-9a-f-]+' does not have authorization to perform action 'Microsoft\.DBforPostgreSQL\/flexibleServers\/configurations\/read' over scope '\/subscriptions\/[^']+\/configurations\/work_mem' or the scope is invalid\. If access was recently granted, please refresh your credentials\.$/.test(
          err.message,
        ),
    );
  } finally {
    await azure.reset();
  }
});

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

// The fake Cloud B driven through the real Azure SDK client, checked against Azure's documented
// behaviour (issue 13). Each case names the page it follows.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { getCACertificates, setDefaultCACertificates } from 'node:tls';
import { after, before, test } from 'node:test';
import { PostgreSQLManagementFlexibleServerClient } from '@azure/arm-postgresql-flexible';
import { ClientSecretCredential } from '@azure/identity';
import { startCluster, type Cluster } from '../src/lab/cluster.ts';
import { makeTestCa, type TestCa } from '../src/lab/tls.ts';
import { FLEXIBLE_SERVER_API_VERSION, startFakeAzure, type FakeAzure } from './fakes/azure/index.ts';

let ca: TestCa;
let cluster: Cluster;
let azure: FakeAzure;
let flex: PostgreSQLManagementFlexibleServerClient;

before(async () => {
  ca = makeTestCa('fake Cloud B fidelity CA');
  cluster = await startCluster({ tls: { ca } });
  azure = await startFakeAzure({ cluster, fqdn: '127.0.0.1' });
  setDefaultCACertificates([...getCACertificates('default'), readFileSync(azure.certFile, 'utf8')]);
  const { tenantId, clientId, clientSecret } = azure.servicePrincipal;
  const credential = new ClientSecretCredential(tenantId, clientId, clientSecret, {
    authorityHost: azure.url,
    disableInstanceDiscovery: true,
  });
  flex = new PostgreSQLManagementFlexibleServerClient(credential, azure.subscriptionId, {
    $host: azure.url,
    endpoint: azure.url,
    credentialScopes: [`${azure.url}/.default`],
    apiVersion: FLEXIBLE_SERVER_API_VERSION,
  });
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

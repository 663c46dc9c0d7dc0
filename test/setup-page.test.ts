// Issue 28: the setup page is the spec's setup, per target, in headless Chromium: every step of
// the spec is on the page as commands to copy, filled in with what the page knows (the database
// id, the service's address, the target), in the order the spec does them. The permission
// documents are the agent's own (tuner-agent permissions prints the same).
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import YAML from 'yaml';
import { managedAPolicyJson } from '../src/agent/targets/managed-a/permissions.ts';
import { MANAGED_B_FLEX_ROLE_ACTIONS } from '../src/agent/targets/managed-b-flex/permissions.ts';
import type { TargetKind } from '../src/protocol/v1.ts';
import { launchChromium, logInOnPage, openWatchedPage, skipWithoutChromium } from './helpers/browser.ts';
import type { TestService } from './helpers/service.ts';
import { startAdminService, type AdminService } from './helpers/service-admin.ts';

const skip = skipWithoutChromium;
let lab: AdminService;
let service: TestService;
let browser: Browser;
let page: Page;
let problems: string[] = [];

before(async () => {
  if (skip) return;
  // Downloads of its own, whatever dist/ holds: the page lists the installer step only where it
  // has a binary to hand out (CI builds them, a developer may not have).
  lab = await startAdminService('pglite', { fakeDownloads: true });
  ({ service } = lab);
  browser = await launchChromium();
  ({ page, problems } = await openWatchedPage(browser, { expectedStatuses: [] }));
  await logInOnPage(page, service.url);
});

after(async () => {
  await browser?.close();
  await lab?.close();
});

/** Opens the setup page of a new database of this target; returns its id. */
async function openSetup(target: TargetKind): Promise<string> {
  const { databaseId } = await lab.admin.createDatabase(`setup-${target}`, target);
  await page.goto(`${service.url}/databases/${databaseId}/setup`);
  await page.waitForSelector('#agent-yaml');
  return databaseId;
}

async function text(id: string): Promise<string> {
  const found = await page.textContent(`#${id}`);
  assert.ok(found !== null, `#${id} is on the page`);
  return found;
}

/** The copyable blocks in page order, by id. */
async function order(): Promise<string[]> {
  const pres = await page.locator('pre[id]').all();
  return Promise.all(pres.map(async (pre) => (await pre.getAttribute('id')) ?? ''));
}

/** The note above a block. */
async function noteOf(id: string): Promise<string> {
  return (
    (await page
      .locator('.snippet', { has: page.locator(`#${id}`) })
      .locator('p')
      .first()
      .textContent()) ?? ''
  );
}

async function assertCommon(target: TargetKind, databaseId: string): Promise<void> {
  const sql = await text('database-sql');
  assert.match(sql, /^CREATE USER agent_user WITH PASSWORD '<AGENT_USER_PASSWORD>';$/m);
  assert.match(sql, /^GRANT pg_monitor TO agent_user;$/m);
  assert.match(sql, /^CREATE EXTENSION IF NOT EXISTS pg_stat_statements;$/m);
  assert.match(await noteOf('database-sql'), /port=5432|-p 5432|port 5432/);
  const yaml = YAML.parse(await text('agent-yaml')) as Record<string, Record<string, unknown>>;
  assert.equal(yaml['tuner']?.['database_id'], databaseId);
  assert.equal(yaml['tuner']?.['server_url'], service.url);
  assert.match(String(yaml['postgresql']?.['connection_url']), /^postgresql:\/\/agent_user:<AGENT_USER_PASSWORD>@.*:5432\//);
  const binary = await text('binary-command');
  assert.ok(
    binary.includes(`curl -fsSL ${service.url}/install.sh > /tmp/agent-installer.sh && sh /tmp/agent-installer.sh`),
    `the spec's installer one-liner: ${binary}`,
  );
  assert.match(binary, new RegExp(`^\\./tuner-agent --${target}$`, 'm'));
  const container = await text('container-command');
  assert.match(container, /--restart always/);
  assert.ok(container.trimEnd().endsWith(`--${target}`), container);
  assert.ok(container.includes(`-e AGENT_TUNER_DATABASE_ID=${databaseId}`));
  const blocks = await order();
  assert.ok(blocks.indexOf('database-sql') < blocks.indexOf('agent-yaml'), `the database comes before agent.yaml: ${blocks.join(', ')}`);
  assert.deepEqual(problems, []);
}

test(
  'Cloud A instance: the user, the extension as rds_superuser, the custom parameter group, the policy and its attachment',
  { skip },
  async () => {
    const id = await openSetup('managed-a');
    await assertCommon('managed-a', id);
    assert.match(await noteOf('database-sql'), /rds_superuser/);
    assert.match(
      await noteOf('database-sql'),
      /host=<INSTANCE_ENDPOINT> port=5432 dbname=<DBNAME> user=<MASTER_USER> password=<MASTER_PASSWORD>/,
    );

    const group = await text('parameter-group');
    assert.match(
      group,
      /aws rds create-db-parameter-group .*--db-parameter-group-name tuner-<DATABASE_IDENTIFIER> --db-parameter-group-family <FAMILY>/,
    );
    assert.match(
      group,
      /aws rds modify-db-instance .*--db-instance-identifier <DATABASE_IDENTIFIER> --db-parameter-group-name tuner-<DATABASE_IDENTIFIER>/,
    );
    assert.match(group, /aws rds reboot-db-instance .*--db-instance-identifier <DATABASE_IDENTIFIER>/);
    const console = await noteOf('parameter-group');
    assert.match(console, /In the console: Parameter groups, Create parameter group .* Modify, DB parameter group.* Reboot/);
    assert.match(console, /default\.\* group cannot be modified/);

    const policy = JSON.parse(await text('policy-json')) as { Version: string; Statement: { Sid: string; Effect: string }[] };
    assert.equal(policy.Version, '2012-10-17');
    assert.deepEqual(
      policy.Statement.map((s) => s.Sid),
      ['DescribeInstanceTypes', 'DescribeAndModifyDBInstance', 'GetDBMetrics', 'ModifyDBParameterGroup', 'RebootDBInstance'],
    );
    assert.equal(`${JSON.stringify(policy, null, 2)}\n`, managedAPolicyJson(), "the agent's own document");

    const attach = await text('policy-attach');
    assert.match(
      attach,
      new RegExp(`aws iam create-policy --policy-name tuner-agent-${id} --policy-document file://tuner-agent-policy\\.json`),
    );
    assert.match(
      attach,
      new RegExp(
        `aws iam attach-role-policy --role-name <ROLE_OF_THE_HOST> --policy-arn arn:aws:iam::<ACCOUNT_ID>:policy/tuner-agent-${id}`,
      ),
    );
    assert.match(attach, /aws iam attach-user-policy --user-name <IAM_USER>/);
    assert.match(attach, /aws iam create-access-key --user-name <IAM_USER> .*ACCESS_KEY_ID.*SECRET_ACCESS_KEY/);
    const yaml = YAML.parse(await text('agent-yaml')) as { managed_a: Record<string, string> };
    assert.deepEqual(Object.keys(yaml.managed_a), ['ACCESS_KEY_ID', 'SECRET_ACCESS_KEY', 'REGION', 'DATABASE_IDENTIFIER']);
    assert.deepEqual(await order(), [
      'database-sql',
      'parameter-group',
      'policy-json',
      'policy-attach',
      'agent-yaml',
      'binary-command',
      'container-command',
      'ecs-task-definition',
    ]);
  },
);

test('Cloud A cluster: the cluster parameter group and the writer\u2019s, then the same policy', { skip }, async () => {
  const id = await openSetup('managed-a-cluster');
  await assertCommon('managed-a-cluster', id);
  const group = await text('parameter-group');
  assert.match(group, /aws rds create-db-cluster-parameter-group .*tuner-<DB_CLUSTER_IDENTIFIER>/);
  assert.match(group, /aws rds modify-db-cluster .*--db-cluster-parameter-group-name tuner-<DB_CLUSTER_IDENTIFIER>/);
  assert.match(
    group,
    /aws rds modify-db-instance .*--db-instance-identifier <DATABASE_IDENTIFIER> --db-parameter-group-name tuner-<DATABASE_IDENTIFIER>/,
  );
  assert.match(group, /aws rds reboot-db-instance .*<DATABASE_IDENTIFIER>/);
  assert.equal(`${JSON.stringify(JSON.parse(await text('policy-json')), null, 2)}\n`, managedAPolicyJson());
});

test(
  'Cloud B: the allow-list and track first, then the user and the extension, the custom role, its assignment, the service principal',
  { skip },
  async () => {
    const id = await openSetup('managed-b-flex');
    await assertCommon('managed-b-flex', id);
    const params = await text('server-parameters');
    assert.match(
      params,
      /^az postgres flexible-server parameter set --resource-group <RESOURCE_GROUP_NAME> --server-name <SERVER_NAME> --name azure\.extensions --value pg_stat_statements$/m,
    );
    assert.match(
      params,
      /^az postgres flexible-server parameter set --resource-group <RESOURCE_GROUP_NAME> --server-name <SERVER_NAME> --name pg_stat_statements\.track --value top$/m,
    );
    assert.match(await noteOf('database-sql'), /psql -h <SERVER_NAME>\.postgres\.database\.azure\.com -p 5432 -U <ADMIN_USER> <DBNAME>/);

    const role = JSON.parse(await text('role-json')) as { Name: string; Actions: string[]; AssignableScopes: string[] };
    assert.deepEqual(role.Actions, [...MANAGED_B_FLEX_ROLE_ACTIONS]);
    assert.equal(role.Actions.length, 7);
    assert.deepEqual(role.AssignableScopes, ['/subscriptions/<SUBSCRIPTION_ID>/resourceGroups/<RESOURCE_GROUP_NAME>']);

    const assign = await text('role-assign');
    assert.match(assign, /^az role definition create --role-definition @tuner-agent-role\.json$/m);
    assert.match(assign, /az vm identity assign --resource-group <VM_RESOURCE_GROUP> --name <VM_NAME>/);
    assert.ok(
      assign.includes(
        `az role assignment create --assignee-object-id <PRINCIPAL_ID> --assignee-principal-type ServicePrincipal --role "${role.Name}" --scope /subscriptions/<SUBSCRIPTION_ID>/resourceGroups/<RESOURCE_GROUP_NAME>`,
      ),
      assign,
    );
    assert.match(
      assign,
      /az ad sp create-for-rbac .*--scopes \/subscriptions\/<SUBSCRIPTION_ID>\/resourceGroups\/<RESOURCE_GROUP_NAME> .*appId -> CLOUDB_CLIENT_ID, password -> CLOUDB_CLIENT_SECRET, tenant -> CLOUDB_TENANT_ID/,
    );
    const container = await text('container-command');
    for (const name of ['CLOUDB_CLIENT_ID', 'CLOUDB_CLIENT_SECRET', 'CLOUDB_TENANT_ID']) assert.match(container, new RegExp(`-e ${name}=`));
    assert.deepEqual(await order(), [
      'server-parameters',
      'database-sql',
      'role-json',
      'role-assign',
      'agent-yaml',
      'binary-command',
      'container-command',
    ]);
  },
);

test('self-hosted: preloading pg_stat_statements, then the user and the extension', { skip }, async () => {
  const id = await openSetup('local');
  await assertCommon('local', id);
  assert.match(await text('server-parameters'), /ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements';/);
  assert.match(await noteOf('database-sql'), /tuner-agent permissions --local/);
});

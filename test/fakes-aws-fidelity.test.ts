// The fake Cloud A driven through the real AWS SDK client, checked against RDS's documented
// behaviour (issue 13). Each case names the page it follows.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import {
  DescribeDBInstancesCommand,
  DescribeDBParametersCommand,
  ModifyDBParameterGroupCommand,
  RDSClient,
  RebootDBInstanceCommand,
  ResetDBParameterGroupCommand,
} from '@aws-sdk/client-rds';
import { DescribeInstanceTypesCommand, EC2Client, type _InstanceType } from '@aws-sdk/client-ec2';
import { startCluster, type Cluster } from '../src/lab/cluster.ts';
import { makeTestCa, type TestCa } from '../src/lab/tls.ts';
import { startFakeAws, type FakeAws } from './fakes/aws/index.ts';
import { until } from './helpers/until.ts';

let ca: TestCa;
let cluster: Cluster;
let fake: FakeAws;
let rds: RDSClient;
const CREDENTIALS = { accessKeyId: 'AKIAFIDELITY', secretAccessKey: 'fidelity' };

before(async () => {
  ca = makeTestCa('fake RDS fidelity CA');
  cluster = await startCluster({ tls: { ca } });
  fake = await startFakeAws({ postgres: cluster, timings: { applyDelayMs: 50, rebootDelayMs: 50 } });
  fake.cloud.addGroup({ name: 'tuner-pg', values: {} });
  await fake.cloud.addInstance({ id: 'mydb', group: 'tuner-pg', postgres: true });
  rds = new RDSClient({
    endpoint: fake.url,
    region: 'us-east-1',
    credentials: CREDENTIALS,
  });
});

after(async () => {
  rds?.destroy();
  await fake?.close();
  await cluster?.destroy();
  ca?.remove();
});

const setting = async (name: string) =>
  (await cluster.sql<{ setting: string }>('SELECT setting FROM pg_settings WHERE name = $1', [name]))[0]!.setting;
const applyStatus = async () =>
  (await rds.send(new DescribeDBInstancesCommand({ DBInstanceIdentifier: 'mydb' }))).DBInstances?.[0]?.DBParameterGroups?.[0]
    ?.ParameterApplyStatus;
const modify = (name: string, value: string, method: 'immediate' | 'pending-reboot') =>
  rds.send(
    new ModifyDBParameterGroupCommand({
      DBParameterGroupName: 'tuner-pg',
      Parameters: [{ ParameterName: name, ParameterValue: value, ApplyMethod: method }],
    }),
  );

// RDS applies a change with ApplyMethod=pending-reboot at the instance's next reboot, for a
// dynamic parameter too; until then the instance shows pending-reboot
// (https://docs.aws.amazon.com/AmazonRDS/latest/APIReference/API_Parameter.html, ApplyMethod;
// https://docs.aws.amazon.com/AmazonRDS/latest/UserGuide/USER_WorkingWithParamGroups.Modifying.html).
test('a dynamic parameter written pending-reboot takes effect at the reboot, not with an unrelated immediate change', async () => {
  const before = await setting('work_mem');
  await modify('work_mem', '8192', 'pending-reboot');
  await until('the instance shows pending-reboot', async () => (await applyStatus()) === 'pending-reboot', 10_000);
  assert.equal(await setting('work_mem'), before, 'not applied before the reboot');

  await modify('random_page_cost', '2', 'immediate');
  await until('the immediate change is applied', async () => (await setting('random_page_cost')) === '2', 10_000);
  assert.equal(await setting('work_mem'), before, 'an unrelated immediate change does not apply it');
  assert.equal(await applyStatus(), 'pending-reboot');

  await rds.send(new RebootDBInstanceCommand({ DBInstanceIdentifier: 'mydb' }));
  // The server restarts meanwhile: a refused connection is "not yet".
  const applied = async () => (await setting('work_mem').catch(() => null)) === '8192' && (await applyStatus()) === 'in-sync';
  await until('applied at the reboot', applied, 30_000);
  assert.equal(await setting('random_page_cost'), '2');
});

// EC2 DescribeInstanceTypes for the EC2 types behind DB classes: Graviton (the `g` families) has
// one thread per core, Intel two; vCPUs and memory as the instance type specifications give
// them (https://docs.aws.amazon.com/ec2/latest/instancetypes/gp.html,
// https://docs.aws.amazon.com/ec2/latest/instancetypes/mo.html,
// https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_VCpuInfo.html).
test('DescribeInstanceTypes: the common DB classes, with one thread per core on Graviton', async () => {
  const ec2 = new EC2Client({ endpoint: fake.url, region: 'us-east-1', credentials: CREDENTIALS });
  try {
    const expected: Record<string, [vcpus: number, cores: number, threads: number, mib: number]> = {
      'r6g.large': [2, 2, 1, 16 * 1024],
      'r6g.xlarge': [4, 4, 1, 32 * 1024],
      'r7g.2xlarge': [8, 8, 1, 64 * 1024],
      'm6g.medium': [1, 1, 1, 4 * 1024],
      'm7g.4xlarge': [16, 16, 1, 64 * 1024],
      't4g.micro': [2, 2, 1, 1024],
      'm5.large': [2, 1, 2, 8 * 1024],
      'm6i.32xlarge': [128, 64, 2, 512 * 1024],
      'r5.24xlarge': [96, 48, 2, 768 * 1024],
      'r6i.large': [2, 1, 2, 16 * 1024],
      't3.medium': [2, 1, 2, 4 * 1024],
      't3.2xlarge': [8, 4, 2, 32 * 1024],
    };
    const out = await ec2.send(new DescribeInstanceTypesCommand({ InstanceTypes: Object.keys(expected) as _InstanceType[] }));
    const got = Object.fromEntries(
      (out.InstanceTypes ?? []).map((t): [string, Array<number | undefined>] => [
        t.InstanceType ?? '',
        [t.VCpuInfo?.DefaultVCpus, t.VCpuInfo?.DefaultCores, t.VCpuInfo?.DefaultThreadsPerCore, t.MemoryInfo?.SizeInMiB],
      ]),
    );
    assert.deepEqual(got, expected);
    const graviton = await ec2.send(new DescribeInstanceTypesCommand({ InstanceTypes: ['m7g.large'] }));
    assert.deepEqual(graviton.InstanceTypes?.[0]?.ProcessorInfo?.SupportedArchitectures, ['arm64']);
  } finally {
    ec2.destroy();
  }
});

// Every parameter of a modify (or of a reset of named parameters) carries its ApplyMethod
// (https://docs.aws.amazon.com/AmazonRDS/latest/APIReference/API_ModifyDBParameterGroup.html,
// https://docs.aws.amazon.com/AmazonRDS/latest/APIReference/API_ResetDBParameterGroup.html);
// the error code is the fake's choice (see rds.ts).
test('a parameter without ApplyMethod is refused by ModifyDBParameterGroup and ResetDBParameterGroup, and nothing changes', async () => {
  const userValues = async () =>
    (await rds.send(new DescribeDBParametersCommand({ DBParameterGroupName: 'tuner-pg', Source: 'user' }))).Parameters?.map((p) => [
      p.ParameterName,
      p.ParameterValue,
    ]);
  const before = await userValues();
  const refused = (err: Error) => err.name === 'InvalidParameterCombination' && /apply method/i.test(err.message);
  await assert.rejects(
    rds.send(
      new ModifyDBParameterGroupCommand({
        DBParameterGroupName: 'tuner-pg',
        Parameters: [
          { ParameterName: 'random_page_cost', ParameterValue: '3', ApplyMethod: 'immediate' },
          { ParameterName: 'work_mem', ParameterValue: '4321' },
        ],
      }),
    ),
    refused,
  );
  await assert.rejects(
    rds.send(
      new ResetDBParameterGroupCommand({
        DBParameterGroupName: 'tuner-pg',
        ResetAllParameters: false,
        Parameters: [{ ParameterName: 'work_mem' }],
      }),
    ),
    refused,
  );
  assert.deepEqual(await userValues(), before);
});

// Markers are tokens RDS hands out ("a pagination token provided by a previous request",
// https://docs.aws.amazon.com/AmazonRDS/latest/APIReference/API_DescribeDBParameters.html); a
// malformed one is an invalid parameter value
// (https://docs.aws.amazon.com/AmazonRDS/latest/APIReference/CommonErrors.html), not an empty page.
test('DescribeDBParameters pages with the markers it hands out and refuses a malformed marker', async () => {
  const names: string[] = [];
  let marker: string | undefined;
  let pages = 0;
  do {
    const page = await rds.send(new DescribeDBParametersCommand({ DBParameterGroupName: 'tuner-pg', MaxRecords: 20, Marker: marker }));
    names.push(...(page.Parameters ?? []).map((p) => p.ParameterName ?? ''));
    marker = page.Marker;
    pages++;
  } while (marker);
  assert.ok(pages > 2, `${pages} pages`);
  assert.equal(new Set(names).size, names.length, 'no parameter twice');
  assert.ok(names.includes('work_mem') && names.includes('shared_buffers'));
  await assert.rejects(
    rds.send(new DescribeDBParametersCommand({ DBParameterGroupName: 'tuner-pg', Marker: 'not-a-marker' })),
    (err: Error) => err.name === 'InvalidParameterValue',
  );
});

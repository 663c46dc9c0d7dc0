// The fake Cloud A driven through the real AWS SDK client, checked against RDS's documented
// behaviour (issue 13). Each case names the page it follows.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import {
  DescribeDBClustersCommand,
  DescribeDBInstancesCommand,
  DescribeDBParametersCommand,
  ModifyDBParameterGroupCommand,
  RDSClient,
  RebootDBInstanceCommand,
  ResetDBParameterGroupCommand,
} from '@aws-sdk/client-rds';
import {
  CloudWatchClient,
  GetMetricDataCommand,
  GetMetricStatisticsCommand,
  type GetMetricStatisticsCommandInput,
} from '@aws-sdk/client-cloudwatch';
import { GetResourceMetricsCommand, PIClient } from '@aws-sdk/client-pi';
import { DescribeInstanceTypesCommand, EC2Client, type _InstanceType } from '@aws-sdk/client-ec2';
import { startCluster, type Cluster } from '../src/lab/cluster.ts';
import { makeTestCa, type TestCa } from '../src/lab/tls.ts';
import { policyDocument } from '../src/agent/targets/managed-a/permissions.ts';
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
  await until('pending-reboot again once it is applied', async () => (await applyStatus()) === 'pending-reboot', 10_000);
  assert.equal(await setting('work_mem'), before);

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

// ---- CloudWatch and Performance Insights ------------------------------------------------------

const MINUTE = 60_000;
/** A past half hour on whole hours: its one-minute samples are all there, whatever the time now. */
const pastHalfHour = () => {
  const start = Math.floor((Date.now() - 2 * 60 * MINUTE) / (60 * MINUTE)) * 60 * MINUTE;
  return { StartTime: new Date(start), EndTime: new Date(start + 30 * MINUTE), start };
};
const cpuOf = (id: string) => ({
  Namespace: 'AWS/RDS',
  MetricName: 'CPUUtilization',
  Dimensions: [{ Name: 'DBInstanceIdentifier', Value: id }],
});

// GetMetricData takes the window [StartTime, EndTime), each query's Period (1, 5, 10, 20, 30 or
// a multiple of 60) and Stat, newest first by default
// (https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_GetMetricData.html,
// https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_MetricStat.html).
test('GetMetricData honours the window, the period and the statistic, and refuses a period CloudWatch does not take', async () => {
  const cloudwatch = new CloudWatchClient({ endpoint: fake.url, region: 'us-east-1', credentials: CREDENTIALS });
  try {
    const { StartTime, EndTime, start } = pastHalfHour();
    const query = (Id: string, Stat: string, Period: number) => ({ Id, MetricStat: { Metric: cpuOf('mydb'), Period, Stat } });
    const out = await cloudwatch.send(
      new GetMetricDataCommand({
        StartTime,
        EndTime,
        MetricDataQueries: [query('count', 'SampleCount', 300), query('max', 'Maximum', 300), query('min', 'Minimum', 300)],
      }),
    );
    const result = (id: string) => out.MetricDataResults!.find((r) => r.Id === id)!;
    const fiveMinutes = [25, 20, 15, 10, 5, 0].map((m) => start + m * MINUTE);
    assert.deepEqual(
      result('count').Timestamps?.map((t) => t.getTime()),
      fiveMinutes,
      'one point per five minutes of the window, newest first',
    );
    assert.deepEqual(result('count').Values, [5, 5, 5, 5, 5, 5], 'five one-minute samples in each');
    assert.deepEqual(result('max').Values, Array(6).fill(12.5));
    assert.ok(result('min').Values!.every((v) => v < 12.5));

    const latest = await cloudwatch.send(
      new GetMetricDataCommand({
        StartTime: new Date(Date.now() - 10 * MINUTE),
        EndTime: new Date(),
        ScanBy: 'TimestampAscending',
        MetricDataQueries: [query('cpu', 'Average', 60)],
      }),
    );
    const cpu = latest.MetricDataResults![0]!;
    assert.ok(cpu.Values!.length >= 9 && cpu.Values!.length <= 10, `${cpu.Values!.length} one-minute points in ten minutes`);
    assert.equal(cpu.Values!.at(-1), 12.5, 'ascending: the newest last');

    for (const Period of [45, 0, 90]) {
      await assert.rejects(
        cloudwatch.send(new GetMetricDataCommand({ StartTime, EndTime, MetricDataQueries: [query('cpu', 'Average', Period)] })),
        (err: Error) => err.name === 'InvalidParameterValueException',
        `Period ${Period}`,
      );
    }
  } finally {
    cloudwatch.destroy();
  }
});

// GetMetricStatistics: Statistics or ExtendedStatistics (not both), at most 1,440 data points, the
// data points in no particular order
// (https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_GetMetricStatistics.html).
test('GetMetricStatistics is served with its documented checks: one of Statistics or ExtendedStatistics, at most 1,440 data points', async () => {
  const cloudwatch = new CloudWatchClient({ endpoint: fake.url, region: 'us-east-1', credentials: CREDENTIALS });
  try {
    const { StartTime, EndTime, start } = pastHalfHour();
    const out = await cloudwatch.send(
      new GetMetricStatisticsCommand({ ...cpuOf('mydb'), StartTime, EndTime, Period: 600, Statistics: ['SampleCount', 'Maximum'] }),
    );
    assert.equal(out.Label, 'CPUUtilization');
    const points = [...(out.Datapoints ?? [])].sort((a, b) => a.Timestamp!.getTime() - b.Timestamp!.getTime());
    assert.deepEqual(
      points.map((p) => [p.Timestamp!.getTime() - start, p.SampleCount, p.Maximum, p.Unit]),
      [0, 10, 20].map((m) => [m * MINUTE, 10, 12.5, 'Percent']),
    );
    const p50 = await cloudwatch.send(
      new GetMetricStatisticsCommand({ ...cpuOf('mydb'), StartTime, EndTime, Period: 1800, ExtendedStatistics: ['p50'] }),
    );
    assert.equal(p50.Datapoints?.length, 1);
    assert.ok([12.5, 11.25].includes(p50.Datapoints[0]!.ExtendedStatistics!['p50']!));

    const refused = async (input: Partial<GetMetricStatisticsCommandInput>, name: string) =>
      assert.rejects(
        cloudwatch.send(
          new GetMetricStatisticsCommand({ ...cpuOf('mydb'), StartTime, EndTime, Period: 60, Statistics: ['Average'], ...input }),
        ),
        (err: Error) => err.name === name,
      );
    await refused({ StartTime: new Date(EndTime.getTime() - 1441 * MINUTE) }, 'InvalidParameterCombinationException');
    await refused({ ExtendedStatistics: ['p99'] }, 'InvalidParameterCombinationException');
    await refused({ Statistics: undefined }, 'MissingRequiredParameterException');
    await refused({ Period: 61 }, 'InvalidParameterValueException');
    await refused({ StartTime: EndTime, EndTime: StartTime }, 'InvalidParameterValueException');
    // 1,440 one-minute points exactly is allowed.
    await cloudwatch.send(
      new GetMetricStatisticsCommand({
        ...cpuOf('mydb'),
        StartTime: new Date(EndTime.getTime() - 1440 * MINUTE),
        EndTime,
        Period: 60,
        Statistics: ['Average'],
      }),
    );
  } finally {
    cloudwatch.destroy();
  }
});

// GetResourceMetrics: PeriodInSeconds is 1, 60, 300, 3600 or 86400; an invalid argument is an
// InvalidArgumentException
// (https://docs.aws.amazon.com/performance-insights/latest/APIReference/API_GetResourceMetrics.html).
test('Performance Insights takes only the documented periods, and answers points over the window', async () => {
  fake.cloud.addGroup({ name: 'tuner-pi' });
  const instance = await fake.cloud.addInstance({ id: 'pi-db', group: 'tuner-pi', performanceInsights: true });
  const pi = new PIClient({ endpoint: fake.url, region: 'us-east-1', credentials: CREDENTIALS });
  try {
    const { StartTime, EndTime, start } = pastHalfHour();
    const ask = (PeriodInSeconds: number) =>
      pi.send(
        new GetResourceMetricsCommand({
          ServiceType: 'RDS',
          Identifier: instance.resourceId,
          StartTime,
          EndTime,
          PeriodInSeconds,
          MetricQueries: [{ Metric: 'db.load.avg' }],
        }),
      );
    const out = await ask(300);
    assert.deepEqual(
      out.MetricList?.[0]?.DataPoints?.map((p) => p.Timestamp!.getTime() - start),
      [0, 5, 10, 15, 20, 25].map((m) => m * MINUTE),
    );
    for (const period of [120, 30, 0]) {
      await assert.rejects(ask(period), (err: Error) => err.name === 'InvalidArgumentException', `PeriodInSeconds ${period}`);
    }
  } finally {
    pi.destroy();
  }
});

// A body that is not JSON is a 400 SerializationException, in JSON, as the awsJson1_1 protocol
// of Performance Insights answers errors (https://smithy.io/2.0/aws/protocols/aws-json-1_1-protocol.html).
test('Performance Insights: a malformed body is a 400 JSON SerializationException', async () => {
  const response = await fetch(fake.url, {
    method: 'POST',
    headers: {
      'content-type': 'application/x-amz-json-1.1',
      'x-amz-target': 'PerformanceInsightsv20180227.GetResourceMetrics',
      'x-amz-date': '20260101T000000Z',
      authorization: `AWS4-HMAC-SHA256 Credential=${CREDENTIALS.accessKeyId}/20260101/us-east-1/pi/aws4_request, SignedHeaders=host, Signature=00`,
    },
    body: '{"ServiceType": "RDS", "Identifier": ',
  });
  assert.equal(response.status, 400);
  assert.match(response.headers.get('content-type') ?? '', /^application\/x-amz-json-1\.1/);
  assert.equal(response.headers.get('x-amzn-errortype'), 'SerializationException');
  const error = (await response.json()) as { __type?: string };
  assert.equal(error.__type, 'SerializationException');
});

// Right after a change RDS still shows the old ParameterApplyStatus for a moment, then
// `applying`, then `in-sync` once the value runs (the statuses of
// https://docs.aws.amazon.com/AmazonRDS/latest/APIReference/API_DBParameterGroupStatus.html): a
// client that takes the first in-sync for done reads the old value.
test('after a change the old in-sync shows for a moment, then applying, then in-sync with the value running', async () => {
  assert.ok(fake.cloud.timings.statusLagMs > 0, 'the fake lags by default');
  const before = await setting('random_page_cost');
  await modify('random_page_cost', '3.5', 'immediate');
  assert.equal(await applyStatus(), 'in-sync', 'the old status first');
  assert.equal(await setting('random_page_cost'), before, 'and the old value with it');
  await until('applying', async () => (await applyStatus()) === 'applying', 10_000, 10);
  await until('in-sync again', async () => (await applyStatus()) === 'in-sync', 10_000, 10);
  assert.equal(await setting('random_page_cost'), '3.5');
});

// IAM refuses an action no statement of the caller's policy allows, each service in its own
// protocol: RDS's query XML and CloudWatch's query-compatible JSON `AccessDenied` (403), EC2's
// `UnauthorizedOperation`, Performance Insights' `AccessDeniedException`; the message names the
// action (https://docs.aws.amazon.com/IAM/latest/UserGuide/troubleshoot_access-denied.html).
test("a fake started with the spec's policy refuses every other action as IAM does, and allows the spec's", async () => {
  const strict = await startFakeAws({ postgres: cluster, policy: policyDocument() });
  strict.cloud.addGroup({ name: 'tuner-pg' });
  await strict.cloud.addInstance({ id: 'mydb', group: 'tuner-pg' });
  const client = { endpoint: strict.url, region: 'us-east-1', credentials: CREDENTIALS };
  const rdsStrict = new RDSClient(client);
  const cloudwatch = new CloudWatchClient(client);
  try {
    const denied = (action: string, code: string) => (err: Error & { $metadata?: { httpStatusCode?: number } }) => {
      assert.equal(err.name, code);
      assert.equal(err.$metadata?.httpStatusCode, 403);
      assert.match(
        err.message,
        new RegExp(`not authorized to perform: ${action} on resource: \\* because no identity-based policy allows the ${action} action`),
      );
      return true;
    };
    await assert.rejects(
      rdsStrict.send(new DescribeDBParametersCommand({ DBParameterGroupName: 'tuner-pg' })),
      denied('rds:DescribeDBParameters', 'AccessDenied'),
    );
    await assert.rejects(rdsStrict.send(new DescribeDBClustersCommand({})), denied('rds:DescribeDBClusters', 'AccessDenied'));
    const { StartTime, EndTime } = pastHalfHour();
    await assert.rejects(
      cloudwatch.send(
        new GetMetricDataCommand({
          StartTime,
          EndTime,
          MetricDataQueries: [{ Id: 'm0', MetricStat: { Metric: cpuOf('mydb'), Period: 60, Stat: 'Average' } }],
        }),
      ),
      denied('cloudwatch:GetMetricData', 'AccessDenied'),
    );
    // What the spec's policy names goes through.
    assert.equal((await rdsStrict.send(new DescribeDBInstancesCommand({ DBInstanceIdentifier: 'mydb' }))).DBInstances?.length, 1);
    const stats = await cloudwatch.send(
      new GetMetricStatisticsCommand({ ...cpuOf('mydb'), StartTime, EndTime, Period: 60, Statistics: ['Average'] }),
    );
    assert.ok((stats.Datapoints ?? []).length > 0);
    assert.deepEqual(
      strict.calls.map((c) => [c.action, c.error ?? 'ok']),
      [
        ['rds:DescribeDBParameters', 'AccessDenied'],
        ['rds:DescribeDBClusters', 'AccessDenied'],
        ['cloudwatch:GetMetricData', 'AccessDenied'],
        ['rds:DescribeDBInstances', 'ok'],
        ['cloudwatch:GetMetricStatistics', 'ok'],
      ],
    );
  } finally {
    rdsStrict.destroy();
    cloudwatch.destroy();
    await strict.close();
  }

  // A policy without EC2 and Performance Insights: their own refusals.
  const narrow = await startFakeAws({
    postgres: cluster,
    policy: { Statement: [{ Effect: 'Allow', Action: ['rds:Describe*'] }] },
  });
  const ec2 = new EC2Client({ endpoint: narrow.url, region: 'us-east-1', credentials: CREDENTIALS });
  const pi = new PIClient({ endpoint: narrow.url, region: 'us-east-1', credentials: CREDENTIALS });
  const rdsNarrow = new RDSClient({ endpoint: narrow.url, region: 'us-east-1', credentials: CREDENTIALS });
  try {
    await assert.rejects(ec2.send(new DescribeInstanceTypesCommand({ InstanceTypes: ['m5.large'] })), (err: Error) => {
      assert.equal(err.name, 'UnauthorizedOperation');
      assert.match(err.message, /^You are not authorized to perform this operation\. User: .* ec2:DescribeInstanceTypes/);
      return true;
    });
    const { StartTime, EndTime } = pastHalfHour();
    await assert.rejects(
      pi.send(
        new GetResourceMetricsCommand({
          ServiceType: 'RDS',
          Identifier: 'db-X',
          StartTime,
          EndTime,
          PeriodInSeconds: 60,
          MetricQueries: [{ Metric: 'db.load.avg' }],
        }),
      ),
      (err: Error) => err.name === 'AccessDeniedException' && /pi:GetResourceMetrics/.test(err.message),
    );
    // rds:Describe* allows every describe, and nothing else.
    await rdsNarrow.send(new DescribeDBClustersCommand({}));
    await assert.rejects(
      rdsNarrow.send(new RebootDBInstanceCommand({ DBInstanceIdentifier: 'mydb' })),
      (err: Error) => err.name === 'AccessDenied',
    );
  } finally {
    ec2.destroy();
    pi.destroy();
    rdsNarrow.destroy();
    await narrow.close();
  }
});

// DescribeDBInstances takes Filters, e.g. db-cluster-id for the members of a cluster
// (https://docs.aws.amazon.com/AmazonRDS/latest/APIReference/API_DescribeDBInstances.html).
test('DescribeDBInstances with a db-cluster-id filter lists the members of that cluster only', async () => {
  fake.cloud.addGroup({ name: 'aurora-fid', aurora: true });
  fake.cloud.addGroup({ name: 'aurora-fid-cluster', kind: 'cluster' });
  await fake.cloud.addInstance({ id: 'fid-a', group: 'aurora-fid', clusterId: 'fid-1', instanceClass: 'db.r6g.large' });
  await fake.cloud.addInstance({ id: 'fid-b', group: 'aurora-fid', clusterId: 'fid-1', instanceClass: 'db.r6g.large' });
  await fake.cloud.addCluster({ id: 'fid-1', group: 'aurora-fid-cluster', members: ['fid-a', 'fid-b'], writer: 'fid-a', postgres: false });
  const ids = async (Filters: Array<{ Name: string; Values: string[] }>) =>
    ((await rds.send(new DescribeDBInstancesCommand({ Filters }))).DBInstances ?? []).map((i) => i.DBInstanceIdentifier).sort();
  assert.deepEqual(await ids([{ Name: 'db-cluster-id', Values: ['fid-1'] }]), ['fid-a', 'fid-b']);
  assert.deepEqual(await ids([{ Name: 'db-cluster-id', Values: ['arn:aws:rds:us-east-1:123456789012:cluster:fid-1'] }]), [
    'fid-a',
    'fid-b',
  ]);
  assert.deepEqual(await ids([{ Name: 'db-instance-id', Values: ['mydb', 'fid-b'] }]), ['fid-b', 'mydb']);
  assert.deepEqual(await ids([{ Name: 'db-cluster-id', Values: ['no-such-cluster'] }]), []);
  await assert.rejects(
    rds.send(new DescribeDBInstancesCommand({ Filters: [{ Name: 'colour', Values: ['blue'] }] })),
    (err: Error) => err.name === 'InvalidParameterValue',
  );
});

// RebootDBInstance answers with the instance already `rebooting`
// (https://docs.aws.amazon.com/AmazonRDS/latest/APIReference/API_RebootDBInstance.html).
test('RebootDBInstance answers the instance as rebooting', async () => {
  await until('mydb available', () => Promise.resolve(fake.cloud.instance('mydb').status === 'available'), 10_000);
  const out = await rds.send(new RebootDBInstanceCommand({ DBInstanceIdentifier: 'mydb' }));
  assert.equal(out.DBInstance?.DBInstanceStatus, 'rebooting');
  await until('mydb available again', () => Promise.resolve(fake.cloud.instance('mydb').status === 'available'), 30_000);
  await fake.cloud.settle();
});

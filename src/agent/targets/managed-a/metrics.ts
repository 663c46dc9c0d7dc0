// Machine metrics of the instance: CloudWatch (AWS/RDS, one GetMetricData call for every series,
// or, when the policy has only the spec's GetMetricStatistics, one call per series) and, when it is on, Performance Insights. The latest point of each series over the last few
// minutes becomes `cloudwatch:<Name>` / `pi:<metric>`, plus the canonical names the guardrails
// read. A source that fails is left out (and said once), never fatal.
import { GetMetricDataCommand, GetMetricStatisticsCommand, type CloudWatchClient } from '@aws-sdk/client-cloudwatch';
import { GetResourceMetricsCommand, type PIClient } from '@aws-sdk/client-pi';
import type { TargetMetric } from '../../../protocol/v1.ts';
import { errorMessage, type Logger } from '../../base/log.ts';
import { awsCall } from './aws.ts';
import type { Capabilities } from './capabilities.ts';
import type { InstanceFacts } from './topology.ts';

/** CloudWatch's AWS/RDS series the agent reads, with their units. */
export const CLOUDWATCH_METRICS = {
  CPUUtilization: 'percent',
  FreeableMemory: 'bytes',
  SwapUsage: 'bytes',
  ReadIOPS: 'count/s',
  WriteIOPS: 'count/s',
  ReadLatency: 'seconds',
  WriteLatency: 'seconds',
  DiskQueueDepth: 'count',
  DatabaseConnections: 'count',
} as const;

/** Performance Insights metrics: database load, and OS memory (Enhanced Monitoring reports kB). */
export const PI_METRICS = {
  'db.load.avg': 'sessions',
  'os.memory.free.avg': 'kB',
  'os.memory.total.avg': 'kB',
  'os.cpuUtilization.total.avg': 'percent',
} as const;

/** Recent enough to describe now, long enough to hold a point of one-minute metrics. */
const WINDOW_MS = 10 * 60_000;
const PERIOD_SECONDS = 60;

export class MetricsReader {
  readonly #cloudwatch: CloudWatchClient;
  readonly #pi: PIClient;
  readonly #log: Logger;
  readonly #caps: Capabilities;
  readonly #warned = new Set<string>();

  constructor(cloudwatch: CloudWatchClient, pi: PIClient, log: Logger, caps: Capabilities) {
    this.#cloudwatch = cloudwatch;
    this.#pi = pi;
    this.#log = log;
    this.#caps = caps;
  }

  /** The CloudWatch action the reader uses now. */
  get cloudwatchAction(): 'cloudwatch:GetMetricData' | 'cloudwatch:GetMetricStatistics' {
    return this.#caps.allows('cloudwatch:GetMetricData') ? 'cloudwatch:GetMetricData' : 'cloudwatch:GetMetricStatistics';
  }

  async read(instance: InstanceFacts, memoryTotalBytes: number | undefined): Promise<TargetMetric[]> {
    const [cloudwatch, pi] = await Promise.all([
      this.cloudwatch(instance).catch((err: unknown) => this.#skip('cloudwatch', err)),
      instance.performanceInsights && instance.resourceId
        ? this.performanceInsights(instance.resourceId).catch((err: unknown) => this.#skip('pi', err))
        : Promise.resolve([]),
    ]);
    const canonical: TargetMetric[] = [];
    const free = cloudwatch.find((m) => m.name === 'cloudwatch:FreeableMemory');
    if (free) canonical.push({ ...free, name: 'memory_available_bytes' });
    const cpu = cloudwatch.find((m) => m.name === 'cloudwatch:CPUUtilization');
    if (cpu) canonical.push({ ...cpu, name: 'cpu_percent' });
    if (memoryTotalBytes !== undefined) {
      canonical.push({ name: 'memory_total_bytes', value: memoryTotalBytes, unit: 'bytes', at: new Date().toISOString(), source: 'ec2' });
    }
    return [...canonical, ...cloudwatch, ...pi];
  }

  /** The latest point of each CloudWatch series. */
  cloudwatch(instance: InstanceFacts): Promise<TargetMetric[]> {
    return this.#caps.use(
      'cloudwatch:GetMetricData',
      () => this.#metricData(instance),
      () => this.#metricStatistics(instance),
    );
  }

  /** All series in one GetMetricData call (newest first). */
  async #metricData(instance: InstanceFacts): Promise<TargetMetric[]> {
    const end = new Date();
    const names = Object.keys(CLOUDWATCH_METRICS) as Array<keyof typeof CLOUDWATCH_METRICS>;
    const out = await this.#cloudwatch.send(
      new GetMetricDataCommand({
        StartTime: new Date(end.getTime() - WINDOW_MS),
        EndTime: end,
        ScanBy: 'TimestampDescending',
        MetricDataQueries: names.map((name, i) => ({
          Id: `m${i}`,
          ReturnData: true,
          MetricStat: {
            Metric: { Namespace: 'AWS/RDS', MetricName: name, Dimensions: [{ Name: 'DBInstanceIdentifier', Value: instance.id }] },
            Period: PERIOD_SECONDS,
            Stat: 'Average',
          },
        })),
      }),
    );
    const metrics: TargetMetric[] = [];
    for (const result of out.MetricDataResults ?? []) {
      const name = names[Number(result.Id?.slice(1))];
      const latest = latestPoint(result.Timestamps, result.Values);
      if (name && latest)
        metrics.push({
          name: `cloudwatch:${name}`,
          value: latest.value,
          unit: CLOUDWATCH_METRICS[name],
          at: latest.at,
          source: 'cloudwatch',
        });
    }
    return metrics;
  }

  /** The spec's action: one GetMetricStatistics call per series, the same window and period. */
  async #metricStatistics(instance: InstanceFacts): Promise<TargetMetric[]> {
    const end = new Date();
    const names = Object.keys(CLOUDWATCH_METRICS) as Array<keyof typeof CLOUDWATCH_METRICS>;
    const series = await Promise.all(
      names.map(async (name) => {
        const out = await awsCall('cloudwatch:GetMetricStatistics', () =>
          this.#cloudwatch.send(
            new GetMetricStatisticsCommand({
              Namespace: 'AWS/RDS',
              MetricName: name,
              Dimensions: [{ Name: 'DBInstanceIdentifier', Value: instance.id }],
              StartTime: new Date(end.getTime() - WINDOW_MS),
              EndTime: end,
              Period: PERIOD_SECONDS,
              Statistics: ['Average'],
            }),
          ),
        );
        const points = (out.Datapoints ?? []).filter((p) => p.Timestamp !== undefined && typeof p.Average === 'number');
        const latest = latestPoint(
          points.map((p) => p.Timestamp!),
          points.map((p) => p.Average!),
        );
        return latest
          ? [{ name: `cloudwatch:${name}`, value: latest.value, unit: CLOUDWATCH_METRICS[name], at: latest.at, source: 'cloudwatch' }]
          : [];
      }),
    );
    return series.flat();
  }

  async performanceInsights(resourceId: string): Promise<TargetMetric[]> {
    const end = new Date();
    const names = Object.keys(PI_METRICS) as Array<keyof typeof PI_METRICS>;
    const out = await awsCall('pi:GetResourceMetrics', () =>
      this.#pi.send(
        new GetResourceMetricsCommand({
          ServiceType: 'RDS',
          Identifier: resourceId,
          StartTime: new Date(end.getTime() - WINDOW_MS),
          EndTime: end,
          PeriodInSeconds: PERIOD_SECONDS,
          MetricQueries: names.map((Metric) => ({ Metric })),
        }),
      ),
    );
    const metrics: TargetMetric[] = [];
    for (const series of out.MetricList ?? []) {
      const name = names.find((n) => n === series.Key?.Metric);
      const points = (series.DataPoints ?? []).filter((p) => p.Timestamp !== undefined && typeof p.Value === 'number');
      const latest = latestPoint(
        points.map((p) => p.Timestamp!),
        points.map((p) => p.Value!),
      );
      if (name && latest)
        metrics.push({ name: `pi:${name}`, value: latest.value, unit: PI_METRICS[name], at: latest.at, source: 'performance-insights' });
    }
    return metrics;
  }

  #skip(source: string, err: unknown): TargetMetric[] {
    const message = errorMessage(err);
    if (!this.#warned.has(source)) {
      this.#warned.add(source);
      this.#log.warn(`metrics from ${source} are left out: ${message}`);
    } else {
      this.#log.debug(`metrics from ${source} are left out: ${message}`);
    }
    return [];
  }
}

function latestPoint(timestamps: readonly Date[] | undefined, values: readonly number[] | undefined): { at: string; value: number } | null {
  let best: { at: Date; value: number } | null = null;
  for (const [i, at] of (timestamps ?? []).entries()) {
    const value = values?.[i];
    if (value === undefined || !Number.isFinite(value)) continue;
    if (!best || at.getTime() > best.at.getTime()) best = { at, value };
  }
  return best && { at: best.at.toISOString(), value: best.value };
}

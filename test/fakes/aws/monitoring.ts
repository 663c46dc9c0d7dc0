// CloudWatch GetMetricData (AWS/RDS series of the fake's instances) and Performance Insights
// GetResourceMetrics (instances with Performance Insights on), as plain objects for the RPC wire.
import { z } from 'zod';
import { FakeAwsError, type FakeCloud } from './cloud.ts';
import { timestamp } from './wire-json.ts';

const MetricDataQuery = z.object({
  Id: z.string().regex(/^[a-z][a-zA-Z0-9_]*$/),
  MetricStat: z.object({
    Metric: z.object({
      Namespace: z.string(),
      MetricName: z.string(),
      Dimensions: z.array(z.object({ Name: z.string(), Value: z.string() })).optional(),
    }),
    Period: z.number().int().positive(),
    Stat: z.string(),
  }),
  ReturnData: z.boolean().optional(),
});
const GetMetricDataInput = z.object({
  MetricDataQueries: z.array(MetricDataQuery).min(1).max(500),
  StartTime: z.unknown(),
  EndTime: z.unknown(),
  ScanBy: z.string().optional(),
});

const GetResourceMetricsInput = z.object({
  ServiceType: z.literal('RDS'),
  Identifier: z.string(),
  MetricQueries: z.array(z.object({ Metric: z.string() })).min(1),
  StartTime: z.unknown(),
  EndTime: z.unknown(),
  PeriodInSeconds: z.number().int().optional(),
});

/** Two one-minute points per series, newest first, ending a minute before `end`. */
function points(end: Date, value: number): { Timestamps: Date[]; Values: number[] } {
  const t = Math.floor(end.getTime() / 60_000) * 60_000;
  return { Timestamps: [new Date(t - 60_000), new Date(t - 120_000)], Values: [value, value * 0.9] };
}

function window(input: { StartTime: unknown; EndTime: unknown }): { start: Date; end: Date } {
  const start = timestamp(input.StartTime);
  const end = timestamp(input.EndTime);
  if (!start || !end || start >= end) throw new FakeAwsError('InvalidParameterValue', 'StartTime must be before EndTime.');
  return { start, end };
}

export function handleCloudWatch(cloud: FakeCloud, operation: string, body: unknown): object {
  if (operation !== 'GetMetricData') throw new FakeAwsError('UnknownOperationException', `Unknown operation ${operation}`);
  const parsed = GetMetricDataInput.safeParse(body);
  if (!parsed.success)
    throw new FakeAwsError('ValidationError', parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; '));
  const { end } = window(parsed.data);
  return {
    MetricDataResults: parsed.data.MetricDataQueries.map((q) => {
      const metric = q.MetricStat.Metric;
      const id = metric.Dimensions?.find((d) => d.Name === 'DBInstanceIdentifier')?.Value;
      const value = cloud.metricValues.get(metric.MetricName);
      const known = metric.Namespace === 'AWS/RDS' && id !== undefined && cloud.instances.has(id) && value !== undefined;
      return {
        Id: q.Id,
        Label: metric.MetricName,
        StatusCode: 'Complete',
        ...(known ? points(end, value) : { Timestamps: [], Values: [] }),
      };
    }),
    Messages: [],
  };
}

const PI_VALUES: Readonly<Record<string, number>> = {
  'db.load.avg': 1.25,
  'os.memory.free.avg': 2_500_000,
  'os.memory.total.avg': 8_000_000,
  'os.cpuUtilization.total.avg': 14,
};

export function handlePerformanceInsights(cloud: FakeCloud, operation: string, body: unknown): object {
  if (operation !== 'GetResourceMetrics') throw new FakeAwsError('UnknownOperationException', `Unknown operation ${operation}`);
  const parsed = GetResourceMetricsInput.safeParse(body);
  if (!parsed.success)
    throw new FakeAwsError('InvalidArgumentException', parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; '));
  const instance = [...cloud.instances.values()].find((i) => i.resourceId === parsed.data.Identifier && i.performanceInsights);
  if (!instance) throw new FakeAwsError('InvalidArgumentException', `No Performance Insights data for ${parsed.data.Identifier}`);
  const { start, end } = window(parsed.data);
  return {
    AlignedStartTime: start,
    AlignedEndTime: end,
    Identifier: instance.resourceId,
    MetricList: parsed.data.MetricQueries.map(({ Metric }) => {
      const value = PI_VALUES[Metric];
      const p = value === undefined ? null : points(end, value);
      return { Key: { Metric }, DataPoints: p ? p.Timestamps.map((Timestamp, i) => ({ Timestamp, Value: p.Values[i] })) : [] };
    }),
  };
}

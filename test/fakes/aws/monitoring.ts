// CloudWatch GetMetricData and GetMetricStatistics (AWS/RDS series of the fake's instances) and
// Performance Insights GetResourceMetrics (instances with Performance Insights on), as plain
// objects for the RPC wire. Each series is a one-minute sample per minute, as RDS publishes
// its CloudWatch metrics; the calls aggregate the samples of their window into their period
// with their statistic, and refuse what the services refuse.
import { z } from 'zod';
import { FakeAwsError, type FakeCloud } from './cloud.ts';
import { timestamp } from './wire-json.ts';

const SECOND = 1000;
const MINUTE = 60 * SECOND;
/** One-minute data points are kept 15 days
 * (https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_GetMetricStatistics.html). */
const RETENTION_MS = 15 * 24 * 60 * MINUTE;

/** The units of the AWS/RDS series (https://docs.aws.amazon.com/AmazonRDS/latest/UserGuide/rds-metrics.html). */
const RDS_UNITS: Readonly<Record<string, string>> = {
  CPUUtilization: 'Percent',
  FreeableMemory: 'Bytes',
  SwapUsage: 'Bytes',
  ReadIOPS: 'Count/Second',
  WriteIOPS: 'Count/Second',
  ReadLatency: 'Seconds',
  WriteLatency: 'Seconds',
  DiskQueueDepth: 'Count',
  DatabaseConnections: 'Count',
};

interface Sample {
  at: number;
  value: number;
}

/**
 * The one-minute samples of a series in [from, to): the newest is the minute before the current
 * one, and holds the value the test set; older ones alternate with 90 % of it, so that the
 * statistics of a period of several samples differ from each other.
 */
function samples(value: number, from: number, to: number, now: number): Sample[] {
  const newest = Math.floor(now / MINUTE) * MINUTE - MINUTE;
  const out: Sample[] = [];
  for (let at = Math.ceil(Math.max(from, now - RETENTION_MS) / MINUTE) * MINUTE; at < to && at <= newest; at += MINUTE) {
    out.push({ at, value: ((newest - at) / MINUTE) % 2 === 0 ? value : value * 0.9 });
  }
  return out;
}

/** The samples grouped into periods that start at `start`, oldest first. */
function periods(all: readonly Sample[], start: number, periodSeconds: number): Array<{ at: number; values: number[] }> {
  const length = periodSeconds * SECOND;
  const groups = new Map<number, number[]>();
  for (const s of all) {
    const at = start + Math.floor((s.at - start) / length) * length;
    groups.set(at, [...(groups.get(at) ?? []), s.value]);
  }
  return [...groups.entries()].sort(([a], [b]) => a - b).map(([at, values]) => ({ at, values }));
}

const STATISTICS = ['SampleCount', 'Average', 'Sum', 'Minimum', 'Maximum'] as const;
const PERCENTILE = /^p(\d{1,2}(?:\.\d{1,2})?|100)$/;
const isStatistic = (stat: string) => (STATISTICS as readonly string[]).includes(stat) || PERCENTILE.test(stat);

/** A statistic of one period (https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/Statistics-definitions.html),
 * percentiles by nearest rank. */
function statistic(stat: string, values: readonly number[]): number {
  const sum = values.reduce((a, b) => a + b, 0);
  switch (stat) {
    case 'SampleCount':
      return values.length;
    case 'Sum':
      return sum;
    case 'Average':
      return sum / values.length;
    case 'Minimum':
      return Math.min(...values);
    case 'Maximum':
      return Math.max(...values);
  }
  const rank = Number(PERCENTILE.exec(stat)?.[1] ?? 100) / 100;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.max(0, Math.ceil(rank * sorted.length) - 1)]!;
}

/**
 * A period is 1, 5, 10, 20, 30 (high resolution) or a multiple of 60 seconds
 * (https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_MetricStat.html, Period).
 */
function checkPeriod(period: number, field: string): void {
  if (!Number.isInteger(period) || period < 1 || (period % 60 !== 0 && ![1, 5, 10, 20, 30].includes(period))) {
    throw new FakeAwsError(
      'InvalidParameterValue',
      `The parameter ${field} must be 1, 5, 10, 20, 30 or a multiple of 60 seconds; ${period} is not.`,
    );
  }
}

/**
 * The start of the window as CloudWatch takes it: rounded down to the whole minute, or to the
 * 5, 10, 20 or 30 seconds of a high-resolution period
 * (https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_GetMetricData.html, StartTime).
 */
const roundedStart = (start: Date, period: number) => {
  const unit = (period < 60 ? period : 60) * SECOND;
  return Math.floor(start.getTime() / unit) * unit;
};

const Dimension = z.object({ Name: z.string(), Value: z.string() });
type Metric = { Namespace: string; MetricName: string; Dimensions?: Array<z.infer<typeof Dimension>> | undefined };

/** The configured value of an AWS/RDS series of a known instance, or undefined (no data). */
function seriesValue(cloud: FakeCloud, metric: Metric, unit: string | undefined): number | undefined {
  const id = metric.Dimensions?.find((d) => d.Name === 'DBInstanceIdentifier')?.Value;
  if (metric.Namespace !== 'AWS/RDS' || id === undefined || !cloud.instances.has(id)) return undefined;
  // A unit other than the series' own matches no data.
  if (unit !== undefined && unit !== RDS_UNITS[metric.MetricName]) return undefined;
  return cloud.metricValues.get(metric.MetricName);
}

function window(input: { StartTime: unknown; EndTime: unknown }, code: string): { start: Date; end: Date } {
  const start = timestamp(input.StartTime);
  const end = timestamp(input.EndTime);
  if (!start || !end) throw new FakeAwsError(code, 'StartTime and EndTime must be timestamps.');
  if (start.getTime() === end.getTime()) throw new FakeAwsError(code, 'The parameter StartTime must not equal parameter EndTime.');
  if (start > end) throw new FakeAwsError(code, 'The parameter StartTime must be less than the parameter EndTime.');
  return { start, end };
}

/** Zod's complaint about a request, as one line. */
const issues = (error: z.ZodError) => error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');

// ---- CloudWatch GetMetricData ----------------------------------------------------------------

const MetricDataQuery = z.object({
  Id: z.string().regex(/^[a-z][a-zA-Z0-9_]*$/),
  Label: z.string().optional(),
  MetricStat: z.object({
    Metric: z.object({ Namespace: z.string(), MetricName: z.string(), Dimensions: z.array(Dimension).optional() }),
    Period: z.number(),
    Stat: z.string(),
    Unit: z.string().optional(),
  }),
  ReturnData: z.boolean().optional(),
});
const GetMetricDataInput = z.object({
  MetricDataQueries: z.array(MetricDataQuery).min(1).max(500),
  StartTime: z.unknown(),
  EndTime: z.unknown(),
  ScanBy: z.enum(['TimestampDescending', 'TimestampAscending']).optional(),
});

/**
 * GetMetricData (https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_GetMetricData.html):
 * the window [StartTime, EndTime), each query's Period and Stat; newest first unless ScanBy says
 * otherwise; queries with ReturnData false are left out. StartTime equal to or after EndTime is
 * a ValidationError, as CloudWatch answers it ("The parameter StartTime must not equal parameter
 * EndTime", quoted in https://github.com/elastic/beats/issues/32687).
 */
function getMetricData(cloud: FakeCloud, body: unknown): object {
  const parsed = GetMetricDataInput.safeParse(body);
  if (!parsed.success) throw new FakeAwsError('InvalidParameterValue', issues(parsed.error));
  const { start, end } = window(parsed.data, 'ValidationError');
  const now = Date.now();
  const queries = parsed.data.MetricDataQueries;
  queries.forEach((q, i) => {
    checkPeriod(q.MetricStat.Period, `MetricDataQueries.member.${i + 1}.MetricStat.Period`);
    if (!isStatistic(q.MetricStat.Stat))
      throw new FakeAwsError(
        'InvalidParameterValue',
        `The value ${q.MetricStat.Stat} for parameter MetricDataQueries.member.${i + 1}.MetricStat.Stat is not valid.`,
      );
  });
  const descending = parsed.data.ScanBy !== 'TimestampAscending';
  return {
    MetricDataResults: queries
      .filter((q) => q.ReturnData !== false)
      .map((q) => {
        const { Metric, Period, Stat, Unit } = q.MetricStat;
        const from = roundedStart(start, Period);
        const value = seriesValue(cloud, Metric, Unit);
        const points = value === undefined ? [] : periods(samples(value, from, end.getTime(), now), from, Period);
        if (descending) points.reverse();
        return {
          Id: q.Id,
          Label: q.Label ?? Metric.MetricName,
          StatusCode: 'Complete',
          Timestamps: points.map((p) => new Date(p.at)),
          Values: points.map((p) => statistic(Stat, p.values)),
        };
      }),
    Messages: [],
  };
}

// ---- CloudWatch GetMetricStatistics ----------------------------------------------------------

const GetMetricStatisticsInput = z.object({
  Namespace: z.string().min(1),
  MetricName: z.string().min(1),
  Dimensions: z.array(Dimension).max(30).optional(),
  StartTime: z.unknown(),
  EndTime: z.unknown(),
  Period: z.number(),
  Statistics: z.array(z.enum(STATISTICS)).min(1).max(5).optional(),
  ExtendedStatistics: z.array(z.string().regex(PERCENTILE)).min(1).max(10).optional(),
  Unit: z.string().optional(),
});
/** The most data points GetMetricStatistics answers in one call. */
const MAX_DATAPOINTS = 1440;

/**
 * GetMetricStatistics (https://docs.aws.amazon.com/AmazonCloudWatch/latest/APIReference/API_GetMetricStatistics.html):
 * Namespace, MetricName, StartTime, EndTime and Period are required (MissingParameter); either
 * Statistics or ExtendedStatistics, not both; at most 1,440 data points, more is refused with
 * InvalidParameterCombination ("You have requested up to N datapoints, which exceeds the limit of
 * 1440", as CloudWatch words it, quoted in
 * https://github.com/cloud-custodian/cloud-custodian/issues/7683); data points "are not returned
 * in chronological order": the fake answers them newest first, so that a client taking the last
 * as the latest is caught.
 */
function getMetricStatistics(cloud: FakeCloud, body: Record<string, unknown>): object {
  for (const name of ['Namespace', 'MetricName', 'StartTime', 'EndTime', 'Period']) {
    if (body[name] === undefined) throw new FakeAwsError('MissingParameter', `The parameter ${name} is required.`);
  }
  const parsed = GetMetricStatisticsInput.safeParse(body);
  if (!parsed.success) throw new FakeAwsError('InvalidParameterValue', issues(parsed.error));
  const input = parsed.data;
  if (!input.Statistics && !input.ExtendedStatistics)
    throw new FakeAwsError('MissingParameter', 'Either the parameter Statistics or ExtendedStatistics is required.');
  if (input.Statistics && input.ExtendedStatistics)
    throw new FakeAwsError('InvalidParameterCombination', 'The parameters Statistics and ExtendedStatistics are mutually exclusive.');
  checkPeriod(input.Period, 'Period');
  const { start, end } = window(input, 'InvalidParameterValue');
  const from = roundedStart(start, input.Period);
  const requested = Math.ceil((end.getTime() - from) / (input.Period * SECOND));
  if (requested > MAX_DATAPOINTS) {
    throw new FakeAwsError(
      'InvalidParameterCombination',
      `You have requested up to ${requested} datapoints, which exceeds the limit of ${MAX_DATAPOINTS}. Increase the Period or narrow the time range.`,
    );
  }
  const value = seriesValue(cloud, input, input.Unit);
  const points = value === undefined ? [] : periods(samples(value, from, end.getTime(), Date.now()), from, input.Period);
  const unit = RDS_UNITS[input.MetricName] ?? 'None';
  return {
    Label: input.MetricName,
    Datapoints: points.reverse().map((p) => ({
      Timestamp: new Date(p.at),
      ...Object.fromEntries((input.Statistics ?? []).map((s) => [s, statistic(s, p.values)])),
      ...(input.ExtendedStatistics && {
        ExtendedStatistics: Object.fromEntries(input.ExtendedStatistics.map((s) => [s, statistic(s, p.values)])),
      }),
      Unit: unit,
    })),
  };
}

export function handleCloudWatch(cloud: FakeCloud, operation: string, body: Record<string, unknown>): object {
  switch (operation) {
    case 'GetMetricData':
      return getMetricData(cloud, body);
    case 'GetMetricStatistics':
      return getMetricStatistics(cloud, body);
    default:
      throw new FakeAwsError('UnknownOperationException', `Unknown operation ${operation}`);
  }
}

// ---- Performance Insights GetResourceMetrics -------------------------------------------------

/** PeriodInSeconds takes these values only
 * (https://docs.aws.amazon.com/performance-insights/latest/APIReference/API_GetResourceMetrics.html). */
const PI_PERIODS = [1, 60, 300, 3600, 86400];

const GetResourceMetricsInput = z.object({
  ServiceType: z.literal('RDS'),
  Identifier: z.string(),
  MetricQueries: z.array(z.object({ Metric: z.string() })).min(1),
  StartTime: z.unknown(),
  EndTime: z.unknown(),
  PeriodInSeconds: z.number().int().optional(),
});

const PI_VALUES: Readonly<Record<string, number>> = {
  'db.load.avg': 1.25,
  'os.memory.free.avg': 2_500_000,
  'os.memory.total.avg': 8_000_000,
  'os.cpuUtilization.total.avg': 14,
};

/** Without PeriodInSeconds, Performance Insights picks one for "roughly 100-200 data points". */
const defaultPeriod = (spanMs: number) => PI_PERIODS.find((p) => spanMs / (p * SECOND) <= 200) ?? 86400;

/**
 * GetResourceMetrics: one point per period in [StartTime, EndTime) whose period has ended, the
 * newest holding the value the test set; a PeriodInSeconds outside the documented values, or a
 * request that is not what the API takes, is an InvalidArgumentException.
 */
export function handlePerformanceInsights(cloud: FakeCloud, operation: string, body: Record<string, unknown>): object {
  if (operation !== 'GetResourceMetrics') throw new FakeAwsError('UnknownOperationException', `Unknown operation ${operation}`);
  const parsed = GetResourceMetricsInput.safeParse(body);
  if (!parsed.success) throw new FakeAwsError('InvalidArgumentException', issues(parsed.error));
  const input = parsed.data;
  if (input.PeriodInSeconds !== undefined && !PI_PERIODS.includes(input.PeriodInSeconds)) {
    throw new FakeAwsError(
      'InvalidArgumentException',
      `PeriodInSeconds must be one of ${PI_PERIODS.join(', ')}; ${input.PeriodInSeconds} is not.`,
    );
  }
  const instance = [...cloud.instances.values()].find((i) => i.resourceId === input.Identifier && i.performanceInsights);
  if (!instance) throw new FakeAwsError('InvalidArgumentException', `No Performance Insights data for ${input.Identifier}`);
  const { start, end } = window(input, 'InvalidArgumentException');
  const period = (input.PeriodInSeconds ?? defaultPeriod(end.getTime() - start.getTime())) * SECOND;
  const alignedStart = Math.floor(start.getTime() / period) * period;
  const alignedEnd = Math.ceil(end.getTime() / period) * period;
  const newest = Math.floor(Date.now() / period) * period - period;
  const timestamps: number[] = [];
  for (let at = alignedStart; at < alignedEnd && at <= newest; at += period) timestamps.push(at);
  return {
    AlignedStartTime: new Date(alignedStart),
    AlignedEndTime: new Date(alignedEnd),
    Identifier: instance.resourceId,
    MetricList: input.MetricQueries.map(({ Metric }) => {
      const value = PI_VALUES[Metric];
      return {
        Key: { Metric },
        DataPoints:
          value === undefined
            ? []
            : timestamps.map((at) => ({ Timestamp: new Date(at), Value: ((newest - at) / period) % 2 === 0 ? value : value * 0.9 })),
      };
    }),
  };
}

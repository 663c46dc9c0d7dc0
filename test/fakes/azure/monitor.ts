// Azure Monitor for the fake flexible server: GET {resource}/providers/Microsoft.Insights/metrics
// with metricnames, timespan, interval and aggregation, answered with one-minute points as the
// service does: the newest minute not published yet, older ones with the aggregations asked for
// (https://learn.microsoft.com/rest/api/monitor/metrics/list: "aggregation: the list of
// aggregation types (comma separated) to retrieve"; without it, the metric's primary aggregation,
// Average for these). active_connections is counted on the real cluster; the others are the
// test's figures. There are values up to now only, and for 93 days back (platform metrics'
// retention, https://learn.microsoft.com/azure/azure-monitor/essentials/data-platform-metrics);
// without a timespan, the last hour.
import type { Cluster } from '../../../src/lab/cluster.ts';
import { json, type Reply } from './http.ts';

/** Stable api-versions of Microsoft.Insights metrics (https://learn.microsoft.com/rest/api/monitor/metrics/list
 * and its earlier versions); @azure/arm-monitor 8 sends 2024-02-01. */
export const MONITOR_API_VERSIONS = ['2018-01-01', '2021-05-01', '2023-10-01', '2024-02-01'] as const;

/** The aggregation types a point can carry (AggregationType in the reference), as the fields
 * of a point name them. */
const AGGREGATIONS = ['average', 'count', 'maximum', 'minimum', 'total'] as const;
type Aggregation = (typeof AGGREGATIONS)[number];

const UNITS: Record<string, string> = {
  cpu_percent: 'Percent',
  memory_percent: 'Percent',
  storage_percent: 'Percent',
  read_iops: 'Count',
  write_iops: 'Count',
  disk_queue_depth: 'Count',
  active_connections: 'Count',
  network_bytes_egress: 'Bytes',
};

export type MetricFigures = Record<string, number>;

export const DEFAULT_METRIC_FIGURES: MetricFigures = {
  cpu_percent: 12.5,
  memory_percent: 40,
  storage_percent: 3,
  read_iops: 4,
  write_iops: 9,
  disk_queue_depth: 0.2,
  network_bytes_egress: 120_000,
};

function badRequest(message: string): Reply {
  return json(400, { code: 'BadRequest', message });
}

const ONE_MINUTE = 60_000;
const RETENTION_MS = 93 * 86_400_000;
const DEFAULT_TIMESPAN_MS = 3_600_000;

/** .NET's d.hh:mm:ss, as Azure Monitor writes a retention period. */
const RETENTION_TEXT = '93.00:00:00';

/** The form Azure Monitor's retention message gives a time in: 6/1/2020 12:00:00 AM. */
function usDateTime(t: number): string {
  const d = new Date(t);
  const h = d.getUTCHours();
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${d.getUTCMonth() + 1}/${d.getUTCDate()}/${d.getUTCFullYear()} ${h % 12 === 0 ? 12 : h % 12}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())} ${h < 12 ? 'AM' : 'PM'}`;
}

/** The aggregations asked for (case-insensitive, comma-separated), or the unknown ones. */
function aggregationsOf(raw: string | null): { ok: Aggregation[] } | { unknown: string[] } {
  if (raw === null || raw.trim() === '') return { ok: ['average'] };
  const asked = raw.split(',').map((a) => a.trim());
  const known = (a: string): a is Aggregation => (AGGREGATIONS as readonly string[]).includes(a);
  const unknown = asked.filter((a) => !known(a.toLowerCase()));
  return unknown.length > 0 ? { unknown } : { ok: [...new Set(asked.map((a) => a.toLowerCase()).filter(known))] };
}

/** One minute's point holding the asked aggregations of `value` (one sample a minute). */
function point(at: string, value: number, aggregations: readonly Aggregation[]): object {
  const of: Record<Aggregation, number> = { average: value, maximum: value, minimum: value, total: value, count: 1 };
  return { timeStamp: at, ...Object.fromEntries(aggregations.map((a) => [a, of[a]])) };
}

export async function answerMetrics(
  url: URL,
  resourceId: string,
  location: string,
  figures: MetricFigures,
  cluster: Cluster,
): Promise<Reply> {
  const names = (url.searchParams.get('metricnames') ?? '')
    .split(',')
    .map((n) => n.trim())
    .filter(Boolean);
  const now = Date.now();
  const timespan =
    url.searchParams.get('timespan') ?? `${new Date(now - DEFAULT_TIMESPAN_MS).toISOString()}/${new Date(now).toISOString()}`;
  const interval = url.searchParams.get('interval') ?? 'PT1M';
  if (names.length === 0) return badRequest('metricnames is required');
  const unknown = names.filter((n) => !(n in UNITS));
  if (unknown.length > 0) {
    return badRequest(
      `Failed to find metric configuration for provider: Microsoft.DBforPostgreSQL, resource Type: flexibleServers, metric: ${unknown.join(', ')}, Valid metrics: ${Object.keys(UNITS).join(',')}`,
    );
  }
  if (interval !== 'PT1M') return badRequest(`the fake serves the PT1M grain only, got interval=${interval}`);
  const aggregations = aggregationsOf(url.searchParams.get('aggregation'));
  if ('unknown' in aggregations) {
    return badRequest(
      `Invalid aggregation type(s): ${aggregations.unknown.join(', ')}. Valid aggregation types: ${AGGREGATIONS.map((a) => a[0]!.toUpperCase() + a.slice(1)).join(', ')}`,
    );
  }
  const [from, to] = timespan.split('/').map((t) => Date.parse(t));
  if (from === undefined || to === undefined || !Number.isFinite(from) || !Number.isFinite(to) || from >= to) {
    return badRequest(`Invalid timespan '${timespan}': expected <start ISO 8601>/<end ISO 8601>`);
  }
  if (to < now - RETENTION_MS)
    return badRequest(`Query endTime: ${usDateTime(to)} is out of the Max metrics retention period: ${RETENTION_TEXT}`);
  const [connections] = await cluster.sql<{ n: number }>(
    `SELECT count(*)::int AS n FROM pg_stat_activity WHERE backend_type = 'client backend'`,
  );
  const value = (name: string) => (name === 'active_connections' ? (connections?.n ?? 0) : (figures[name] ?? 0));
  const start = Math.floor(from / ONE_MINUTE) * ONE_MINUTE;
  const newest = Math.floor(to / ONE_MINUTE) * ONE_MINUTE;
  // The minute running now is not published yet, nor any later one; nor what retention dropped.
  const published = (t: number) => t < Math.floor(now / ONE_MINUTE) * ONE_MINUTE && t >= now - RETENTION_MS;
  return json(200, {
    cost: names.length * Math.round((to - from) / ONE_MINUTE),
    timespan,
    interval: 'PT1M',
    value: names.map((name) => {
      const data: object[] = [];
      for (let t = start; t <= newest; t += ONE_MINUTE) {
        const at = new Date(t).toISOString();
        // The newest minute of the window is not published yet either.
        data.push(t === newest || !published(t) ? { timeStamp: at } : point(at, value(name), aggregations.ok));
      }
      return {
        id: `${resourceId}/providers/Microsoft.Insights/metrics/${name}`,
        type: 'Microsoft.Insights/metrics',
        name: { value: name, localizedValue: name.replaceAll('_', ' ') },
        displayDescription: name,
        unit: UNITS[name],
        timeseries: [{ metadatavalues: [], data }],
        errorCode: 'Success',
      };
    }),
    namespace: 'Microsoft.DBforPostgreSQL/flexibleServers',
    resourceregion: location,
  });
}

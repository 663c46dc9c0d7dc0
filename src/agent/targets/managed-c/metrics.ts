// Machine metrics of a Cloud SQL instance from Cloud Monitoring: the latest point of each series
// in the last minutes (Cloud SQL samples every 60 s, published a few minutes late). The guardrails
// read the canonical names (cpu_percent; memory_available_bytes from memory/utilization and the
// tier's memory); every series also goes out under its own name.
import type { TargetMetric } from '../../../protocol/v1.ts';
import type { ManagedCApi, MetricPoint } from './api.ts';

const PREFIX = 'cloudsql.googleapis.com/database/';
/** Metric types read, with their unit. */
export const MONITORING_METRICS: Readonly<Record<string, string>> = {
  'cpu/utilization': 'ratio',
  'memory/utilization': 'ratio',
  'disk/read_ops_count': 'count',
  'disk/write_ops_count': 'count',
  'postgresql/num_backends': 'count',
};
export const MONITORING_SOURCE = 'cloud-monitoring';
const WINDOW_MINUTES = 10;

function latest(points: MetricPoint[]): MetricPoint | undefined {
  return points.filter((p) => Number.isFinite(p.value)).sort((a, b) => b.at.getTime() - a.at.getTime())[0];
}

export async function monitoringMetrics(api: ManagedCApi, memoryTotalBytes: number | undefined): Promise<TargetMetric[]> {
  const metrics: TargetMetric[] = [];
  const byName = new Map<string, MetricPoint>();
  for (const [name, unit] of Object.entries(MONITORING_METRICS)) {
    const point = latest(await api.timeSeries(`${PREFIX}${name}`, WINDOW_MINUTES));
    if (!point) continue;
    byName.set(name, point);
    metrics.push({ name: `${MONITORING_SOURCE}:${name}`, value: point.value, unit, at: point.at.toISOString(), source: MONITORING_SOURCE });
  }
  const cpu = byName.get('cpu/utilization');
  if (cpu)
    metrics.push({ name: 'cpu_percent', value: cpu.value * 100, unit: 'percent', at: cpu.at.toISOString(), source: MONITORING_SOURCE });
  if (memoryTotalBytes !== undefined) {
    metrics.push({ name: 'memory_total_bytes', value: memoryTotalBytes, unit: 'bytes', at: new Date().toISOString(), source: 'tier' });
    const memory = byName.get('memory/utilization');
    if (memory)
      metrics.push({
        name: 'memory_available_bytes',
        value: Math.round(Math.max(0, memoryTotalBytes * (1 - memory.value))),
        unit: 'bytes',
        at: memory.at.toISOString(),
        source: MONITORING_SOURCE,
      });
  }
  return metrics;
}

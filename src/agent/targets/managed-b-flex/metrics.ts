// Machine metrics of a flexible server from Azure Monitor, at their 1-minute grain: the latest
// minute that has a value. The guardrails read the canonical names (memory_available_bytes from
// memory_percent and the SKU's memory); every series also goes out under its own name.
import type { TargetMetric } from '../../../protocol/v1.ts';
import type { ManagedBFlexApi, MetricSeries } from './api.ts';

export const MONITOR_METRICS = [
  'cpu_percent',
  'memory_percent',
  'read_iops',
  'write_iops',
  'disk_queue_depth',
  'active_connections',
  'storage_percent',
] as const;

export const MONITOR_SOURCE = 'azure-monitor';
/** Azure Monitor publishes a minute a little after it ends: a few minutes back finds the latest. */
const WINDOW_MINUTES = 10;
const GRAIN = 'PT1M';

function latest(series: MetricSeries): { value: number; at: Date } | undefined {
  let best: { value: number; at: Date } | undefined;
  for (const p of series.points) {
    const value = p.average ?? p.maximum;
    if (value === undefined || !Number.isFinite(value)) continue;
    if (!best || p.at.getTime() > best.at.getTime()) best = { value, at: p.at };
  }
  return best;
}

/** Azure's unit names ("Percent", "Count") in the lower case the other targets use. */
function unitOf(azureUnit: string): string {
  return azureUnit.toLowerCase();
}

export async function monitorMetrics(api: ManagedBFlexApi, memoryTotalBytes: number | undefined): Promise<TargetMetric[]> {
  const series = await api.metrics(MONITOR_METRICS, WINDOW_MINUTES, GRAIN);
  const metrics: TargetMetric[] = [];
  const byName = new Map<string, { value: number; at: Date }>();
  for (const s of series) {
    const point = latest(s);
    if (!point) continue;
    byName.set(s.name, point);
    metrics.push({
      name: `${MONITOR_SOURCE}:${s.name}`,
      value: point.value,
      unit: unitOf(s.unit),
      at: point.at.toISOString(),
      source: MONITOR_SOURCE,
    });
  }
  const cpu = byName.get('cpu_percent');
  if (cpu) metrics.push({ name: 'cpu_percent', value: cpu.value, unit: 'percent', at: cpu.at.toISOString(), source: MONITOR_SOURCE });
  if (memoryTotalBytes !== undefined) {
    const now = new Date().toISOString();
    metrics.push({ name: 'memory_total_bytes', value: memoryTotalBytes, unit: 'bytes', at: now, source: 'sku' });
    const memory = byName.get('memory_percent');
    if (memory) {
      const available = Math.max(0, memoryTotalBytes * (1 - memory.value / 100));
      metrics.push({
        name: 'memory_available_bytes',
        value: Math.round(available),
        unit: 'bytes',
        at: memory.at.toISOString(),
        source: MONITOR_SOURCE,
      });
    }
  }
  return metrics;
}

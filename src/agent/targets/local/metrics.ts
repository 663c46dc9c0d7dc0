// The local target's machine metrics: this host's memory, when the database runs here.
import { readFileSync } from 'node:fs';
import type { TargetMetric } from '../../../protocol/v1.ts';

/** Memory of this host from /proc/meminfo (MemAvailable counts reclaimable cache, as the
 * kernel itself estimates it); empty where there is no /proc. */
export function hostMemoryMetrics(): TargetMetric[] {
  let text: string;
  try {
    text = readFileSync('/proc/meminfo', 'utf8');
  } catch {
    return [];
  }
  const kb = (field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? NaN) * 1024;
  const at = new Date().toISOString();
  return [
    { name: 'memory_available_bytes', value: kb('MemAvailable'), unit: 'bytes', at, source: 'host' },
    { name: 'memory_total_bytes', value: kb('MemTotal'), unit: 'bytes', at, source: 'host' },
    { name: 'swap_free_bytes', value: kb('SwapFree'), unit: 'bytes', at, source: 'host' },
  ].filter((m) => Number.isFinite(m.value));
}

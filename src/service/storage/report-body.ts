// A report is kept as the agent sent it: its JSON, gzip-compressed (the agent sends it so; the
// service compresses the rare plain one). A tenth of the bytes of the JSON to write, send and log
// in the WAL, and no work for the database's own compression. The figures the dashboard charts
// are columns beside it; the whole report is read back only for the latest one.
import { gunzipSync, gzipSync, constants } from 'node:zlib';
import { z } from 'zod';
import { MetricsReportSchema } from '../../protocol/report.ts';
import { SettingSchema, TargetMetricSchema, type Setting, type TargetMetric } from '../../protocol/v1.ts';
import type { MetricsReport } from '../../protocol/report.ts';

export function reportBodyForStorage(received: Buffer, gzip: boolean): Buffer {
  return gzip ? received : gzipSync(received, { level: constants.Z_BEST_SPEED });
}

export interface ReportContent {
  metrics: MetricsReport | null;
  settings: Setting[];
  targetMetrics: TargetMetric[];
}

/** Reads a stored report leniently: a part that does not parse (an older shape) reads as empty. */
export function readReportBody(stored: Uint8Array): ReportContent {
  const buffer = Buffer.from(stored.buffer, stored.byteOffset, stored.byteLength);
  const json = JSON.parse(gunzipSync(buffer).toString('utf8')) as Record<string, unknown>;
  const metrics = MetricsReportSchema.nullable().safeParse(json['metrics'] ?? null);
  const settings = z.array(SettingSchema).safeParse(json['settings'] ?? []);
  const targetMetrics = z.array(TargetMetricSchema).safeParse(json['targetMetrics'] ?? []);
  return {
    metrics: metrics.success ? metrics.data : null,
    settings: settings.success ? settings.data : [],
    targetMetrics: targetMetrics.success ? targetMetrics.data : [],
  };
}

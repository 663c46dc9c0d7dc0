// A report is kept as the agent sent it: its JSON, gzip-compressed (the agent sends it so; the
// service compresses the rare plain one). A tenth of the bytes of the JSON to write, send and log
// in the WAL, and no work for the database's own compression. The figures the dashboard charts
// are columns beside it; the whole report is read back only for the latest one.
//
// Statement texts are redacted here (src/postgres/statement-redaction.ts) as well as in the agent,
// for what an older agent sends and for what was stored before: once before a report is stored,
// and again whenever a stored one is read back to be shown.
import { gunzipSync, gzipSync, constants } from 'node:zlib';
import { z } from 'zod';
import { MetricsReportSchema, REPORT_LIMITS, type StatementRow } from '../../protocol/report.ts';
import { SettingSchema, TargetMetricSchema, type ReportRequest, type Setting, type TargetMetric } from '../../protocol/v1.ts';
import type { MetricsReport } from '../../protocol/report.ts';
import { redactStatementText } from '../../postgres/statement-redaction.ts';

export function reportBodyForStorage(received: Buffer, gzip: boolean): Buffer {
  return gzip ? received : gzipSync(received, { level: constants.Z_BEST_SPEED });
}

/** The statement rows with their texts redacted; the same array when no text changes. */
function redactRows(rows: StatementRow[]): StatementRow[] {
  let changed = false;
  const redacted = rows.map((row) => {
    if (row.text === undefined) return row;
    const text = redactStatementText(row.text).slice(0, REPORT_LIMITS.maxQueryTextLength);
    if (text === row.text) return row;
    changed = true;
    return { ...row, text };
  });
  return changed ? redacted : rows;
}

function redactMetrics(metrics: MetricsReport): MetricsReport {
  const top = redactRows(metrics.statements.top);
  return top === metrics.statements.top ? metrics : { ...metrics, statements: { ...metrics.statements, top } };
}

/** A report as it may be stored: statement texts that still hold literals (an older agent's)
 * redacted, in the parsed report and in the stored body alike. Untouched when none does. */
export function redactReportTexts(report: ReportRequest, storedBody: Buffer): { report: ReportRequest; storedBody: Buffer } {
  const metrics = report.metrics === null ? null : redactMetrics(report.metrics);
  if (metrics === report.metrics) return { report, storedBody };
  // Rewritten from the body as sent, so that everything but the texts stays what the agent said.
  const json = JSON.parse(gunzipSync(storedBody).toString('utf8')) as { metrics: { statements: { top: unknown[] } } };
  json.metrics.statements.top = metrics!.statements.top;
  return { report: { ...report, metrics }, storedBody: reportBodyForStorage(Buffer.from(JSON.stringify(json)), false) };
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
    metrics: metrics.success && metrics.data !== null ? redactMetrics(metrics.data) : null,
    settings: settings.success ? settings.data : [],
    targetMetrics: targetMetrics.success ? targetMetrics.data : [],
  };
}

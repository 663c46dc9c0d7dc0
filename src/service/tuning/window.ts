// Which reports measure a window. A report counts when its whole interval lies inside the window
// (after the apply's acknowledgement plus the warm-up, and before the window's end), it has
// metrics, and its settings show the trial's values. Whether the window can be trusted (a
// restart in it, say) is src/measure/contamination.ts's to judge.
//
// A report's interval is stamped by the agent's clock, the window by the storage's. The offset
// between them is read off each report: it was sent at `sentAt` (agent) and received at
// `receivedAt` (storage), so agent times shift by receivedAt − sentAt (the clocks' offset plus
// the network's delay). That mapping is good to the variation of the delay and of the time the
// agent takes between the end of an interval and sending it, hence a tolerance at the edges.
import type { MetricsReport } from '../../protocol/report.ts';
import type { SessionReport, SessionWindow } from './store.ts';

/** How far a report's interval may reach past the window's edges and still count. */
export const EDGE_TOLERANCE_MS = 500;

export interface MeasuredReport extends SessionReport {
  metrics: MetricsReport;
}

/** The report's interval on the storage's clock, in epoch milliseconds. */
export function serviceInterval(report: SessionReport): { start: number; end: number } | null {
  if (!report.metrics) return null;
  const offset = report.receivedAt.getTime() - report.sentAt.getTime();
  const start = Date.parse(report.metrics.interval.start) + offset;
  const end = Date.parse(report.metrics.interval.end) + offset;
  return Number.isFinite(start) && Number.isFinite(end) ? { start, end } : null;
}

export function windowFrom(start: Date, seconds: number, attempts: number): SessionWindow {
  return { start, end: new Date(start.getTime() + seconds * 1000), attempts };
}

/**
 * Nothing more can arrive for the window: a report reaching past its end came in, or the window
 * ended `graceMs` ago (the agent stopped reporting: measure what there is).
 */
export function windowClosed(reports: readonly SessionReport[], window: SessionWindow, now: Date, graceMs: number): boolean {
  const end = window.end.getTime();
  if (now.getTime() < end) return false;
  if (now.getTime() >= end + graceMs) return true;
  return reports.some((r) => (serviceInterval(r)?.end ?? -Infinity) >= end);
}

function sameSetting(a: string, b: string): boolean {
  if (a === b) return true;
  const x = Number(a);
  const y = Number(b);
  return (
    a.trim() !== '' && b.trim() !== '' && Number.isFinite(x) && Number.isFinite(y) && Math.abs(x - y) <= 1e-9 * Math.max(1, Math.abs(x))
  );
}

/** The names whose reported setting differs from what the agent read back after the apply. */
function differingSettings(report: SessionReport, expected: Readonly<Record<string, string>>): string[] {
  const reported = new Map(report.settings.map((s) => [s.name, s.setting]));
  return Object.entries(expected).flatMap(([name, value]) => {
    const now = reported.get(name);
    return now !== undefined && !sameSetting(now, value) ? [name] : [];
  });
}

export interface WindowSelection {
  reports: MeasuredReport[];
  /** Reports in the window whose settings were not the trial's (it was reverted under us). */
  mismatched: number;
}

/** The reports that measure `window`; `expected` are the trial's values as read back (none for the baseline). */
export function selectWindow(
  reports: readonly SessionReport[],
  window: SessionWindow,
  expected: Readonly<Record<string, string>> | null,
): WindowSelection {
  const start = window.start.getTime();
  const end = window.end.getTime();
  const inside: MeasuredReport[] = [];
  let mismatched = 0;
  for (const report of reports) {
    const interval = serviceInterval(report);
    if (!interval || !report.metrics || interval.start < start - EDGE_TOLERANCE_MS || interval.end > end + EDGE_TOLERANCE_MS) continue;
    if (expected && differingSettings(report, expected).length > 0) {
      mismatched++;
      continue;
    }
    inside.push({ ...report, metrics: report.metrics });
  }
  return { reports: inside, mismatched };
}

/** The lowest share of memory available in these reports (the target's metrics), if they tell it. */
export function lowestMemoryShare(reports: readonly SessionReport[]): number | null {
  let lowest: number | null = null;
  for (const report of reports) {
    const available = report.targetMetrics.find((m) => m.name === 'memory_available_bytes')?.value;
    const total = report.targetMetrics.find((m) => m.name === 'memory_total_bytes')?.value;
    if (available === undefined || total === undefined || total <= 0) continue;
    const share = available / total;
    lowest = lowest === null ? share : Math.min(lowest, share);
  }
  return lowest;
}

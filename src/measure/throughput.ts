// The workload's throughput as every reader names it: top-level statements completed per second,
// from pg_stat_statements' calls, which count each statement as it finishes. pg_stat_database's
// xact_commit is not used for it: on PostgreSQL 15 and later a backend publishes it only when it
// goes idle or exits, so under a busy pool it lags by minutes and arrives in bursts.
import type { MetricsReport } from '../protocol/report.ts';

/** The figure's name wherever a person reads it (dashboard, guardrail messages). */
export const THROUGHPUT_FIGURE = 'statements/s (pg_stat_statements)';

/** Top-level statements per second over the report's interval; a report from an agent that does
 * not send the figure gets it from its calls (the same counter). */
export function statementsPerSecond(report: Pick<MetricsReport, 'derived' | 'interval'>): number {
  const sent = report.derived.statementsPerSecond;
  if (sent !== undefined) return sent;
  return report.interval.seconds > 0 ? report.derived.calls / report.interval.seconds : 0;
}

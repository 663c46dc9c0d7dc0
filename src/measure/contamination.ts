// Which measurement windows cannot be trusted (design.md, "The measure"): a window whose query
// mix moved away from the baseline's, that saw too few calls, or inside which the statistics
// were reset, the agent reconnected or the server restarted. Such a window is measured again;
// its figures never reach the optimizer. Pure functions over the window's reports.
import type { MetricsReport } from '../protocol/report.ts';
import { isTopLevel, statementKey } from '../protocol/statement.ts';
import type { WindowStats } from './objective.ts';

export const CONTAMINATION = {
  /**
   * A window is contaminated when the Jensen-Shannon distance (base 2, 0..1) between its call
   * shares and the baseline's, less what sampling alone gives, exceeds this: about a fifth of
   * the calls moved (50/50 → 80/20 is 0.27; a new statement with 10 % of the calls, 0.23).
   */
  maxMixDistance: 0.25,
  /** Fewer top-level calls than this in a window is too few to judge (the agent's guardrails use the same). */
  minCalls: 20,
  /** …and so is a window that saw under this share of the baseline's query mix. */
  minCoverage: 0.5,
  /** Two reports of one agent whose intervals are further apart than this (agent clock) leave a gap. */
  maxGapSeconds: 1,
} as const;

/** The statements' shares of a window's top-level calls; '*' gathers the statements not reported one by one. */
export interface CallShares {
  shares: Record<string, number>;
  calls: number;
}

const OTHER = '*';

export function callShares(reports: readonly MetricsReport[]): CallShares {
  const calls = new Map<string, number>();
  const add = (key: string, n: number) => calls.set(key, (calls.get(key) ?? 0) + n);
  for (const r of reports) {
    for (const row of r.statements.top) if (isTopLevel(row) && row.calls > 0) add(statementKey(row), row.calls);
    if (r.statements.other.calls > 0) add(OTHER, r.statements.other.calls);
  }
  const total = [...calls.values()].reduce((a, b) => a + b, 0);
  return { shares: total > 0 ? Object.fromEntries([...calls].map(([k, n]) => [k, n / total])) : {}, calls: total };
}

/**
 * The Jensen-Shannon distance between two windows' call shares, in bits (0 = the same mix, 1 =
 * nothing in common), less the part that sampling alone gives two windows of the same mix:
 * (k − 1)(1/n₁ + 1/n₂)/8 nats for k statements and n calls each. Without that correction a mix
 * of many statements with few calls each would look shifted in every short window.
 */
export function mixDistance(a: CallShares, b: CallShares): number {
  const keys = new Set([...Object.keys(a.shares), ...Object.keys(b.shares)]);
  let divergence = 0;
  for (const key of keys) {
    const p = a.shares[key] ?? 0;
    const q = b.shares[key] ?? 0;
    const m = (p + q) / 2;
    if (p > 0) divergence += 0.5 * p * Math.log2(p / m);
    if (q > 0) divergence += 0.5 * q * Math.log2(q / m);
  }
  const sampling = a.calls > 0 && b.calls > 0 ? ((keys.size - 1) * (1 / a.calls + 1 / b.calls)) / 8 / Math.LN2 : 0;
  return Math.sqrt(Math.min(1, Math.max(0, divergence - sampling)));
}

/** A report as a window holds it: which agent lease sent it, and in which order. */
export interface WindowReport {
  leaseId: string;
  seq: number;
  metrics: MetricsReport;
}

export type ContaminationCode =
  'no_reports' | 'few_calls' | 'low_coverage' | 'mix_shift' | 'stats_reset' | 'agent_reconnect' | 'report_gap' | 'server_restart';

export interface Contamination {
  code: ContaminationCode;
  message: string;
}

export interface ContaminationInput {
  /** The window's reports in the order they were received. */
  reports: readonly WindowReport[];
  /** The window's figures on the baseline's mix. */
  stats: WindowStats;
  /** The baseline's call shares; null for the first baseline window, which sets them. */
  reference: CallShares | null;
}

/** Why the window cannot be trusted; empty when it can. */
export function contamination({ reports, stats, reference }: ContaminationInput): Contamination[] {
  const found: Contamination[] = [];
  if (reports.length === 0) return [{ code: 'no_reports', message: 'no report covered the window (is the agent reporting?)' }];
  if (stats.calls < CONTAMINATION.minCalls) {
    found.push({
      code: 'few_calls',
      message: `${stats.calls} calls in the window, under the ${CONTAMINATION.minCalls} needed to judge it (is the workload running?)`,
    });
  } else if (reference && (stats.weightedRuntimeMs === null || stats.coverage < CONTAMINATION.minCoverage)) {
    found.push({
      code: 'low_coverage',
      message: `only ${Math.round(stats.coverage * 100)} % of the baseline's query mix ran (the workload changed)`,
    });
  }
  if (reference && stats.calls >= CONTAMINATION.minCalls) {
    const distance = mixDistance(callShares(reports.map((r) => r.metrics)), reference);
    if (distance > CONTAMINATION.maxMixDistance) {
      found.push({
        code: 'mix_shift',
        message: `the query mix moved away from the baseline's (Jensen-Shannon distance ${distance.toFixed(2)}, over ${CONTAMINATION.maxMixDistance})`,
      });
    }
  }
  if (reports.some((r) => r.metrics.evictions.statsReset))
    found.push({ code: 'stats_reset', message: 'the statement statistics were reset during the window' });
  if (reports.some((r) => r.metrics.interval.serverRestarted))
    found.push({ code: 'server_restart', message: 'the server restarted during the window' });
  for (let i = 1; i < reports.length; i++) {
    const before = reports[i - 1]!;
    const after = reports[i]!;
    if (after.leaseId !== before.leaseId || after.seq !== before.seq + 1) {
      found.push({ code: 'agent_reconnect', message: 'the agent reconnected during the window (its reports started a new sequence)' });
      break;
    }
    const gap = (Date.parse(after.metrics.interval.start) - Date.parse(before.metrics.interval.end)) / 1000;
    if (gap > CONTAMINATION.maxGapSeconds) {
      found.push({ code: 'report_gap', message: `${gap.toFixed(1)} s of the window are in no report (reports were lost)` });
      break;
    }
  }
  return found;
}

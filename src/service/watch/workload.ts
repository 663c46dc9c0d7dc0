// Workload change (issue 31 part 2): an hour's statement mix against the mix the kept
// configuration was verified on, by the distance the sessions' contamination check uses, with
// the statements that appeared, vanished or changed weight. Pure.
import { CONTAMINATION, callShares, mixDistance, type CallShares } from '../../measure/contamination.ts';
import type { MetricsReport } from '../../protocol/report.ts';
import { isTopLevel, statementKey } from '../../protocol/statement.ts';

export const WORKLOAD = {
  /** How much of the calls a statement must carry (before or now) to be named. */
  minShare: 0.05,
  /** A statement in both whose share moved by this much changed weight. */
  minShift: 0.1,
  /** How long a stretch of reports is compared (the issue's "each hour"). */
  periodSeconds: 3600,
} as const;

export interface StatementShift {
  /** StatementKey, or '*' for the statements not reported one by one. */
  key: string;
  /** The statement's text, when the agent sends texts. */
  text: string | null;
  before: number;
  after: number;
}

export interface WorkloadComparison {
  distance: number;
  changed: boolean;
  appeared: StatementShift[];
  vanished: StatementShift[];
  reweighted: StatementShift[];
}

/** The statements' texts the reports carry (when the agent sends texts), by StatementKey. */
export function statementTexts(reports: readonly MetricsReport[]): Map<string, string> {
  const texts = new Map<string, string>();
  for (const r of reports) for (const row of r.statements.top) if (isTopLevel(row) && row.text) texts.set(statementKey(row), row.text);
  return texts;
}

/**
 * The period's mix against the verified one; null when it saw too few calls to judge. A statement
 * that vanished has no text in the period's reports: `verifiedTexts` (from the reports the
 * verified mix was measured on) names it.
 */
export function compareWorkload(
  verified: CallShares,
  reports: readonly MetricsReport[],
  verifiedTexts: ReadonlyMap<string, string> = new Map(),
): WorkloadComparison | null {
  const now = callShares(reports);
  if (now.calls < CONTAMINATION.minCalls) return null;
  const distance = mixDistance(now, verified);
  const texts = new Map([...verifiedTexts, ...statementTexts(reports)]);
  const shifts = [...new Set([...Object.keys(verified.shares), ...Object.keys(now.shares)])].map((key): StatementShift => ({
    key,
    text: texts.get(key) ?? null,
    before: verified.shares[key] ?? 0,
    after: now.shares[key] ?? 0,
  }));
  const byMove = (a: StatementShift, b: StatementShift) => Math.abs(b.after - b.before) - Math.abs(a.after - a.before);
  const changed = distance > CONTAMINATION.maxMixDistance;
  const moved = (shares: { minShare: number; minShift: number }) => ({
    appeared: shifts.filter((s) => s.before === 0 && s.after > 0 && s.after >= shares.minShare).sort(byMove),
    vanished: shifts.filter((s) => s.after === 0 && s.before > 0 && s.before >= shares.minShare).sort(byMove),
    reweighted: shifts.filter((s) => s.before > 0 && s.after > 0 && Math.abs(s.after - s.before) >= shares.minShift).sort(byMove),
  });
  const named = moved(WORKLOAD);
  // A change spread over many statements (or caught while the old mix still holds most of the
  // period) can clear the distance with none past the thresholds: a change is never reported
  // without naming what moved most.
  if (changed && named.appeared.length + named.vanished.length + named.reweighted.length === 0) {
    const all = moved({ minShare: 0, minShift: 0 });
    const top = new Set([...all.appeared, ...all.vanished, ...all.reweighted].sort(byMove).slice(0, WORKLOAD_TOP_MOVES));
    return {
      distance,
      changed,
      appeared: all.appeared.filter((s) => top.has(s)),
      vanished: all.vanished.filter((s) => top.has(s)),
      reweighted: all.reweighted.filter((s) => top.has(s)),
    };
  }
  return { distance, changed, ...named };
}

/** How many statements a change names when none moved past the thresholds on its own. */
const WORKLOAD_TOP_MOVES = 3;

const pct = (x: number) => `${Math.round(x * 100)} %`;
const nameOf = (s: StatementShift) => (s.key === '*' ? 'the other statements' : s.text ? `"${s.text.slice(0, 80)}"` : `statement ${s.key}`);

/** For people: what moved. */
export function describeWorkloadChange(c: WorkloadComparison): string {
  const parts = [
    ...c.appeared.map((s) => `appeared: ${nameOf(s)} (${pct(s.after)} of calls)`),
    ...c.vanished.map((s) => `vanished: ${nameOf(s)} (was ${pct(s.before)})`),
    ...c.reweighted.map((s) => `changed weight: ${nameOf(s)} (${pct(s.before)} → ${pct(s.after)})`),
  ];
  return `the statement mix is no longer the one the kept configuration was verified on (Jensen-Shannon distance ${c.distance.toFixed(2)}, over ${CONTAMINATION.maxMixDistance})${parts.length > 0 ? `: ${parts.join('; ')}` : ''}`;
}

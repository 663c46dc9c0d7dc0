// What a configuration must not cost, besides its runtime: throughput, rollbacks and memory,
// judged on the measurement window against the baseline's. An iteration that breaks one is
// recorded as failed, so the optimizer treats its region like one a guardrail reverted. These
// are the service's verdicts on whole windows; the agent's guardrails act within seconds on
// gross breaches, without the service.
import type { WindowStats } from '../../measure/objective.ts';

export const CONSTRAINTS = {
  /** Failed when throughput (top-level statements completed per second) falls by more than this
   * share of the baseline's… */
  maxThroughputDrop: 0.2,
  /** …when the baseline completed at least this many per second (below, throughput is noise). */
  minBaselineThroughput: 1,
  /** Failed when the rolled-back share of transactions rises by more than this (absolute)… */
  maxRollbackRateRise: 0.02,
  /** …with at least this many rollbacks in the window. */
  minRollbacks: 5,
  /** Failed when available memory falls below this share of the total, while the baseline's did not. */
  memoryFloorShare: 0.1,
} as const;

const percent = (x: number) => `${(x * 100).toFixed(1)} %`;

/**
 * The workload's throughput: top-level statements completed per second (the agent's own are not
 * counted). Not pg_stat_database's transactions per second: parallel workers count there as
 * transactions of their own, so a configuration with less parallelism would look slower.
 */
export function throughput(stats: WindowStats): number {
  return stats.seconds > 0 ? stats.calls / stats.seconds : 0;
}

/** The first constraint the window breaks, as a sentence, or null. */
export function constraintBreach(
  window: WindowStats,
  baseline: WindowStats,
  memory: { window: number | null; baseline: number | null },
): string | null {
  const now = throughput(window);
  const before = throughput(baseline);
  if (before >= CONSTRAINTS.minBaselineThroughput && now < (1 - CONSTRAINTS.maxThroughputDrop) * before) {
    return `throughput fell by ${percent(1 - now / before)} (${now.toFixed(1)} statements/s, baseline ${before.toFixed(1)})`;
  }
  const rollbacks = window.rollbackRate * window.tps * window.seconds;
  if (rollbacks >= CONSTRAINTS.minRollbacks && window.rollbackRate > baseline.rollbackRate + CONSTRAINTS.maxRollbackRateRise) {
    return `rollbacks rose to ${percent(window.rollbackRate)} of transactions (baseline ${percent(baseline.rollbackRate)})`;
  }
  if (
    memory.window !== null &&
    memory.window < CONSTRAINTS.memoryFloorShare &&
    (memory.baseline === null || memory.baseline >= CONSTRAINTS.memoryFloorShare)
  ) {
    return `available memory fell to ${percent(memory.window)} of the total (floor ${percent(CONSTRAINTS.memoryFloorShare)})`;
  }
  return null;
}

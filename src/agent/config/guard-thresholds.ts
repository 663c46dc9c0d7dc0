// The guardrails' thresholds (src/agent/applying/guardrails.ts watches a trial by them): their
// safe defaults, which agent.yaml's guardrails section may make stricter (guardrails.ts here).
import { MiB } from '../../knobs/index.ts';

export interface GuardThresholds {
  /** Breach when the baseline-mix runtime is over this factor of known-good in two windows in a row… */
  runtimeFactor: number;
  /** …or over this factor in a single window (a configuration that wrecks the workload). */
  runtimeFactorAtOnce: number;
  /** Fewer calls than this in a window make its runtime too noisy to judge. */
  minCalls: number;
  /** Breach when available memory falls below this share of the total… */
  memoryFloorShare: number;
  /** …or below this many bytes, whichever is larger. */
  memoryFloorBytes: number;
  /** Breach when the share of rolled-back transactions rises by more than this over known-good… */
  rollbackRateIncrease: number;
  /** …with at least this many rollbacks in the window. */
  minRollbacks: number;
  /** Breach when client connections reach this share of max_connections (and did not before). */
  connectionShare: number;
  /** Breach when the throughput (top-level statements completed per second, pg_stat_statements:
   * current under load, unlike pg_stat_database's commits) falls below this share of known-good
   * while queries run longer than `stuckQuerySeconds`: the workload is stuck rather than idle. */
  throughputFloorShare: number;
  stuckQuerySeconds: number;
}

export const DEFAULT_THRESHOLDS: GuardThresholds = {
  runtimeFactor: 2,
  runtimeFactorAtOnce: 5,
  minCalls: 20,
  memoryFloorShare: 0.05,
  memoryFloorBytes: 256 * MiB,
  rollbackRateIncrease: 0.2,
  minRollbacks: 20,
  connectionShare: 0.95,
  throughputFloorShare: 0.1,
  stuckQuerySeconds: 5,
};

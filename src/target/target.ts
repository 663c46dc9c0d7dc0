// One interface for every place the agent can tune: the local server, an RDS instance, an Aurora
// writer, an Azure flexible server. A target knows how to describe the machine and how to read
// and write the *override layer* (ALTER SYSTEM, a parameter group, server configurations). It
// does not validate values or verify them: that is done once, above it, for every target.
// Each target folder makes its Target in target.ts; how the rest of the agent and the service
// find it is the folder's definition (index.ts, see definition.ts and registry.ts).
import type { TargetKind } from '../protocol/v1.ts';
import type { Machine } from './machine.ts';
import type { TargetMetric } from '../protocol/v1.ts';
import type { TargetAgentConfig } from './config.ts';
import type { Db } from './database.ts';
import type { Logger } from '../agent/base/log.ts';
import type { Outbound } from './outbound.ts';
import type { PreflightCheck } from './preflight.ts';

export type { PreflightCheck };

/** A parameter's state in the target's override layer: unset (the server's own default or
 * postgresql.conf applies) or set to a value in the target's own spelling (for RDS this may be
 * a formula such as `{DBInstanceClassMemory/32768}`), which is restored exactly on revert. */
export type Override = { set: false } | { set: true; value: string };
export type Overrides = Record<string, Override>;

export interface MachineInfo {
  machine: Machine;
  /** Where the figures come from, e.g. "this host", "agent.yaml local.memory_mb/vcpus". */
  source: string;
}

export interface WriteOptions {
  /** The agent may restart the server when a written value waits for one. */
  allowRestart: boolean;
}

export interface WriteResult {
  restarted: boolean;
}

export interface Target {
  readonly kind: TargetKind;
  /** Names the database for people and for the journal, e.g. "local 127.0.0.1:5432/postgres". */
  readonly identity: string;
  machine(): Promise<MachineInfo>;
  /** Why parameter changes cannot be applied here (e.g. a `default.*` parameter group), or null. */
  applyBlockedReason(): Promise<string | null>;
  readOverrides(names: readonly string[]): Promise<Overrides>;
  /** Writes all entries or none (undoing those written when one fails), makes them take effect
   * (reload), and restarts only when a written value is pending a restart and it is allowed. */
  writeOverrides(overrides: Overrides, options: WriteOptions): Promise<WriteResult>;
  /** Machine-level metrics (see TargetMetricSchema): the canonical names when known, and the
   * provider's own series. An empty list when none can be read; never throws for a missing one. */
  metrics(): Promise<TargetMetric[]>;
  /** Target-specific prerequisites (apply rights, management access). */
  preflight(): Promise<PreflightCheck[]>;
  /** Parameters among `names` the management interface will not write, with why (read-only,
   * not modifiable): reported with the settings so the service never proposes them. */
  unwritable(names: readonly string[]): Promise<Map<string, string>>;
  close(): Promise<void>;
  /** Optional: the target's own guardrails for a trial (a replicated cluster: a failover, a
   * replica's lag), begun when the trial is applied. The loop checks it with the common guardrails
   * and ends the trial on a breach; targets without it have the common guardrails only. */
  watchTrial?(): Promise<TrialWatch>;
}

/** Why a target's own guardrail ends a trial. */
export interface TargetBreach {
  reason: string;
  /** The environment changed under the trial (a failover), not its configuration's doing: its
   * window is contaminated, not failed. */
  environment: boolean;
}

export interface TrialWatch {
  /** Empty while the trial may go on. */
  check(): Promise<TargetBreach[]>;
}

/** What every target factory is given. */
export interface TargetDeps {
  db: Db;
  config: TargetAgentConfig;
  log: Logger;
  /** How the cloud APIs are reached: proxy and CAs (src/agent/sending/outbound.ts); the SDKs' own
   * defaults without it. */
  outbound?: Outbound;
}

/** Thrown by writeOverrides when the environment, not the values, made the write fail: the cluster
 * changed leader, or a member restarted, while the change was being applied. The change is put
 * back as after any failure; the service measures the configuration again rather than counting
 * it as the configuration's failure. */
export class EnvironmentChangedError extends Error {
  override name = 'EnvironmentChangedError';
}

/** Thrown by writeOverrides when a write failed and putting back what it had written failed too:
 * the database is not at its previous values, so the journal keeps the change for recovery. */
export class UndoFailedError extends Error {
  override name = 'UndoFailedError';
}

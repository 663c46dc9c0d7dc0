// What the agents feature asks of its storage: the lease each database grants one agent, the
// reports and acknowledgements it stores, and the commands it hands over.
import type { AgentStartRequest, Command, CommandAckRequest, ReportRequest, SystemInfo, TargetKind } from '../../protocol/v1.ts';

/** The agent that holds, or last held, a database's lease. */
export interface AgentLease {
  leaseId: string;
  hostname: string;
  pid: number;
  agentVersion: string;
  target: TargetKind;
  targetIdentity: string;
  mode: string;
  allowRestart: boolean;
  includeQueries: boolean;
  system: SystemInfo;
  startedAt: Date;
  expiresAt: Date;
  releasedAt: Date | null;
  lastReportAt: Date | null;
  lastSeq: number | null;
  /** Held now: not released and not expired (by the storage's clock). */
  live: boolean;
}

/** Report intervals and lease lengths: a lease lasts max(intervalsPerLease × interval, minLeaseSeconds). */
export interface LeasePolicy {
  /** The interval of databases that have none of their own. */
  defaultIntervalSeconds: number;
  intervalsPerLease: number;
  minLeaseSeconds: number;
  /** Where a lease's time counts from when it is granted or renewed: the storage's now() unless
   * a clock is given (tests move one instead of waiting for a lease to lapse). */
  clock?: () => Date;
}

export type StartResult =
  | { kind: 'granted'; leaseId: string; expiresAt: Date; reportIntervalSeconds: number; resumed: boolean }
  | { kind: 'conflict'; holder: AgentLease };

/** accepted: stored, or (`repeat`) the lease's last report sent again, acknowledged and not stored
 * twice; out_of_order: a seq below the lease's last one (`lastSeq`), nothing changed. An accepted
 * report also tells whether the database has a running tuning session (read in the same statement,
 * so that the report path asks the storage nothing more to know it). */
export type ReportResult =
  | {
      kind: 'accepted';
      repeat: boolean;
      expiresAt: Date;
      reportIntervalSeconds: number;
      command: Command | null;
      tuningSessionRunning: boolean;
    }
  | { kind: 'out_of_order'; lastSeq: number }
  | { kind: 'lease_expired' };

export type AckResult =
  { kind: 'recorded'; commandKind: Command['kind'] } | { kind: 'already_done' } | { kind: 'lease_expired' } | { kind: 'unknown_command' };

export type StopResult = { kind: 'released' | 'already_released' } | { kind: 'lease_expired' };

export interface AgentStore {
  // Called once the request is authenticated by its API key.
  /** The database's target and the SHA-256 hashes (hex) of its unrevoked keys; null if unknown. */
  agentCredentials(databaseId: string): Promise<{ target: TargetKind; keyHashes: string[] } | null>;
  /** Whether a live key with this SHA-256 hash (hex) exists, of any database. */
  isLiveKeyHash(keyHash: string): Promise<boolean>;
  startAgent(databaseId: string, request: AgentStartRequest, newLeaseId: string, policy: LeasePolicy): Promise<StartResult>;
  /** `body` is the report's JSON, gzip-compressed (report-body.ts). Per lease, sequence numbers
   * increase: a repeat of the last one renews the lease and hands out the next command, but stores
   * nothing; a lower one changes nothing. One statement. */
  recordReport(databaseId: string, report: ReportRequest, body: Buffer, policy: LeasePolicy): Promise<ReportResult>;
  recordAck(databaseId: string, commandId: string, ack: CommandAckRequest): Promise<AckResult>;
  stopAgent(databaseId: string, leaseId: string): Promise<StopResult>;
}

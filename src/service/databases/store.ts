// What the databases feature asks of its storage: databases and their API keys, and what people
// read of each (its commands, reports and events). Every call names the organization, and sees only
// that organization's rows.
import type { Command, CommandAckRequest, Setting, TargetKind, TargetMetric } from '../../protocol/v1.ts';
import type { MetricsReport } from '../../protocol/report.ts';
import type { AgentLease } from '../agents/store.ts';

export interface DatabaseEntry {
  id: string;
  organizationId: string;
  name: string;
  target: TargetKind;
  /** Null: the service-wide default applies. */
  reportIntervalSeconds: number | null;
  createdAt: Date;
}

export interface ApiKeyInfo {
  id: string;
  databaseId: string;
  /** The first characters of the key, enough to tell keys apart on a page. */
  displayPrefix: string;
  label: string;
  createdAt: Date;
  revokedAt: Date | null;
}

export interface DatabaseSummary extends DatabaseEntry {
  agent: AgentLease | null;
}

/** Every status, once (the storage's CHECK constraint lists the same). */
export const COMMAND_STATUSES = ['pending', 'sent', 'done'] as const;
export type CommandStatus = (typeof COMMAND_STATUSES)[number];
export type CommandOutcome = Omit<CommandAckRequest, 'leaseId'>;

export interface CommandRecord {
  id: string;
  databaseId: string;
  command: Command;
  status: CommandStatus;
  createdBy: string | null;
  createdAt: Date;
  sentAt: Date | null;
  sentCount: number;
  ackedAt: Date | null;
  outcome: CommandOutcome | null;
  /** A trial's deadline: not handed to the agent by then, it is cancelled, never delivered later. */
  deliverBy: Date | null;
}

/** Why a trial past its deadline (deliverBy) was cancelled rather than handed to the agent. */
export const TRIAL_EXPIRED_REASON =
  "cancelled by the service: the agent did not receive this trial within its tuning session's window, and a trial is never delivered late";

/** Why revoking an API key cancelled an apply command the agent had not acknowledged. */
export const KEY_REVOKED_REASON =
  'cancelled by the service: an API key of this database was revoked before the agent acknowledged it; a change issued before a revocation is never delivered after it';

/** Done without an acknowledgement: the service cancelled it (its outcome's errors say why). */
export const cancelledByService = (record: CommandRecord): boolean => record.status === 'done' && record.ackedAt === null;

export interface StoredReport {
  id: number;
  leaseId: string;
  seq: number;
  sentAt: Date;
  receivedAt: Date;
  metrics: MetricsReport | null;
  settings: Setting[];
  targetMetrics: TargetMetric[];
}

export interface ReportPoint {
  receivedAt: Date;
  avgQueryRuntimeMs: number | null;
  tps: number | null;
  cacheHitRatio: number | null;
  connections: number | null;
  /** measure/throughput.ts: null for reports from before it was stored. */
  statementsPerSecond: number | null;
}

export interface StoredEvent {
  at: Date;
  level: 'info' | 'warn' | 'error';
  code: string;
  message: string;
  commandId: string | null;
  receivedAt: Date;
}

export interface DatabaseStore {
  createDatabase(organizationId: string, entry: { id: string; name: string; target: TargetKind }): Promise<DatabaseEntry>;
  listDatabases(organizationId: string): Promise<DatabaseSummary[]>;
  getDatabase(organizationId: string, databaseId: string): Promise<DatabaseSummary | null>;
  setReportInterval(organizationId: string, databaseId: string, seconds: number | null): Promise<boolean>;
  createApiKey(
    organizationId: string,
    key: { id: string; databaseId: string; keyHash: string; displayPrefix: string; label: string; createdBy: string },
  ): Promise<ApiKeyInfo | null>;
  listApiKeys(organizationId: string, databaseId: string): Promise<ApiKeyInfo[]>;
  /** False when there is no such key of this organization's database. */
  revokeApiKey(organizationId: string, databaseId: string, keyId: string): Promise<boolean>;
  countLiveApiKeys(databaseId: string): Promise<number>;

  // Commands, reports
  createCommand(organizationId: string, databaseId: string, command: Command, createdBy: string): Promise<CommandRecord | null>;
  countOpenCommands(databaseId: string): Promise<number>;
  listCommands(organizationId: string, databaseId: string, limit: number): Promise<CommandRecord[]>;
  latestReport(organizationId: string, databaseId: string): Promise<StoredReport | null>;
  /** The reports with metrics received since `since`, the newest `limit` of them, oldest first. */
  recentReports(organizationId: string, databaseId: string, since: Date, limit: number): Promise<StoredReport[]>;
  reportSeries(organizationId: string, databaseId: string, limit: number): Promise<ReportPoint[]>;
  recentEvents(organizationId: string, databaseId: string, limit: number): Promise<StoredEvent[]>;
}

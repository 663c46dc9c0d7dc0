// Rows as the SQL modules read them, and the little they all use, turned into the features' types.
import type { Command, SystemInfo, TargetKind } from '../../protocol/v1.ts';
import type { AgentLease } from '../agents/store.ts';
import type { CommandOutcome, CommandRecord, CommandStatus, DatabaseEntry } from '../databases/store.ts';
import type { Role, User } from '../people/store.ts';
import type { Queryable } from './driver.ts';

export async function one<T extends object>(
  q: Queryable,
  text: string,
  params: readonly unknown[],
  options?: { name?: string },
): Promise<T | null> {
  return (await q.query<T>(text, params, options))[0] ?? null;
}

export interface UserRow {
  id: string;
  organization_id: string;
  username: string;
  role: Role;
  created_at: Date;
}

export interface DatabaseRow {
  id: string;
  organization_id: string;
  name: string;
  target: TargetKind;
  report_interval_seconds: number | null;
  created_at: Date;
}

export interface LeaseColumns {
  lease_id: string | null;
  hostname: string | null;
  pid: number | null;
  agent_version: string | null;
  lease_target: TargetKind | null;
  target_identity: string | null;
  mode: string | null;
  allow_restart: boolean | null;
  include_queries: boolean | null;
  system: SystemInfo | null;
  started_at: Date | null;
  expires_at: Date | null;
  released_at: Date | null;
  last_report_at: Date | null;
  last_seq: number | null;
  live: boolean | null;
}

export const LEASE_COLUMNS = `l.lease_id, l.hostname, l.pid::float8 AS pid, l.agent_version, l.target AS lease_target, l.target_identity,
  l.mode, l.allow_restart, l.include_queries, l.system, l.started_at, l.expires_at, l.released_at,
  l.last_report_at, l.last_seq::float8 AS last_seq, (l.released_at IS NULL AND l.expires_at > now()) AS live`;

export const DATABASE_COLUMNS = 'd.id, d.organization_id, d.name, d.target, d.report_interval_seconds, d.created_at';

export interface CommandRow {
  id: string;
  database_id: string;
  body: Command;
  status: CommandStatus;
  created_by: string | null;
  created_at: Date;
  sent_at: Date | null;
  sent_count: number;
  acked_at: Date | null;
  outcome: CommandOutcome | null;
  deliver_by: Date | null;
}

export const COMMAND_COLUMNS = `c.id, c.database_id, c.body, c.status, u.username AS created_by, c.created_at, c.sent_at,
  c.sent_count, c.acked_at, c.outcome, c.deliver_by`;

/** The outcome the service writes on a command it cancels (never acknowledged: acked_at stays NULL). */
export function cancelledOutcome(reason: string): string {
  return JSON.stringify({ status: 'failed', effective: {}, errors: [reason], restarted: false, restored: false } satisfies CommandOutcome);
}

export function toUser(row: UserRow): User {
  return { id: row.id, organizationId: row.organization_id, username: row.username, role: row.role, createdAt: row.created_at };
}

export function toDatabase(row: DatabaseRow): DatabaseEntry {
  return {
    id: row.id,
    organizationId: row.organization_id,
    name: row.name,
    target: row.target,
    reportIntervalSeconds: row.report_interval_seconds,
    createdAt: row.created_at,
  };
}

export function toLease(row: LeaseColumns): AgentLease | null {
  if (row.lease_id === null) return null;
  return {
    leaseId: row.lease_id,
    hostname: row.hostname ?? '',
    pid: row.pid ?? 0,
    agentVersion: row.agent_version ?? '',
    // agent_leases.target is NOT NULL: a row with a lease has one.
    target: row.lease_target ?? '',
    targetIdentity: row.target_identity ?? '',
    mode: row.mode ?? '',
    allowRestart: row.allow_restart ?? false,
    includeQueries: row.include_queries ?? false,
    system: row.system ?? { serverVersion: '', serverVersionNum: 1, machine: null, settings: [], applyBlockedReason: null },
    startedAt: row.started_at ?? new Date(0),
    expiresAt: row.expires_at ?? new Date(0),
    releasedAt: row.released_at,
    lastReportAt: row.last_report_at,
    lastSeq: row.last_seq,
    live: row.live ?? false,
  };
}

export function toCommand(row: CommandRow): CommandRecord {
  return {
    id: row.id,
    databaseId: row.database_id,
    command: row.body,
    status: row.status,
    createdBy: row.created_by,
    createdAt: row.created_at,
    sentAt: row.sent_at,
    sentCount: row.sent_count,
    ackedAt: row.acked_at,
    outcome: row.outcome,
    deliverBy: row.deliver_by,
  };
}

export function isUniqueViolation(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: unknown }).code === '23505';
}

/** One command of a database (the tuning sessions read their own). */
export async function findCommand(q: Queryable, databaseId: string, commandId: string): Promise<CommandRecord | null> {
  const row = await one<CommandRow>(
    q,
    `SELECT ${COMMAND_COLUMNS} FROM commands c LEFT JOIN users u ON u.id = c.created_by WHERE c.id = $1::uuid AND c.database_id = $2::uuid`,
    [commandId, databaseId],
  );
  return row ? toCommand(row) : null;
}

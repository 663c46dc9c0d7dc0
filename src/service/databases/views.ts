// The JSON shapes the people's API returns (documented in docs/service.md).
import type { CommandRecord, DatabaseSummary, StoredReport } from './store.ts';
import type { User } from '../people/store.ts';

export function userView(user: User) {
  return {
    id: user.id,
    username: user.username,
    role: user.role,
    /** Deprecated (one release): role admin. */
    isAdmin: user.role === 'admin',
    createdAt: user.createdAt.toISOString(),
  };
}

export function databaseView(db: DatabaseSummary, defaultIntervalSeconds: number) {
  const agent = db.agent;
  return {
    id: db.id,
    name: db.name,
    target: db.target,
    reportIntervalSeconds: db.reportIntervalSeconds ?? defaultIntervalSeconds,
    reportIntervalIsDefault: db.reportIntervalSeconds === null,
    createdAt: db.createdAt.toISOString(),
    agent: agent && {
      connected: agent.live,
      hostname: agent.hostname,
      pid: agent.pid,
      agentVersion: agent.agentVersion,
      target: agent.target,
      targetIdentity: agent.targetIdentity,
      mode: agent.mode,
      allowRestart: agent.allowRestart,
      includeQueries: agent.includeQueries,
      serverVersion: agent.system.serverVersion,
      applyBlockedReason: agent.system.applyBlockedReason,
      /** The preflight's failed and warned lines at the agent's start; null from older agents. */
      preflight: agent.system.preflight ?? null,
      startedAt: agent.startedAt.toISOString(),
      lastReportAt: agent.lastReportAt?.toISOString() ?? null,
      leaseExpiresAt: agent.expiresAt.toISOString(),
      releasedAt: agent.releasedAt?.toISOString() ?? null,
    },
  };
}

/** pending → sent → applied | refused | failed (the agent's outcome). */
export function commandState(record: CommandRecord): 'pending' | 'sent' | 'applied' | 'refused' | 'failed' {
  return record.status === 'done' ? (record.outcome?.status ?? 'applied') : record.status;
}

export function commandView(record: CommandRecord) {
  return {
    id: record.id,
    state: commandState(record),
    command: record.command,
    createdBy: record.createdBy,
    createdAt: record.createdAt.toISOString(),
    sentAt: record.sentAt?.toISOString() ?? null,
    sentCount: record.sentCount,
    ackedAt: record.ackedAt?.toISOString() ?? null,
    outcome: record.outcome,
  };
}

export function reportView(report: StoredReport) {
  return {
    id: report.id,
    leaseId: report.leaseId,
    seq: report.seq,
    sentAt: report.sentAt.toISOString(),
    receivedAt: report.receivedAt.toISOString(),
    metrics: report.metrics,
    settings: report.settings,
    targetMetrics: report.targetMetrics,
  };
}

// What the audit log asks of its storage: entries appended, and read back by organization. There
// is no method that changes or deletes an entry: only retention removes the oldest (storage's
// prune), and the storage refuses anything else (a trigger, migration 11).
import type { LoginVia } from '../people/store.ts';

/** Every action the log records (docs/people.md, "The audit log"). */
export const AUDIT_ACTIONS = [
  'login',
  'login.refused',
  'logout',
  'user.created',
  'user.role_changed',
  'user.removed',
  'database.created',
  'database.report_interval_changed',
  'api_key.created',
  'api_key.revoked',
  'tuning_session.started',
  'tuning_session.stopped',
  'tuning_session.approved',
  'tuning_session.reverted',
  'command.apply',
  'command.revert',
  'api_token.created',
  'api_token.revoked',
  'webhook.created',
  'webhook.removed',
] as const;
export type AuditAction = (typeof AUDIT_ACTIONS)[number];

/** Who did it: a user, an API token, or nobody known (a refused login names what was tried). */
export interface AuditActor {
  kind: 'user' | 'token' | 'anonymous';
  /** The user's or the token's id; null for anonymous. */
  id: string | null;
  /** The username or the token's name, as it was then. */
  name: string;
  via: LoginVia | null;
}

export interface NewAuditEvent {
  organizationId: string | null;
  actor: AuditActor;
  address: string | null;
  databaseId: string | null;
  action: AuditAction;
  /** What changed (before → after where there is a before), never a secret (audit/record.ts checks). */
  details: Record<string, unknown>;
}

export interface AuditEvent extends NewAuditEvent {
  id: number;
  at: Date;
}

export interface AuditFilter {
  databaseId?: string | undefined;
  /** A username or token name. */
  actor?: string | undefined;
  action?: AuditAction | undefined;
  since?: Date | undefined;
  until?: Date | undefined;
  /** Entries older than this id (the previous page's `next`). */
  before?: number | undefined;
  limit: number;
}

export interface AuditStore {
  appendAudit(event: NewAuditEvent): Promise<void>;
  /** The organization's entries that pass the filter, newest first. */
  listAudit(organizationId: string, filter: AuditFilter): Promise<AuditEvent[]>;
}

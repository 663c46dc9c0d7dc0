// The one writer of the audit log: every action that changes something calls it, whoever acts
// (a person through a page or the API, or an API token). It names the actor as the request
// authenticated them, their address and organization, the database if any, and what changed.
// Details never hold a secret: a key that names one is refused here, so that no caller can slip
// one in by mistake.
import type { Actor } from '../people/store.ts';
import type { AuditAction, AuditActor, AuditStore } from './store.ts';

export interface AuditDeps {
  stores: { audit: AuditStore };
}

/** Keys a detail must never have: their values would be secrets. */
const SECRET_KEY = /pass(word)?|secret|hash|^(api)?key$|^token$|csrf|cookie/i;

function refuseSecrets(details: unknown, path = 'details'): void {
  if (typeof details !== 'object' || details === null) return;
  for (const [key, value] of Object.entries(details)) {
    if (SECRET_KEY.test(key)) throw new Error(`audit: ${path}.${key} would hold a secret`);
    refuseSecrets(value, `${path}.${key}`);
  }
}

export function auditActorOf(actor: Actor): AuditActor {
  return actor.token
    ? { kind: 'token', id: actor.token.id, name: actor.token.name, via: 'token' }
    : { kind: 'user', id: actor.id, name: actor.username, via: actor.via };
}

/** Appends an entry for what `actor` did in their organization. */
export async function recordAudit(
  deps: AuditDeps,
  actor: Actor,
  action: AuditAction,
  details: Record<string, unknown> = {},
  databaseId: string | null = null,
): Promise<void> {
  refuseSecrets(details);
  await deps.stores.audit.appendAudit({
    organizationId: actor.organizationId,
    actor: auditActorOf(actor),
    address: actor.address,
    databaseId,
    action,
    details,
  });
}

/** Appends an entry for a login attempt, before anyone is logged in: the username tried, and the
 * organization when it names a user. */
export async function recordLoginAttempt(
  deps: AuditDeps,
  attempt: { username: string; address: string; organizationId: string | null; userId: string | null; via: 'password' | 'sso' },
  action: 'login' | 'login.refused',
  details: Record<string, unknown> = {},
): Promise<void> {
  refuseSecrets(details);
  await deps.stores.audit.appendAudit({
    organizationId: attempt.organizationId,
    actor: { kind: attempt.userId ? 'user' : 'anonymous', id: attempt.userId, name: attempt.username, via: attempt.via },
    address: attempt.address,
    databaseId: null,
    action,
    details,
  });
}

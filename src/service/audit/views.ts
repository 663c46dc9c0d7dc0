// An audit entry as the people's API and the export show it.
import type { AuditEvent } from './store.ts';

export function auditEventView(event: AuditEvent) {
  return {
    id: event.id,
    at: event.at.toISOString(),
    actor: { username: event.actor.name, kind: event.actor.kind, via: event.actor.via },
    address: event.address,
    action: event.action,
    ...(event.databaseId && { databaseId: event.databaseId }),
    details: event.details,
  };
}

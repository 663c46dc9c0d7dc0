// Reading the audit log: an organization's, for its admins; a database's, for anyone of its
// organization (a viewer reads the audit of its databases).
import { authorize, type AuthorizeDeps } from '../authorize.ts';
import type { User } from '../people/store.ts';
import type { AuditDeps } from './record.ts';
import type { AuditEvent, AuditFilter } from './store.ts';

export async function readAudit(deps: AuditDeps & AuthorizeDeps, user: User, filter: AuditFilter): Promise<AuditEvent[]> {
  if (filter.databaseId) await authorize(deps, user, { databaseId: filter.databaseId });
  else await authorize(deps, user, { role: 'admin', to: "read the organization's audit log" });
  return deps.stores.audit.listAudit(user.organizationId, filter);
}

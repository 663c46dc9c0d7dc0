// What people may ask of the audit log: filters and a page (the JSON API and the pages alike).
import { z } from 'zod';
import { AUDIT_ACTIONS } from './store.ts';

const time = z.iso
  .datetime({ offset: true, error: 'expected an ISO 8601 time such as 2026-01-31T12:00:00Z' })
  .transform((v) => new Date(v));

export const AuditQuerySchema = z.object({
  databaseId: z.uuid({ error: 'expected a database id (a UUID)' }).optional(),
  /** A username, or an API token's name. */
  actor: z.string().min(1).max(100).optional(),
  action: z.enum(AUDIT_ACTIONS, { error: `expected one of ${AUDIT_ACTIONS.join(', ')}` }).optional(),
  since: time.optional(),
  until: time.optional(),
  /** The previous page's `next`. */
  before: z.coerce.number({ error: 'expected the previous page’s next' }).int().min(1).optional(),
  limit: z.coerce.number({ error: 'expected a whole number' }).int().min(1).max(500).default(100),
});
export type AuditQuery = z.infer<typeof AuditQuerySchema>;

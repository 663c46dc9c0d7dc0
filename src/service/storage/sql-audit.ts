// The audit log's storage (audit/store.ts): appended, read by organization, newest first. Nothing
// here updates or deletes an entry; retention (sql-storage.ts prune) is the one delete the
// storage's trigger lets through (migration 11).
import type { AuditEvent, AuditStore } from '../audit/store.ts';
import type { LoginVia } from '../people/store.ts';
import type { Queryable, SqlDriver } from './driver.ts';

interface AuditRow {
  id: number;
  at: Date;
  organization_id: string | null;
  actor_kind: AuditEvent['actor']['kind'];
  actor_id: string | null;
  actor_name: string;
  via: LoginVia | null;
  address: string | null;
  database_id: string | null;
  action: AuditEvent['action'];
  details: Record<string, unknown>;
}

export function createAuditStore(driver: SqlDriver): AuditStore {
  const db: Queryable = driver;
  return {
    async appendAudit(e) {
      await db.query(
        `INSERT INTO audit_events (organization_id, actor_kind, actor_id, actor_name, via, address, database_id, action, details)
         VALUES ($1::uuid, $2, $3::uuid, $4, $5, $6, $7::uuid, $8, $9::jsonb)`,
        [
          e.organizationId,
          e.actor.kind,
          e.actor.id,
          e.actor.name,
          e.actor.via,
          e.address,
          e.databaseId,
          e.action,
          JSON.stringify(e.details),
        ],
      );
    },

    async listAudit(organizationId, f) {
      const rows = await db.query<AuditRow>(
        `SELECT id::float8 AS id, at, organization_id, actor_kind, actor_id, actor_name, via, address, database_id, action, details
           FROM audit_events
          WHERE organization_id = $1::uuid
            AND ($2::uuid IS NULL OR database_id = $2::uuid)
            AND ($3::text IS NULL OR actor_name = $3::text)
            AND ($4::text IS NULL OR action = $4::text)
            AND ($5::timestamptz IS NULL OR at >= $5::timestamptz)
            AND ($6::timestamptz IS NULL OR at < $6::timestamptz)
            AND ($7::bigint IS NULL OR id < $7::bigint)
          ORDER BY audit_events.id DESC
          LIMIT $8::int`,
        [
          organizationId,
          f.databaseId ?? null,
          f.actor ?? null,
          f.action ?? null,
          f.since?.toISOString() ?? null,
          f.until?.toISOString() ?? null,
          f.before ?? null,
          f.limit,
        ],
      );
      return rows.map((r) => ({
        id: r.id,
        at: r.at,
        organizationId: r.organization_id,
        actor: { kind: r.actor_kind, id: r.actor_id, name: r.actor_name, via: r.via },
        address: r.address,
        databaseId: r.database_id,
        action: r.action,
        details: r.details,
      }));
    },
  };
}

// Databases, their API keys, and what people read of each: commands, reports, events. Every
// query names the organization, so one organization never reads another's rows.
import {
  KEY_REVOKED_REASON,
  type ApiKeyInfo,
  type DatabaseStore,
  type ReportPoint,
  type StoredEvent,
  type StoredReport,
} from '../databases/store.ts';
import type { Queryable, SqlDriver } from './driver.ts';
import { readReportBody } from '../agents/report-body.ts';
import {
  COMMAND_COLUMNS,
  DATABASE_COLUMNS,
  LEASE_COLUMNS,
  cancelledOutcome,
  one,
  toCommand,
  toDatabase,
  toLease,
  type CommandRow,
  type DatabaseRow,
  type LeaseColumns,
} from './sql-rows.ts';

interface ApiKeyRow {
  id: string;
  database_id: string;
  display_prefix: string;
  label: string;
  created_at: Date;
  revoked_at: Date | null;
}

function toApiKey(row: ApiKeyRow): ApiKeyInfo {
  return {
    id: row.id,
    databaseId: row.database_id,
    displayPrefix: row.display_prefix,
    label: row.label,
    createdAt: row.created_at,
    revokedAt: row.revoked_at,
  };
}

/** A report row as read back for people: its body decompressed, parsed and redacted. */
interface StoredReportRow {
  id: number;
  lease_id: string;
  seq: number;
  sent_at: Date;
  received_at: Date;
  body: Uint8Array;
}

function toStoredReport(row: StoredReportRow): StoredReport {
  return { id: row.id, leaseId: row.lease_id, seq: row.seq, sentAt: row.sent_at, receivedAt: row.received_at, ...readReportBody(row.body) };
}

export function createDatabaseStore(driver: SqlDriver): DatabaseStore {
  const db: Queryable = driver;

  /** The database's row, if it belongs to the organization. */
  async function ownedDatabase(organizationId: string, databaseId: string): Promise<boolean> {
    const row = await one(db, 'SELECT 1 AS ok FROM databases WHERE id = $1::uuid AND organization_id = $2::uuid', [
      databaseId,
      organizationId,
    ]);
    return row !== null;
  }

  return {
    async createDatabase(organizationId, entry) {
      const row = await one<DatabaseRow>(
        db,
        `INSERT INTO databases (id, organization_id, name, target) VALUES ($1::uuid, $2::uuid, $3, $4)
         RETURNING id, organization_id, name, target, report_interval_seconds, created_at`,
        [entry.id, organizationId, entry.name, entry.target],
      );
      return toDatabase(row!);
    },

    async listDatabases(organizationId) {
      const rows = await db.query<DatabaseRow & LeaseColumns>(
        `SELECT ${DATABASE_COLUMNS}, ${LEASE_COLUMNS}
           FROM databases d LEFT JOIN agent_leases l ON l.database_id = d.id
          WHERE d.organization_id = $1::uuid ORDER BY d.created_at, d.name`,
        [organizationId],
      );
      return rows.map((row) => ({ ...toDatabase(row), agent: toLease(row) }));
    },

    async getDatabase(organizationId, databaseId) {
      const row = await one<DatabaseRow & LeaseColumns>(
        db,
        `SELECT ${DATABASE_COLUMNS}, ${LEASE_COLUMNS}
           FROM databases d LEFT JOIN agent_leases l ON l.database_id = d.id
          WHERE d.id = $1::uuid AND d.organization_id = $2::uuid`,
        [databaseId, organizationId],
      );
      return row ? { ...toDatabase(row), agent: toLease(row) } : null;
    },

    async setReportInterval(organizationId, databaseId, seconds) {
      const rows = await db.query(
        'UPDATE databases SET report_interval_seconds = $3::int WHERE id = $1::uuid AND organization_id = $2::uuid RETURNING id',
        [databaseId, organizationId, seconds],
      );
      return rows.length > 0;
    },

    async createApiKey(organizationId, key) {
      if (!(await ownedDatabase(organizationId, key.databaseId))) return null;
      const row = await one<ApiKeyRow>(
        db,
        `INSERT INTO api_keys (id, database_id, key_hash, display_prefix, label, created_by)
         VALUES ($1::uuid, $2::uuid, $3, $4, $5, $6::uuid)
         RETURNING id, database_id, display_prefix, label, created_at, revoked_at`,
        [key.id, key.databaseId, key.keyHash, key.displayPrefix, key.label, key.createdBy],
      );
      return toApiKey(row!);
    },

    async listApiKeys(organizationId, databaseId) {
      const rows = await db.query<ApiKeyRow>(
        `SELECT k.id, k.database_id, k.display_prefix, k.label, k.created_at, k.revoked_at
           FROM api_keys k JOIN databases d ON d.id = k.database_id
          WHERE k.database_id = $1::uuid AND d.organization_id = $2::uuid
          ORDER BY k.created_at`,
        [databaseId, organizationId],
      );
      return rows.map(toApiKey);
    },

    async revokeApiKey(organizationId, databaseId, keyId) {
      // In the same statement, so that no report in between hands one out: the database's apply
      // commands not acknowledged yet are cancelled (reverts stay, a late one is safe).
      const rows = await db.query<{ revoked_now: boolean }>(
        `WITH key AS (
           SELECT k.id, k.revoked_at IS NULL AS live FROM api_keys k JOIN databases d ON d.id = k.database_id
            WHERE k.id = $1::uuid AND k.database_id = $2::uuid AND d.organization_id = $3::uuid
         ), revoked AS (
           UPDATE api_keys k SET revoked_at = now() FROM key WHERE k.id = key.id AND key.live RETURNING k.id
         ), cancelled AS (
           UPDATE commands c SET status = 'done', outcome = $4::jsonb
            WHERE c.database_id = $2::uuid AND c.status <> 'done' AND c.body ->> 'kind' = 'apply' AND EXISTS (SELECT 1 FROM revoked)
           RETURNING c.id
         )
         SELECT key.live AS revoked_now FROM key`,
        [keyId, databaseId, organizationId, cancelledOutcome(KEY_REVOKED_REASON)],
      );
      return rows.length > 0;
    },

    async countLiveApiKeys(databaseId) {
      const row = await one<{ n: number }>(
        db,
        'SELECT count(*)::int AS n FROM api_keys WHERE database_id = $1::uuid AND revoked_at IS NULL',
        [databaseId],
      );
      return row?.n ?? 0;
    },

    async createCommand(organizationId, databaseId, command, createdBy) {
      if (!(await ownedDatabase(organizationId, databaseId))) return null;
      const row = await one<CommandRow>(
        db,
        `WITH c AS (
           INSERT INTO commands (id, database_id, body, status, created_by)
           VALUES ($1::uuid, $2::uuid, $3::jsonb, 'pending', $4::uuid)
           RETURNING *
         )
         SELECT ${COMMAND_COLUMNS} FROM c LEFT JOIN users u ON u.id = c.created_by`,
        [command.id, databaseId, JSON.stringify(command), createdBy],
      );
      return toCommand(row!);
    },

    async countOpenCommands(databaseId) {
      const row = await one<{ n: number }>(
        db,
        "SELECT count(*)::int AS n FROM commands WHERE database_id = $1::uuid AND status <> 'done'",
        [databaseId],
      );
      return row?.n ?? 0;
    },

    async listCommands(organizationId, databaseId, limit) {
      const rows = await db.query<CommandRow>(
        `SELECT ${COMMAND_COLUMNS}
           FROM commands c JOIN databases d ON d.id = c.database_id LEFT JOIN users u ON u.id = c.created_by
          WHERE c.database_id = $1::uuid AND d.organization_id = $2::uuid
          ORDER BY c.seq DESC LIMIT $3::int`,
        [databaseId, organizationId, limit],
      );
      return rows.map(toCommand);
    },

    async latestReport(organizationId, databaseId) {
      const row = await one<StoredReportRow>(
        db,
        `SELECT r.id::float8 AS id, r.lease_id, r.seq::float8 AS seq, r.sent_at, r.received_at, r.body
           FROM reports r JOIN databases d ON d.id = r.database_id
          WHERE r.database_id = $1::uuid AND d.organization_id = $2::uuid
          ORDER BY r.id DESC LIMIT 1`,
        [databaseId, organizationId],
      );
      return row ? toStoredReport(row) : null;
    },

    async recentReports(organizationId, databaseId, since, limit) {
      const rows = await db.query<StoredReportRow>(
        `SELECT id, lease_id, seq, sent_at, received_at, body FROM (
           SELECT r.id::float8 AS id, r.lease_id, r.seq::float8 AS seq, r.sent_at, r.received_at, r.body
             FROM reports r JOIN databases d ON d.id = r.database_id
            WHERE r.database_id = $1::uuid AND d.organization_id = $2::uuid AND r.has_metrics AND r.received_at >= $3::timestamptz
            ORDER BY r.id DESC LIMIT $4::int
         ) last ORDER BY id`,
        [databaseId, organizationId, since.toISOString(), limit],
      );
      return rows.map(toStoredReport);
    },

    async reportSeries(organizationId, databaseId, limit) {
      const rows = await db.query<{
        received_at: Date;
        avg_query_runtime_ms: number | null;
        tps: number | null;
        cache_hit_ratio: number | null;
        connections: number | null;
        statements_per_second: number | null;
      }>(
        `SELECT received_at, avg_query_runtime_ms, tps, cache_hit_ratio, connections, statements_per_second FROM (
           SELECT r.id, r.received_at, r.avg_query_runtime_ms, r.tps, r.cache_hit_ratio, r.connections, r.statements_per_second
             FROM reports r JOIN databases d ON d.id = r.database_id
            WHERE r.database_id = $1::uuid AND d.organization_id = $2::uuid
            ORDER BY r.id DESC LIMIT $3::int
         ) last ORDER BY id`,
        [databaseId, organizationId, limit],
      );
      return rows.map((r): ReportPoint => ({
        receivedAt: r.received_at,
        avgQueryRuntimeMs: r.avg_query_runtime_ms,
        tps: r.tps,
        cacheHitRatio: r.cache_hit_ratio,
        connections: r.connections,
        statementsPerSecond: r.statements_per_second,
      }));
    },

    async recentEvents(organizationId, databaseId, limit) {
      const rows = await db.query<{
        at: Date;
        level: StoredEvent['level'];
        code: string;
        message: string;
        command_id: string | null;
        received_at: Date;
      }>(
        `SELECT e.at, e.level, e.code, e.message, e.command_id, e.received_at
           FROM agent_events e JOIN databases d ON d.id = e.database_id
          WHERE e.database_id = $1::uuid AND d.organization_id = $2::uuid
          ORDER BY e.id DESC LIMIT $3::int`,
        [databaseId, organizationId, limit],
      );
      return rows.map((r) => ({
        at: r.at,
        level: r.level,
        code: r.code,
        message: r.message,
        commandId: r.command_id,
        receivedAt: r.received_at,
      }));
    },
  };
}

// The Storage interface in SQL that runs unchanged on PGlite and on PostgreSQL. Every query a
// person's request makes names the account, so one account never reads another's rows. The
// agent's report is one statement (lease renewal, report, events, next command), as it is by
// far the most frequent request.
import { randomUUID } from 'node:crypto';
import type { Command, SystemInfo, TargetKindV1 } from '../../protocol/v1.ts';
import type { Queryable, SqlDriver } from './driver.ts';
import { readReportBody } from './report-body.ts';
import { readMetricsSnapshot } from './sql-metrics.ts';
import { createSessionStorage } from './sql-sessions.ts';
import {
  UsernameTakenError,
  type AckResult,
  type AgentLease,
  type ApiKeyInfo,
  type CommandOutcome,
  type CommandRecord,
  type CommandStatus,
  type DatabaseEntry,
  type LeasePolicy,
  type ReportPoint,
  type ReportResult,
  type RetentionPolicy,
  type Session,
  type StartResult,
  type StopResult,
  type Storage,
  type StoredEvent,
  type StoredReport,
  type User,
} from './storage.ts';

/** Serializes the creation of the first admin across replicas. */
const FIRST_ADMIN_LOCK_KEY = 0x74756e6573;

interface UserRow {
  id: string;
  account_id: string;
  username: string;
  is_admin: boolean;
  created_at: Date;
}

interface DatabaseRow {
  id: string;
  account_id: string;
  name: string;
  target: TargetKindV1;
  report_interval_seconds: number | null;
  created_at: Date;
}

interface LeaseColumns {
  lease_id: string | null;
  hostname: string | null;
  pid: number | null;
  agent_version: string | null;
  lease_target: TargetKindV1 | null;
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

const LEASE_COLUMNS = `l.lease_id, l.hostname, l.pid::float8 AS pid, l.agent_version, l.target AS lease_target, l.target_identity,
  l.mode, l.allow_restart, l.include_queries, l.system, l.started_at, l.expires_at, l.released_at,
  l.last_report_at, l.last_seq::float8 AS last_seq, (l.released_at IS NULL AND l.expires_at > now()) AS live`;

const DATABASE_COLUMNS = 'd.id, d.account_id, d.name, d.target, d.report_interval_seconds, d.created_at';

interface ApiKeyRow {
  id: string;
  database_id: string;
  display_prefix: string;
  label: string;
  created_at: Date;
  revoked_at: Date | null;
}

interface CommandRow {
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
}

const COMMAND_COLUMNS = `c.id, c.database_id, c.body, c.status, u.username AS created_by, c.created_at, c.sent_at,
  c.sent_count, c.acked_at, c.outcome`;

function toUser(row: UserRow): User {
  return { id: row.id, accountId: row.account_id, username: row.username, isAdmin: row.is_admin, createdAt: row.created_at };
}

function toDatabase(row: DatabaseRow): DatabaseEntry {
  return {
    id: row.id,
    accountId: row.account_id,
    name: row.name,
    target: row.target,
    reportIntervalSeconds: row.report_interval_seconds,
    createdAt: row.created_at,
  };
}

function toLease(row: LeaseColumns): AgentLease | null {
  if (row.lease_id === null) return null;
  return {
    leaseId: row.lease_id,
    hostname: row.hostname ?? '',
    pid: row.pid ?? 0,
    agentVersion: row.agent_version ?? '',
    target: row.lease_target ?? 'local',
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

function toCommand(row: CommandRow): CommandRecord {
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
  };
}

function isUniqueViolation(err: unknown): boolean {
  return typeof err === 'object' && err !== null && (err as { code?: unknown }).code === '23505';
}

function leaseSeconds(policy: LeasePolicy, intervalSeconds: number): number {
  return Math.max(policy.intervalsPerLease * intervalSeconds, policy.minLeaseSeconds);
}

export function createSqlStorage(driver: SqlDriver): Storage {
  const db: Queryable = driver;

  async function one<T extends object>(q: Queryable, text: string, params: readonly unknown[], options?: { name?: string }): Promise<T | null> {
    const rows = await q.query<T>(text, params, options);
    return rows[0] ?? null;
  }

  async function insertUser(q: Queryable, username: string, passwordHash: string, isAdmin: boolean): Promise<User> {
    const accountId = randomUUID();
    await q.query('INSERT INTO accounts (id, name) VALUES ($1::uuid, $2)', [accountId, username]);
    const row = await one<UserRow>(
      q,
      `INSERT INTO users (id, account_id, username, password_hash, is_admin) VALUES ($1::uuid, $2::uuid, $3, $4, $5)
       RETURNING id, account_id, username, is_admin, created_at`,
      [randomUUID(), accountId, username, passwordHash, isAdmin],
    );
    return toUser(row!);
  }

  /** The database's row, if it belongs to the account. */
  async function ownedDatabase(accountId: string, databaseId: string): Promise<boolean> {
    const row = await one(db, 'SELECT 1 AS ok FROM databases WHERE id = $1::uuid AND account_id = $2::uuid', [databaseId, accountId]);
    return row !== null;
  }

  /** One command of a database, for the tuning sessions. */
  async function findCommand(q: Queryable, databaseId: string, commandId: string): Promise<CommandRecord | null> {
    const row = await one<CommandRow>(
      q,
      `SELECT ${COMMAND_COLUMNS} FROM commands c LEFT JOIN users u ON u.id = c.created_by WHERE c.id = $1::uuid AND c.database_id = $2::uuid`,
      [commandId, databaseId],
    );
    return row ? toCommand(row) : null;
  }

  const storage: Storage = {
    kind: driver.kind,
    ...createSessionStorage(driver, findCommand),

    createFirstAdmin: (username, passwordHash) =>
      driver.withAdvisoryLock(FIRST_ADMIN_LOCK_KEY, async (conn) => {
        const existing = await one(conn, 'SELECT 1 AS ok FROM users LIMIT 1', []);
        if (existing) return false;
        await conn.transaction((tx) => insertUser(tx, username, passwordHash, true));
        return true;
      }),

    async createUser(username, passwordHash, isAdmin) {
      try {
        return await driver.transaction((tx) => insertUser(tx, username, passwordHash, isAdmin));
      } catch (err) {
        if (isUniqueViolation(err)) throw new UsernameTakenError(`username "${username}" is taken`);
        throw err;
      }
    },

    async findUserForLogin(username) {
      const row = await one<UserRow & { password_hash: string }>(
        db,
        'SELECT id, account_id, username, is_admin, created_at, password_hash FROM users WHERE username = $1',
        [username],
      );
      return row ? { user: toUser(row), passwordHash: row.password_hash } : null;
    },

    async listUsers() {
      const rows = await db.query<UserRow>('SELECT id, account_id, username, is_admin, created_at FROM users ORDER BY created_at, username');
      return rows.map(toUser);
    },

    async createSession(tokenHash, userId, csrfToken, expiresAt) {
      await db.query('INSERT INTO sessions (token_hash, user_id, csrf_token, expires_at) VALUES ($1, $2::uuid, $3, $4::timestamptz)', [
        tokenHash,
        userId,
        csrfToken,
        expiresAt.toISOString(),
      ]);
    },

    async findSession(tokenHash) {
      const row = await one<UserRow & { csrf_token: string; expires_at: Date }>(
        db,
        `SELECT u.id, u.account_id, u.username, u.is_admin, u.created_at, s.csrf_token, s.expires_at
           FROM sessions s JOIN users u ON u.id = s.user_id
          WHERE s.token_hash = $1 AND s.expires_at > now()`,
        [tokenHash],
      );
      return row ? ({ user: toUser(row), csrfToken: row.csrf_token, expiresAt: row.expires_at } satisfies Session) : null;
    },

    async deleteSession(tokenHash) {
      await db.query('DELETE FROM sessions WHERE token_hash = $1', [tokenHash]);
    },

    async createDatabase(accountId, entry) {
      const row = await one<DatabaseRow>(
        db,
        `INSERT INTO databases (id, account_id, name, target) VALUES ($1::uuid, $2::uuid, $3, $4)
         RETURNING id, account_id, name, target, report_interval_seconds, created_at`,
        [entry.id, accountId, entry.name, entry.target],
      );
      return toDatabase(row!);
    },

    async listDatabases(accountId) {
      const rows = await db.query<DatabaseRow & LeaseColumns>(
        `SELECT ${DATABASE_COLUMNS}, ${LEASE_COLUMNS}
           FROM databases d LEFT JOIN agent_leases l ON l.database_id = d.id
          WHERE d.account_id = $1::uuid ORDER BY d.created_at, d.name`,
        [accountId],
      );
      return rows.map((row) => ({ ...toDatabase(row), agent: toLease(row) }));
    },

    async getDatabase(accountId, databaseId) {
      const row = await one<DatabaseRow & LeaseColumns>(
        db,
        `SELECT ${DATABASE_COLUMNS}, ${LEASE_COLUMNS}
           FROM databases d LEFT JOIN agent_leases l ON l.database_id = d.id
          WHERE d.id = $1::uuid AND d.account_id = $2::uuid`,
        [databaseId, accountId],
      );
      return row ? { ...toDatabase(row), agent: toLease(row) } : null;
    },

    async setReportInterval(accountId, databaseId, seconds) {
      const rows = await db.query(
        'UPDATE databases SET report_interval_seconds = $3::int WHERE id = $1::uuid AND account_id = $2::uuid RETURNING id',
        [databaseId, accountId, seconds],
      );
      return rows.length > 0;
    },

    async createApiKey(accountId, key) {
      if (!(await ownedDatabase(accountId, key.databaseId))) return null;
      const row = await one<ApiKeyRow>(
        db,
        `INSERT INTO api_keys (id, database_id, key_hash, display_prefix, label, created_by)
         VALUES ($1::uuid, $2::uuid, $3, $4, $5, $6::uuid)
         RETURNING id, database_id, display_prefix, label, created_at, revoked_at`,
        [key.id, key.databaseId, key.keyHash, key.displayPrefix, key.label, key.createdBy],
      );
      return toApiKey(row!);
    },

    async listApiKeys(accountId, databaseId) {
      const rows = await db.query<ApiKeyRow>(
        `SELECT k.id, k.database_id, k.display_prefix, k.label, k.created_at, k.revoked_at
           FROM api_keys k JOIN databases d ON d.id = k.database_id
          WHERE k.database_id = $1::uuid AND d.account_id = $2::uuid
          ORDER BY k.created_at`,
        [databaseId, accountId],
      );
      return rows.map(toApiKey);
    },

    async revokeApiKey(accountId, databaseId, keyId) {
      const rows = await db.query(
        `UPDATE api_keys k SET revoked_at = coalesce(k.revoked_at, now())
           FROM databases d
          WHERE k.id = $1::uuid AND k.database_id = $2::uuid AND d.id = k.database_id AND d.account_id = $3::uuid
          RETURNING k.id`,
        [keyId, databaseId, accountId],
      );
      return rows.length > 0;
    },

    async countLiveApiKeys(databaseId) {
      const row = await one<{ n: number }>(db, 'SELECT count(*)::int AS n FROM api_keys WHERE database_id = $1::uuid AND revoked_at IS NULL', [databaseId]);
      return row?.n ?? 0;
    },

    async createCommand(accountId, databaseId, command, createdBy) {
      if (!(await ownedDatabase(accountId, databaseId))) return null;
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
      const row = await one<{ n: number }>(db, "SELECT count(*)::int AS n FROM commands WHERE database_id = $1::uuid AND status <> 'done'", [databaseId]);
      return row?.n ?? 0;
    },

    async listCommands(accountId, databaseId, limit) {
      const rows = await db.query<CommandRow>(
        `SELECT ${COMMAND_COLUMNS}
           FROM commands c JOIN databases d ON d.id = c.database_id LEFT JOIN users u ON u.id = c.created_by
          WHERE c.database_id = $1::uuid AND d.account_id = $2::uuid
          ORDER BY c.seq DESC LIMIT $3::int`,
        [databaseId, accountId, limit],
      );
      return rows.map(toCommand);
    },

    async latestReport(accountId, databaseId) {
      const row = await one<{ id: number; lease_id: string; seq: number; sent_at: Date; received_at: Date; body: Uint8Array }>(
        db,
        `SELECT r.id::float8 AS id, r.lease_id, r.seq::float8 AS seq, r.sent_at, r.received_at, r.body
           FROM reports r JOIN databases d ON d.id = r.database_id
          WHERE r.database_id = $1::uuid AND d.account_id = $2::uuid
          ORDER BY r.id DESC LIMIT 1`,
        [databaseId, accountId],
      );
      if (!row) return null;
      return {
        id: row.id,
        leaseId: row.lease_id,
        seq: row.seq,
        sentAt: row.sent_at,
        receivedAt: row.received_at,
        ...readReportBody(row.body),
      } satisfies StoredReport;
    },

    async reportSeries(accountId, databaseId, limit) {
      const rows = await db.query<{ received_at: Date; avg_query_runtime_ms: number | null; tps: number | null; cache_hit_ratio: number | null; connections: number | null }>(
        `SELECT received_at, avg_query_runtime_ms, tps, cache_hit_ratio, connections FROM (
           SELECT r.id, r.received_at, r.avg_query_runtime_ms, r.tps, r.cache_hit_ratio, r.connections
             FROM reports r JOIN databases d ON d.id = r.database_id
            WHERE r.database_id = $1::uuid AND d.account_id = $2::uuid
            ORDER BY r.id DESC LIMIT $3::int
         ) last ORDER BY id`,
        [databaseId, accountId, limit],
      );
      return rows.map(
        (r): ReportPoint => ({
          receivedAt: r.received_at,
          avgQueryRuntimeMs: r.avg_query_runtime_ms,
          tps: r.tps,
          cacheHitRatio: r.cache_hit_ratio,
          connections: r.connections,
        }),
      );
    },

    async recentEvents(accountId, databaseId, limit) {
      const rows = await db.query<{ at: Date; level: StoredEvent['level']; code: string; message: string; command_id: string | null; received_at: Date }>(
        `SELECT e.at, e.level, e.code, e.message, e.command_id, e.received_at
           FROM agent_events e JOIN databases d ON d.id = e.database_id
          WHERE e.database_id = $1::uuid AND d.account_id = $2::uuid
          ORDER BY e.id DESC LIMIT $3::int`,
        [databaseId, accountId, limit],
      );
      return rows.map((r) => ({ at: r.at, level: r.level, code: r.code, message: r.message, commandId: r.command_id, receivedAt: r.received_at }));
    },

    async agentCredentials(databaseId) {
      const rows = await db.query<{ target: TargetKindV1; key_hash: string | null }>(
        `SELECT d.target, k.key_hash FROM databases d
           LEFT JOIN api_keys k ON k.database_id = d.id AND k.revoked_at IS NULL
          WHERE d.id = $1::uuid`,
        [databaseId],
        { name: 'agent_credentials' },
      );
      const first = rows[0];
      if (!first) return null;
      return { target: first.target, keyHashes: rows.flatMap((r) => (r.key_hash === null ? [] : [r.key_hash])) };
    },

    startAgent: (databaseId, request, newLeaseId, policy) =>
      driver.transaction(async (tx): Promise<StartResult> => {
        // Locking the database row makes concurrent starts for one database take turns.
        const database = await one<{ report_interval_seconds: number | null }>(
          tx,
          'SELECT report_interval_seconds FROM databases WHERE id = $1::uuid FOR UPDATE',
          [databaseId],
        );
        if (!database) throw new Error(`database ${databaseId} vanished`);
        const current = await one<LeaseColumns>(tx, `SELECT ${LEASE_COLUMNS} FROM agent_leases l WHERE l.database_id = $1::uuid`, [databaseId]);
        const holder = current ? toLease(current) : null;
        const resumed = holder !== null && holder.live && request.resumeLeaseId === holder.leaseId;
        if (holder?.live && !resumed) return { kind: 'conflict', holder };
        const leaseId = resumed ? holder.leaseId : newLeaseId;
        const intervalSeconds = database.report_interval_seconds ?? policy.defaultIntervalSeconds;
        const row = await one<{ expires_at: Date }>(
          tx,
          `INSERT INTO agent_leases (database_id, lease_id, hostname, pid, agent_version, target, target_identity, mode,
                                     allow_restart, include_queries, system, started_at, expires_at, released_at,
                                     last_report_at, last_seq)
           VALUES ($1::uuid, $2, $3, $4::bigint, $5, $6, $7, $8, $9::boolean, $10::boolean, $11::jsonb, now(),
                   now() + make_interval(secs => $12::float8), NULL, NULL, NULL)
           ON CONFLICT (database_id) DO UPDATE SET
             lease_id = excluded.lease_id, hostname = excluded.hostname, pid = excluded.pid,
             agent_version = excluded.agent_version, target = excluded.target,
             target_identity = excluded.target_identity, mode = excluded.mode,
             allow_restart = excluded.allow_restart, include_queries = excluded.include_queries,
             system = excluded.system, started_at = excluded.started_at, expires_at = excluded.expires_at,
             released_at = NULL, last_report_at = NULL, last_seq = NULL
           RETURNING expires_at`,
          [
            databaseId,
            leaseId,
            request.host.hostname,
            request.host.pid,
            request.agentVersion,
            request.target,
            request.targetIdentity,
            request.mode,
            request.allowRestart,
            request.includeQueries,
            JSON.stringify(request.system),
            leaseSeconds(policy, intervalSeconds),
          ],
        );
        return { kind: 'granted', leaseId, expiresAt: row!.expires_at, reportIntervalSeconds: intervalSeconds, resumed };
      }),

    async recordReport(databaseId, report, body, policy): Promise<ReportResult> {
      const derived = report.metrics?.derived;
      const row = await one<{ expires_at: Date; interval_seconds: number; command: Command | null }>(
        db,
        `WITH relaxed AS (
           -- Reports do not wait for their WAL to reach the disk: a crash of the database may
           -- lose the last fraction of a second of reports and lease renewals, which the agents
           -- send again (a lapsed lease is started again, a command re-sent under its id).
           SELECT set_config('synchronous_commit', 'off', true) AS done
         ), lease AS (
           UPDATE agent_leases l
              SET expires_at = now() + make_interval(secs => greatest($12::int * coalesce(d.report_interval_seconds, $13::int), $14::int)::float8),
                  last_report_at = now(), last_seq = $3::bigint
             FROM databases d
            WHERE l.database_id = $1::uuid AND d.id = l.database_id AND l.lease_id = $2
              AND l.released_at IS NULL AND l.expires_at > now()
           RETURNING l.expires_at, coalesce(d.report_interval_seconds, $13::int) AS interval_seconds
         ), report AS (
           INSERT INTO reports (database_id, lease_id, seq, sent_at, avg_query_runtime_ms, tps, cache_hit_ratio, connections, has_metrics, body)
           SELECT $1::uuid, $2, $3::bigint, $4::timestamptz, $5::float8, $6::float8, $7::float8, $8::float8, $9::boolean, $10::bytea FROM lease
           RETURNING id
         ), events AS (
           INSERT INTO agent_events (database_id, at, level, code, message, command_id)
           SELECT $1::uuid, (e ->> 'at')::timestamptz, e ->> 'level', e ->> 'code', e ->> 'message', e ->> 'commandId'
             FROM lease, json_array_elements($11::json) AS e
           RETURNING id
         ), next_command AS (
           SELECT c.id FROM commands c, lease
            WHERE c.database_id = $1::uuid AND c.status <> 'done'
            ORDER BY c.seq LIMIT 1
         ), sent AS (
           UPDATE commands c SET status = 'sent', sent_at = now(), sent_count = c.sent_count + 1
             FROM next_command n WHERE c.id = n.id
           RETURNING c.body
         )
         SELECT lease.expires_at, lease.interval_seconds, (SELECT body FROM sent) AS command FROM relaxed, lease`,
        [
          databaseId,
          report.leaseId,
          report.seq,
          report.sentAt,
          derived?.avgQueryRuntimeMs ?? null,
          derived?.tps ?? null,
          derived?.cacheHitRatio ?? null,
          report.metrics?.activity.connections.total ?? null,
          report.metrics !== null,
          body,
          report.events.length === 0 ? '[]' : JSON.stringify(report.events),
          policy.intervalsPerLease,
          policy.defaultIntervalSeconds,
          policy.minLeaseSeconds,
        ],
        { name: 'record_report' },
      );
      if (!row) return { kind: 'lease_expired' };
      return { kind: 'accepted', expiresAt: row.expires_at, reportIntervalSeconds: row.interval_seconds, command: row.command };
    },

    recordAck: (databaseId, commandId, ack) =>
      driver.transaction(async (tx): Promise<AckResult> => {
        // The outcome is worth keeping even if the lease lapsed meanwhile, as long as no other
        // agent took the database: the change it describes was made by this lease's agent.
        const lease = await one<{ lease_id: string }>(tx, 'SELECT lease_id FROM agent_leases WHERE database_id = $1::uuid', [databaseId]);
        if (!lease || lease.lease_id !== ack.leaseId) return { kind: 'lease_expired' };
        const { leaseId: _leaseId, ...outcome } = ack;
        const [updated] = await tx.query<{ kind: Command['kind'] }>(
          `UPDATE commands SET status = 'done', acked_at = now(), outcome = $3::jsonb
            WHERE id = $1::uuid AND database_id = $2::uuid AND status <> 'done' RETURNING body->>'kind' AS kind`,
          [commandId, databaseId, JSON.stringify(outcome)],
        );
        if (updated) return { kind: 'recorded', commandKind: updated.kind };
        const exists = await one(tx, 'SELECT 1 AS ok FROM commands WHERE id = $1::uuid AND database_id = $2::uuid', [commandId, databaseId]);
        return { kind: exists ? 'already_done' : 'unknown_command' };
      }),

    stopAgent: (databaseId, leaseId) =>
      driver.transaction(async (tx): Promise<StopResult> => {
        const lease = await one<{ lease_id: string; live: boolean }>(
          tx,
          'SELECT lease_id, (released_at IS NULL AND expires_at > now()) AS live FROM agent_leases WHERE database_id = $1::uuid FOR UPDATE',
          [databaseId],
        );
        if (!lease || lease.lease_id !== leaseId) return { kind: 'lease_expired' };
        if (!lease.live) return { kind: 'already_released' };
        await tx.query('UPDATE agent_leases SET released_at = now() WHERE database_id = $1::uuid', [databaseId]);
        return { kind: 'released' };
      }),

    async prune(policy: RetentionPolicy) {
      const count = async (deleteSql: string, params: readonly unknown[]): Promise<number> => {
        const row = await one<{ n: number }>(db, `WITH gone AS (${deleteSql} RETURNING 1) SELECT count(*)::int AS n FROM gone`, params);
        return row?.n ?? 0;
      };
      let reports = await count('DELETE FROM reports WHERE received_at < now() - make_interval(days => $1::int)', [policy.maxAgeDays]);
      let events = await count('DELETE FROM agent_events WHERE received_at < now() - make_interval(days => $1::int)', [policy.maxAgeDays]);
      const databases = await db.query<{ id: string }>('SELECT id FROM databases');
      for (const { id } of databases) {
        // Walks the newest N entries of the (database_id, id) index to find the cut.
        reports += await count(
          `DELETE FROM reports WHERE database_id = $1::uuid AND id <= (
             SELECT id FROM reports WHERE database_id = $1::uuid ORDER BY id DESC OFFSET $2::int LIMIT 1)`,
          [id, policy.maxReportsPerDatabase],
        );
        events += await count(
          `DELETE FROM agent_events WHERE database_id = $1::uuid AND id <= (
             SELECT id FROM agent_events WHERE database_id = $1::uuid ORDER BY id DESC OFFSET $2::int LIMIT 1)`,
          [id, policy.maxEventsPerDatabase],
        );
      }
      const sessions = await count('DELETE FROM sessions WHERE expires_at < now()', []);
      return { reports, events, sessions };
    },

    async ping() {
      await db.query('SELECT 1 AS ok');
    },

    metricsSnapshot: () => readMetricsSnapshot(db),

    close: () => driver.close(),
  };
  return storage;
}

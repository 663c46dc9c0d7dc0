// API tokens' storage (people/store.ts ApiTokenStore): only their SHA-256 hashes are kept.
import { TokenNameTakenError, type ApiToken, type ApiTokenStore, type Role } from '../people/store.ts';
import type { Queryable, SqlDriver } from './driver.ts';
import { isUniqueViolation, one, toUser, type UserRow } from './sql-rows.ts';

interface TokenRow {
  id: string;
  organization_id: string;
  name: string;
  role: Role;
  display_prefix: string;
  created_by: string;
  created_at: Date;
  expires_at: Date;
  revoked_at: Date | null;
  last_used_at: Date | null;
}

const COLUMNS =
  't.id, t.organization_id, t.name, t.role, t.display_prefix, t.created_by, t.created_at, t.expires_at, t.revoked_at, t.last_used_at';

const toToken = (r: TokenRow): ApiToken => ({
  id: r.id,
  organizationId: r.organization_id,
  name: r.name,
  role: r.role,
  displayPrefix: r.display_prefix,
  createdBy: r.created_by,
  createdAt: r.created_at,
  expiresAt: r.expires_at,
  revokedAt: r.revoked_at,
  lastUsedAt: r.last_used_at,
});

export function createApiTokenStore(driver: SqlDriver): ApiTokenStore {
  const db: Queryable = driver;
  return {
    async createApiToken(t) {
      try {
        const row = await one<TokenRow>(
          db,
          `INSERT INTO api_tokens AS t (id, organization_id, name, role, token_hash, display_prefix, created_by, expires_at)
           VALUES ($1::uuid, $2::uuid, $3, $4, $5, $6, $7::uuid, $8::timestamptz) RETURNING ${COLUMNS}`,
          [t.id, t.organizationId, t.name, t.role, t.tokenHash, t.displayPrefix, t.createdBy, t.expiresAt.toISOString()],
        );
        return toToken(row!);
      } catch (err) {
        if (isUniqueViolation(err)) throw new TokenNameTakenError(`a live API token is named "${t.name}" already`);
        throw err;
      }
    },

    async listApiTokens(organizationId) {
      const rows = await db.query<TokenRow>(
        `SELECT ${COLUMNS} FROM api_tokens t WHERE t.organization_id = $1::uuid ORDER BY t.created_at DESC`,
        [organizationId],
      );
      return rows.map(toToken);
    },

    async revokeApiToken(organizationId, tokenId) {
      const row = await one<TokenRow>(
        db,
        `UPDATE api_tokens t SET revoked_at = now() WHERE t.organization_id = $1::uuid AND t.id = $2::uuid AND t.revoked_at IS NULL RETURNING ${COLUMNS}`,
        [organizationId, tokenId],
      );
      return row && toToken(row);
    },

    async findApiToken(tokenHash) {
      const row = await one<TokenRow & { [K in keyof UserRow as `u_${K}`]: UserRow[K] }>(
        db,
        `UPDATE api_tokens t SET last_used_at = now() FROM users u
          WHERE t.token_hash = $1 AND u.id = t.created_by
          RETURNING ${COLUMNS}, u.id AS u_id, u.organization_id AS u_organization_id, u.username AS u_username, u.role AS u_role, u.created_at AS u_created_at`,
        [tokenHash],
      );
      if (!row) return null;
      return {
        token: toToken(row),
        maker: toUser({
          id: row.u_id,
          organization_id: row.u_organization_id,
          username: row.u_username,
          role: row.u_role,
          created_at: row.u_created_at,
        }),
      };
    },
  };
}

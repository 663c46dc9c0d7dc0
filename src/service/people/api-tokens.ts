// API tokens for automation: an admin makes one with a role and an expiry; it is shown once and
// only its hash is stored; it is revocable. A token authenticates the people's API (Authorization:
// Bearer), never the agents' API nor the pages, and acts under its own name in the audit log.
// Tokens cannot manage tokens: a leaked one cannot make itself a successor.
import { randomBytes, randomUUID } from 'node:crypto';
import { z } from 'zod';
import { recordAudit, type AuditDeps } from '../audit/record.ts';
import { authorize, type AuthorizeDeps } from '../authorize.ts';
import { conflict, notFound, unauthorized } from '../errors.ts';
import { RoleSchema } from './inputs.ts';
import { TokenNameTakenError, type Actor, type ApiToken, type ApiTokenStore, type LoginSession } from './store.ts';
import { sha256Hex } from './tokens.ts';

/** Recognizable in a script, a log or a secret scanner's rules, and unlike an agent's key (tuner_). */
export const API_TOKEN_PREFIX = 'tunerpat_';
const API_TOKEN_PATTERN = /^tunerpat_[A-Za-z0-9_-]{43}$/;
export const API_TOKEN_MAX_DAYS = 366;

export const NewApiTokenInputSchema = z.strictObject({
  name: z
    .string()
    .regex(/^[A-Za-z0-9._@ -]{1,64}$/, 'expected 1 to 64 letters, digits, spaces or ._@-')
    .refine((v) => v.trim() === v, 'expected no leading or trailing spaces'),
  role: RoleSchema,
  expiresInDays: z.coerce
    .number({ error: 'expected a whole number of days' })
    .int('expected a whole number of days')
    .min(1, 'expected at least 1 day')
    .max(API_TOKEN_MAX_DAYS, `expected at most ${API_TOKEN_MAX_DAYS} days`),
});
export type NewApiTokenInput = z.infer<typeof NewApiTokenInputSchema>;

export interface ApiTokenDeps extends AuditDeps {
  stores: { tokens: ApiTokenStore } & AuditDeps['stores'];
}

const WHAT = 'manage API tokens';

export async function createApiToken(
  deps: ApiTokenDeps & AuthorizeDeps,
  actor: Actor,
  input: NewApiTokenInput,
): Promise<{ token: ApiToken; secret: string }> {
  await authorize(deps, actor, { role: 'admin', to: WHAT, person: true });
  const secret = `${API_TOKEN_PREFIX}${randomBytes(32).toString('base64url')}`;
  try {
    const token = await deps.stores.tokens.createApiToken({
      id: randomUUID(),
      organizationId: actor.organizationId,
      name: input.name,
      role: input.role,
      displayPrefix: secret.slice(0, API_TOKEN_PREFIX.length + 6),
      createdBy: actor.id,
      expiresAt: new Date(Date.now() + input.expiresInDays * 86_400_000),
      tokenHash: sha256Hex(secret),
    });
    await recordAudit(deps, actor, 'api_token.created', {
      tokenId: token.id,
      name: token.name,
      role: token.role,
      prefix: token.displayPrefix,
      expiresAt: token.expiresAt.toISOString(),
    });
    return { token, secret };
  } catch (err) {
    if (err instanceof TokenNameTakenError) throw conflict(err.message);
    throw err;
  }
}

export async function listApiTokens(deps: ApiTokenDeps & AuthorizeDeps, actor: Actor): Promise<ApiToken[]> {
  await authorize(deps, actor, { role: 'admin', to: WHAT, person: true });
  return deps.stores.tokens.listApiTokens(actor.organizationId);
}

export async function revokeApiToken(deps: ApiTokenDeps & AuthorizeDeps, actor: Actor, tokenId: string): Promise<void> {
  await authorize(deps, actor, { role: 'admin', to: WHAT, person: true });
  const token = await deps.stores.tokens.revokeApiToken(actor.organizationId, tokenId);
  if (!token) throw notFound(`no live API token ${tokenId} in your organization`);
  await recordAudit(deps, actor, 'api_token.revoked', { tokenId, name: token.name, role: token.role, prefix: token.displayPrefix });
}

/** The login a presented token stands for (its actor; no CSRF token, as no cookie is involved);
 * unauthorized (saying why, never echoing the token) when it is malformed, unknown, revoked or
 * expired. */
export async function loginOfApiToken(deps: ApiTokenDeps, presented: string, address: string): Promise<LoginSession> {
  if (!API_TOKEN_PATTERN.test(presented)) throw unauthorized(`expected an API token (${API_TOKEN_PREFIX}…) in Authorization: Bearer`);
  const found = await deps.stores.tokens.findApiToken(sha256Hex(presented));
  if (!found || found.token.revokedAt) throw unauthorized('unknown or revoked API token');
  const { token, maker } = found;
  if (token.expiresAt.getTime() <= Date.now())
    throw unauthorized(`the API token "${token.name}" expired at ${token.expiresAt.toISOString()}`);
  const user: Actor = {
    id: maker.id,
    organizationId: token.organizationId,
    username: `${token.name} (API token)`,
    role: token.role,
    createdAt: token.createdAt,
    via: 'token',
    address,
    token: { id: token.id, name: token.name },
  };
  return { user, csrfToken: '', expiresAt: token.expiresAt };
}

// The people's API: API tokens, for admins logged in as a person (people/api-tokens.ts). The
// token itself is in the answer that made it, once.
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { ServiceContext } from '../../app/context.ts';
import { UuidSchema } from '../../databases/inputs.ts';
import { NewApiTokenInputSchema, createApiToken, listApiTokens, revokeApiToken } from '../../people/api-tokens.ts';
import type { ApiToken } from '../../people/store.ts';
import { parseOr400 } from '../errors.ts';
import { parseStorableBody } from '../storable.ts';
import { loginOf } from './login-of.ts';

const TokenParams = z.object({ tokenId: UuidSchema });

export function apiTokenView(t: ApiToken) {
  return {
    id: t.id,
    name: t.name,
    role: t.role,
    prefix: t.displayPrefix,
    createdAt: t.createdAt.toISOString(),
    expiresAt: t.expiresAt.toISOString(),
    revokedAt: t.revokedAt?.toISOString() ?? null,
    lastUsedAt: t.lastUsedAt?.toISOString() ?? null,
  };
}

export function registerTokenRoutes(app: FastifyInstance, ctx: ServiceContext): void {
  app.get('/tokens', async (request) => ({ tokens: (await listApiTokens(ctx, loginOf(request).user)).map(apiTokenView) }));

  app.post('/tokens', async (request, reply) => {
    const { user } = loginOf(request);
    const input = parseStorableBody(NewApiTokenInputSchema, request);
    const { token, secret } = await createApiToken(ctx, user, input);
    return reply.code(201).send({ token: apiTokenView(token), secret });
  });

  app.post('/tokens/:tokenId/revoke', async (request, reply) => {
    const { user } = loginOf(request);
    const { tokenId } = parseOr400(TokenParams, request.params, 'path');
    await revokeApiToken(ctx, user, tokenId);
    return reply.code(204).send();
  });
}

// The people's API: the organization's webhooks, for admins (notify/actions.ts). The secret goes
// in, never out.
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { ServiceContext } from '../../app/context.ts';
import { UuidSchema } from '../../databases/inputs.ts';
import { createWebhook, removeWebhook } from '../../notify/actions.ts';
import { NewWebhookInputSchema } from '../../notify/inputs.ts';
import { listWebhooks } from '../../notify/queries.ts';
import { webhookView } from '../../notify/views.ts';
import { parseOr400 } from '../errors.ts';
import { parseStorableBody } from '../storable.ts';
import { loginOf } from './login-of.ts';

const WebhookParams = z.object({ webhookId: UuidSchema });

export function registerWebhookRoutes(app: FastifyInstance, ctx: ServiceContext): void {
  app.get('/webhooks', async (request) => ({ webhooks: (await listWebhooks(ctx, loginOf(request).user)).map(webhookView) }));

  app.post('/webhooks', async (request, reply) => {
    const { user } = loginOf(request);
    const input = parseStorableBody(NewWebhookInputSchema, request);
    return reply.code(201).send({ webhook: webhookView(await createWebhook(ctx, user, input)) });
  });

  app.delete('/webhooks/:webhookId', async (request, reply) => {
    const { user } = loginOf(request);
    const { webhookId } = parseOr400(WebhookParams, request.params, 'path');
    await removeWebhook(ctx, user, webhookId);
    return reply.code(204).send();
  });
}

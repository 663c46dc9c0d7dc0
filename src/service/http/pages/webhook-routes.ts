// The people page's webhook forms (notify/actions.ts): an admin adds one or removes one, and is
// sent back to the page; a form's mistake is shown on it, naming the field.
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { ServiceContext } from '../../app/context.ts';
import { authorize } from '../../authorize.ts';
import { UuidSchema } from '../../databases/inputs.ts';
import { MANAGE_WEBHOOKS, createWebhook, removeWebhook } from '../../notify/actions.ts';
import { NewWebhookInputSchema, WATCH_EVENT_KINDS } from '../../notify/inputs.ts';
import { eventField } from '../../web/webhooks-section.ts';
import { formatZodError, statusOfExpected } from '../errors.ts';
import { fields, loginOf, parseForm } from './page.ts';
import { renderPeoplePage } from './user-routes.ts';

const WebhookParams = z.object({ webhookId: UuidSchema });

export function registerWebhookRoutes(app: FastifyInstance, ctx: ServiceContext): void {
  app.post('/webhooks', async (request, reply) => {
    const login = loginOf(request);
    // Asked first, so that a person who is not an admin learns nothing from the form's checks.
    await authorize(ctx, login.user, { role: 'admin', to: MANAGE_WEBHOOKS });
    const form = fields(request.body);
    const chosen = WATCH_EVENT_KINDS.filter((k) => form[eventField(k)] === 'true');
    const input = NewWebhookInputSchema.safeParse({
      url: form['url'] ?? '',
      secret: form['secret'] ?? '',
      // Every kind ticked: all of them, those added later too.
      ...(chosen.length < WATCH_EVENT_KINDS.length && { events: chosen }),
    });
    if (!input.success) return renderPeoplePage(ctx, request, reply, 400, { error: formatZodError(input.error, 'form') });
    try {
      await createWebhook(ctx, login.user, input.data);
    } catch (err) {
      // The limit reached, or a destination not allowed (its reason says why): shown on the page.
      const status = statusOfExpected(err);
      if (status === 409 || status === 400) return renderPeoplePage(ctx, request, reply, status, { error: (err as Error).message });
      throw err;
    }
    return reply.redirect('/users?done=webhook-added#webhooks', 303);
  });

  app.post('/webhooks/:webhookId/remove', async (request, reply) => {
    const { webhookId } = parseForm(WebhookParams, request.params);
    await removeWebhook(ctx, loginOf(request).user, webhookId);
    return reply.redirect('/users?done=webhook-removed#webhooks', 303);
  });
}

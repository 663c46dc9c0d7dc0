// The people page: for admins (authorize.ts says who is one). A new user's generated password is
// shown once, in the answer that created it; a role changed or a person removed redirects back.
// The page holds the organization's webhooks too (webhook-routes.ts posts their forms).
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { ServiceContext } from '../../app/context.ts';
import { authorize } from '../../authorize.ts';
import { UuidSchema } from '../../databases/inputs.ts';
import * as people from '../../people/actions.ts';
import { NewUserInputSchema, RoleInputSchema } from '../../people/inputs.ts';
import { listUsers } from '../../people/queries.ts';
import { listWebhooks } from '../../notify/queries.ts';
import { webhookView } from '../../notify/views.ts';
import { usersPage } from '../../web/users-page.ts';
import { formatZodError, statusOfExpected } from '../errors.ts';
import { fields, loginOf, parseForm, sendPage } from './page.ts';

const WHAT = 'manage people';
const UserParams = z.object({ userId: UuidSchema });
const DONE: Record<string, string> = {
  role: 'Role changed.',
  removed: 'Person removed.',
  'webhook-added': 'Webhook added.',
  'webhook-removed': 'Webhook removed.',
};

/** The people page with what an action did (or why it was refused). */
export async function renderPeoplePage(
  ctx: ServiceContext,
  request: FastifyRequest,
  reply: FastifyReply,
  status: number,
  result?: Parameters<typeof usersPage>[3],
): Promise<FastifyReply> {
  const login = loginOf(request);
  const users = await listUsers(ctx, login.user, WHAT);
  const webhooks = (await listWebhooks(ctx, login.user)).map(webhookView);
  return sendPage(reply, usersPage(login, users, webhooks, result), status);
}

export function registerUserRoutes(app: FastifyInstance, ctx: ServiceContext): void {
  const render = (request: FastifyRequest, reply: FastifyReply, status: number, result?: Parameters<typeof usersPage>[3]) =>
    renderPeoplePage(ctx, request, reply, status, result);

  app.get('/users', async (request, reply) => {
    const done = (request.query as Record<string, unknown>)['done'];
    return render(request, reply, 200, typeof done === 'string' && DONE[done] ? { done: DONE[done] } : undefined);
  });

  app.post('/users', async (request, reply) => {
    const login = loginOf(request);
    // Asked first, so that a person who is not an admin learns nothing from the form's checks.
    await authorize(ctx, login.user, { role: 'admin', to: WHAT });
    const form = fields(request.body);
    const input = NewUserInputSchema.safeParse({
      username: form['username'] ?? '',
      ...(form['password'] && { password: form['password'] }),
      role: form['role'] ?? '',
    });
    if (!input.success) return render(request, reply, 400, { error: formatZodError(input.error, 'form') });
    try {
      const created = await people.createUser(ctx, login.user, input.data);
      return await render(request, reply, 201, { created: { username: created.user.username, password: created.password } });
    } catch (err) {
      if (statusOfExpected(err) === 409) return render(request, reply, 409, { error: (err as Error).message });
      throw err;
    }
  });

  // A refusal the admin can act on (the last admin, an unknown role) is shown on the page.
  const refusedOnPage = (request: FastifyRequest, reply: FastifyReply, err: unknown) => {
    const status = statusOfExpected(err);
    if (status === 409) return render(request, reply, status, { error: (err as Error).message });
    throw err;
  };

  app.post('/users/:userId/role', async (request, reply) => {
    const login = loginOf(request);
    await authorize(ctx, login.user, { role: 'admin', to: WHAT });
    const { userId } = parseForm(UserParams, request.params);
    const input = RoleInputSchema.safeParse({ role: fields(request.body)['role'] ?? '' });
    if (!input.success) return render(request, reply, 400, { error: formatZodError(input.error, 'form') });
    try {
      await people.setRole(ctx, login.user, userId, input.data.role);
    } catch (err) {
      return refusedOnPage(request, reply, err);
    }
    return reply.redirect('/users?done=role', 303);
  });

  app.post('/users/:userId/remove', async (request, reply) => {
    const { userId } = parseForm(UserParams, request.params);
    try {
      await people.removeUser(ctx, loginOf(request).user, userId);
    } catch (err) {
      return refusedOnPage(request, reply, err);
    }
    return reply.redirect('/users?done=removed', 303);
  });
}

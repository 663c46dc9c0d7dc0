// The people's API: the people of the caller's organization and their roles, for admins
// (authorize.ts says who is one).
import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { ServiceContext } from '../../app/context.ts';
import { userView } from '../../databases/views.ts';
import { UuidSchema } from '../../databases/inputs.ts';
import * as people from '../../people/actions.ts';
import { NewUserInputSchema, RoleInputSchema } from '../../people/inputs.ts';
import { listUsers } from '../../people/queries.ts';
import { parseOr400 } from '../errors.ts';
import { parseStorableBody } from '../storable.ts';
import { loginOf } from './login-of.ts';

const UserParams = z.object({ userId: UuidSchema });

export function registerUserRoutes(app: FastifyInstance, ctx: ServiceContext): void {
  app.get('/users', async (request) => ({ users: (await listUsers(ctx, loginOf(request).user)).map(userView) }));

  app.post('/users', async (request, reply) => {
    const { user } = loginOf(request);
    const input = parseStorableBody(NewUserInputSchema, request);
    const created = await people.createUser(ctx, user, input);
    return reply.code(201).send({ user: userView(created.user), password: created.password });
  });

  app.patch('/users/:userId', async (request) => {
    const { user } = loginOf(request);
    const { userId } = parseOr400(UserParams, request.params, 'path');
    const { role } = parseStorableBody(RoleInputSchema, request);
    return { user: userView((await people.setRole(ctx, user, userId, role)).after) };
  });

  app.delete('/users/:userId', async (request, reply) => {
    const { user } = loginOf(request);
    const { userId } = parseOr400(UserParams, request.params, 'path');
    await people.removeUser(ctx, user, userId);
    return reply.code(204).send();
  });
}

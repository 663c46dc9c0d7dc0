// The people's API: users, for admins (authorize.ts says who is one).
import type { FastifyInstance } from 'fastify';
import type { ServiceContext } from '../../app/context.ts';
import { userView } from '../../databases/views.ts';
import * as people from '../../people/actions.ts';
import { NewUserInputSchema } from '../../people/inputs.ts';
import { listUsers } from '../../people/queries.ts';
import { parseStorableBody } from '../storable.ts';
import { loginOf } from './login-of.ts';

export function registerUserRoutes(app: FastifyInstance, ctx: ServiceContext): void {
  app.get('/users', async (request) => ({ users: (await listUsers(ctx, loginOf(request).user)).map(userView) }));

  app.post('/users', async (request, reply) => {
    const { user } = loginOf(request);
    const input = parseStorableBody(NewUserInputSchema, request);
    const created = await people.createUser(ctx, user, input);
    return reply.code(201).send({ user: userView(created.user), password: created.password });
  });
}

// The users page: for admins (authorize.ts says who is one); a new user's generated password is
// shown once, in the answer that created it.
import type { FastifyInstance } from 'fastify';
import type { ServiceContext } from '../../app/context.ts';
import { authorize } from '../../authorize.ts';
import * as people from '../../people/actions.ts';
import { NewUserInputSchema } from '../../people/inputs.ts';
import { listUsers } from '../../people/queries.ts';
import { usersPage } from '../../web/users-page.ts';
import { formatZodError, statusOfExpected } from '../errors.ts';
import { fields, loginOf, sendPage } from './page.ts';

const WHAT = 'manage users';

export function registerUserRoutes(app: FastifyInstance, ctx: ServiceContext): void {
  app.get('/users', async (request, reply) => {
    const login = loginOf(request);
    return sendPage(reply, usersPage(login, await listUsers(ctx, login.user, WHAT)));
  });

  app.post('/users', async (request, reply) => {
    const login = loginOf(request);
    // Asked first, so that a person who is not an admin learns nothing from the form's checks.
    await authorize(ctx, login.user, { admin: WHAT });
    const form = fields(request.body);
    const input = NewUserInputSchema.safeParse({
      username: form['username'] ?? '',
      ...(form['password'] && { password: form['password'] }),
      isAdmin: form['isAdmin'] === 'true',
    });
    if (!input.success)
      return sendPage(reply, usersPage(login, await listUsers(ctx, login.user, WHAT), { error: formatZodError(input.error, 'form') }), 400);
    try {
      const created = await people.createUser(ctx, login.user, input.data);
      return sendPage(
        reply,
        usersPage(login, await listUsers(ctx, login.user, WHAT), {
          created: { username: created.user.username, password: created.password },
        }),
        201,
      );
    } catch (err) {
      if (statusOfExpected(err) === 409)
        return sendPage(reply, usersPage(login, await listUsers(ctx, login.user, WHAT), { error: (err as Error).message }), 409);
      throw err;
    }
  });
}

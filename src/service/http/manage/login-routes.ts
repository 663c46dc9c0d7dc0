// The people's API: logging in and out, and who is logged in. `/login` names the login session
// (GET: who is logged in, POST: log in, DELETE: log out, as POST /logout does too). `GET /session`
// is the older name of GET /login, answered alike for one more release (docs/service.md).
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ServiceContext } from '../../app/context.ts';
import { userView } from '../../databases/views.ts';
import { LoginInputSchema } from '../../people/inputs.ts';
import type { LoginThrottle } from '../../people/throttle.ts';
import { parseOr400 } from '../errors.ts';
import { LOGIN_BODY_BYTES, logIn } from '../login.ts';
import { endLoginSession } from '../login-sessions.ts';
import { loginOf } from './login-of.ts';

export function registerLoginRoutes(app: FastifyInstance, ctx: ServiceContext, throttle: LoginThrottle): void {
  app.post('/login', { bodyLimit: LOGIN_BODY_BYTES }, async (request, reply) => {
    const input = parseOr400(LoginInputSchema, request.body, 'body');
    const login = await logIn(ctx, throttle, request, reply, input, 'body');
    return { user: userView(login.user), csrfToken: login.csrfToken };
  });

  const whoIsLoggedIn = (request: FastifyRequest, reply: FastifyReply) => {
    const login = loginOf(request);
    return reply.send({ user: userView(login.user), csrfToken: login.csrfToken });
  };
  app.get('/login', whoIsLoggedIn);
  /** Deprecated alias of GET /login, kept for one release. */
  app.get('/session', whoIsLoggedIn);

  const logOut = async (request: FastifyRequest, reply: FastifyReply) => {
    await endLoginSession(ctx, request, reply);
    return reply.code(204).send();
  };
  app.delete('/login', logOut);
  app.post('/logout', logOut);
}

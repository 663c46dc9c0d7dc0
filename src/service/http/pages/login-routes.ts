// The login page and logging out. Login: a CSRF token in a cookie and in the form (double
// submit), so that another site cannot log a browser into an account of its choosing.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ServiceContext } from '../../app/context.ts';
import { LoginInputSchema } from '../../people/inputs.ts';
import type { LoginThrottle } from '../../people/throttle.ts';
import { randomToken, sameSecret } from '../../people/tokens.ts';
import { loginPage } from '../../web/login-page.ts';
import { statusOfExpected } from '../errors.ts';
import { LOGIN_BODY_BYTES, logIn } from '../login.ts';
import { CSRF_FIELD, endLoginSession, isHttps, loadLoginSession } from '../login-sessions.ts';
import { fields, sendPage } from './page.ts';
import { registerSsoRoutes, type ShowLogin } from './sso-routes.ts';

const LOGIN_CSRF_COOKIE = 'tuner_login_csrf';

export function registerLoginRoutes(app: FastifyInstance, ctx: ServiceContext, throttle: LoginThrottle): void {
  const showLogin: ShowLogin = (request: FastifyRequest, reply: FastifyReply, status: number, error?: string, username?: string) => {
    const loginCsrf = randomToken();
    reply.setCookie(LOGIN_CSRF_COOKIE, loginCsrf, {
      httpOnly: true,
      sameSite: 'strict',
      secure: isHttps(ctx, request),
      path: '/login',
      maxAge: 3600,
    });
    return sendPage(
      reply,
      loginPage({
        loginCsrf,
        ...(error !== undefined && { error }),
        ...(username !== undefined && { username }),
        sso: ctx.sso && { name: ctx.sso.name, unavailable: ctx.sso.unavailable },
        passwordLogin: ctx.config.passwordLogin.enabled,
      }),
      status,
    );
  };

  app.get('/login', async (request, reply) => {
    if (await loadLoginSession(ctx, request)) return reply.redirect('/', 303);
    return showLogin(request, reply, 200);
  });

  app.post('/login', { bodyLimit: LOGIN_BODY_BYTES }, async (request, reply) => {
    const form = fields(request.body);
    const cookie = request.cookies[LOGIN_CSRF_COOKIE];
    if (!cookie || !form[CSRF_FIELD] || !sameSecret(cookie, form[CSRF_FIELD])) {
      return showLogin(request, reply, 403, 'The login form expired: please try again.', form['username']);
    }
    const input = LoginInputSchema.safeParse({ username: form['username'] ?? '', password: form['password'] ?? '' });
    if (!input.success) return showLogin(request, reply, 400, 'Enter a username and a password.', form['username']);
    try {
      await logIn(ctx, throttle, request, reply, input.data, 'form');
    } catch (err) {
      const status = statusOfExpected(err);
      if (status === 401 || status === 403 || status === 429)
        return showLogin(request, reply, status, (err as Error).message, input.data.username);
      throw err;
    }
    reply.clearCookie(LOGIN_CSRF_COOKIE, { path: '/login' });
    return reply.redirect('/', 303);
  });

  app.post('/logout', async (request, reply) => {
    const login = await loadLoginSession(ctx, request);
    await endLoginSession(ctx, request, reply);
    // Signed in through the provider: out of it too, when it says how (RP-initiated logout).
    const provider =
      login?.user.via === 'sso' && ctx.sso && ctx.config.publicUrl ? await ctx.sso.endSessionUrl(`${ctx.config.publicUrl}/login`) : null;
    return reply.redirect(provider?.href ?? '/login', 303);
  });

  registerSsoRoutes(app, ctx, showLogin);
}

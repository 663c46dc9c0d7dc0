// Single sign-on's two routes: /login/sso sends the browser to the provider (remembering the
// sign-in's state, nonce and PKCE verifier in a short-lived, signed, httpOnly cookie), and
// /login/sso/callback, where the provider sends it back, checks the answer (people/sso-client.ts),
// signs the person in (people/sso.ts) and starts the normal login session. A refused sign-in gets
// a page that says why.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ServiceContext } from '../../app/context.ts';
import { recordSsoRefusal, signInWithSso } from '../../people/sso.ts';
import { SsoRefusal, SsoUnavailable, TRANSACTION_MS, type SsoClient } from '../../people/sso-client.ts';
import { ssoRefusedPage } from '../../web/login-page.ts';
import { isHttps, startLoginSession } from '../login-sessions.ts';
import { sendPage } from './page.ts';

const SSO_COOKIE = 'tuner_sso';
const SSO_PATH = '/login/sso';

export function registerSsoRoutes(app: FastifyInstance, ctx: ServiceContext, showLogin: ShowLogin): void {
  const sso = ctx.sso;
  const ssoConfig = ctx.config.sso;
  if (!sso || !ssoConfig) return;

  app.get(SSO_PATH, async (request, reply) => {
    let begun: Awaited<ReturnType<SsoClient['begin']>>;
    try {
      begun = await sso.begin();
    } catch (err) {
      if (!(err instanceof SsoUnavailable)) throw err;
      request.log.error(`single sign-on: ${err.message}`);
      return showLogin(request, reply, 503, `Log in with ${sso.name} is unavailable: ${err.message}.`);
    }
    // SameSite lax: the provider's redirect back is a top-level GET from another site.
    reply.setCookie(SSO_COOKIE, sso.seal(begun.transaction), {
      httpOnly: true,
      sameSite: 'lax',
      secure: isHttps(ctx, request),
      path: SSO_PATH,
      maxAge: TRANSACTION_MS / 1000,
    });
    return reply.redirect(begun.url.href, 303);
  });

  app.get(`${SSO_PATH}/callback`, async (request: FastifyRequest, reply: FastifyReply) => {
    // One callback per sign-in: its cookie is gone whatever happens.
    const transaction = sso.unseal(request.cookies[SSO_COOKIE]);
    reply.clearCookie(SSO_COOKIE, { path: SSO_PATH });
    const refused = async (refusal: SsoRefusal, recorded: boolean) => {
      if (!recorded) await recordSsoRefusal(ctx, ssoConfig, request.ip, refusal.reason);
      return sendPage(reply, ssoRefusedPage(refusal.status, refusal.message), refusal.status);
    };
    if (!transaction)
      return refused(
        new SsoRefusal(
          `This sign-in was not begun in this browser, or took too long: start again with "Log in with ${sso.name}".`,
          'no sign-in in progress (missing or forged cookie)',
        ),
        false,
      );
    const query = request.url.includes('?') ? request.url.slice(request.url.indexOf('?')) : '';
    let claims: Awaited<ReturnType<SsoClient['finish']>>;
    try {
      claims = await sso.finish(query, transaction);
    } catch (err) {
      if (err instanceof SsoRefusal) return refused(err, false);
      if (err instanceof SsoUnavailable)
        return refused(new SsoRefusal(`Log in with ${sso.name} is unavailable: ${err.message}.`, 'provider unavailable', 503), false);
      throw err;
    }
    try {
      const user = await signInWithSso(ctx, ssoConfig, claims, request.ip);
      await startLoginSession(ctx, request, reply, user, 'sso');
    } catch (err) {
      if (err instanceof SsoRefusal) return refused(err, true);
      throw err;
    }
    return reply.redirect('/', 303);
  });
}

/** The login page, with an error (login-routes.ts). */
export type ShowLogin = (request: FastifyRequest, reply: FastifyReply, status: number, error?: string, username?: string) => FastifyReply;

// The service as a client of an OpenID provider (authorization code flow with PKCE, state and
// nonce), through openid-client, which does the protocol's checks. The provider's configuration is
// discovered once it answers: an unreachable provider at start does not stop the service, and the
// next sign-in attempt tries again. What one sign-in must remember between the redirect and the
// callback (its state, nonce and PKCE verifier) travels in a cookie signed with a key derived from
// the client secret: the same on every replica, with nothing stored.
import { createHmac, timingSafeEqual } from 'node:crypto';
import * as oidc from 'openid-client';
import type { SsoConfig } from '../app/config.ts';

/** One sign-in between its redirect to the provider and its callback. */
export interface SsoTransaction {
  state: string;
  nonce: string;
  codeVerifier: string;
  /** When it began (ms since the epoch): older than TRANSACTION_MS, it is refused. */
  at: number;
}

export const TRANSACTION_MS = 10 * 60_000;

/** Why a sign-in was refused, said to the person on a page and recorded in the audit log. */
export class SsoRefusal extends Error {
  override name = 'SsoRefusal';
  /** What the audit log records (short, no secret). */
  readonly reason: string;
  /** The refusal page's HTTP status. */
  readonly status: number;
  constructor(message: string, reason: string, status = 400) {
    super(message);
    this.reason = reason;
    this.status = status;
  }
}

/** The provider could not be asked (discovery failed): the message names the issuer and why. */
export class SsoUnavailable extends Error {
  override name = 'SsoUnavailable';
}

/** What the provider says of the person, from the ID token and, for claims missing there, from the
 * userinfo endpoint. */
export type SsoClaims = Record<string, unknown> & { sub: string };

/** The cause of a failed request, as a person can act on it (a refused connection, a timeout,
 * an answer that is no OpenID configuration), never a secret: openid-client's messages hold none. */
function causeOf(err: unknown): string {
  const parts: string[] = [];
  for (let e: unknown = err; e instanceof Error && parts.length < 3; e = e.cause) {
    const code = (e as NodeJS.ErrnoException).code;
    parts.push(code && !e.message.includes(code) ? `${e.message} (${code})` : e.message);
  }
  return parts.join(': ') || String(err);
}

export class SsoClient {
  readonly #sso: SsoConfig;
  readonly #key: Buffer;
  #configuration: Promise<oidc.Configuration> | null = null;
  /** Why the last discovery failed; null once it succeeded (the login page says it). */
  unavailable: string | null = null;

  constructor(sso: SsoConfig) {
    this.#sso = sso;
    this.#key = createHmac('sha256', sso.clientSecret).update('tuner single sign-on transaction').digest();
  }

  get name(): string {
    return this.#sso.name;
  }

  /** The issuer's origin, where logging out may send the browser. */
  get origin(): string {
    return new URL(this.#sso.issuer).origin;
  }

  /** The provider's configuration; discovered at the first call, again after a failure. Throws
   * SsoUnavailable naming the issuer and the cause. */
  discover(): Promise<oidc.Configuration> {
    this.#configuration ??= (async () => {
      const { issuer, clientId, clientSecret } = this.#sso;
      try {
        const configuration = await oidc.discovery(
          new URL(issuer),
          clientId,
          undefined,
          oidc.ClientSecretBasic(clientSecret),
          // http only on loopback (config.ts refuses it elsewhere).
          { ...(issuer.startsWith('http:') && { execute: [oidc.allowInsecureRequests] }), timeout: 10 },
        );
        this.unavailable = null;
        return configuration;
      } catch (err) {
        this.#configuration = null;
        this.unavailable = `cannot read the OpenID configuration of ${issuer}: ${causeOf(err)}`;
        throw new SsoUnavailable(this.unavailable);
      }
    })();
    return this.#configuration;
  }

  /** Where to send the browser to sign in, and what the callback must check. */
  async begin(): Promise<{ url: URL; transaction: SsoTransaction }> {
    const configuration = await this.discover();
    const transaction = {
      state: oidc.randomState(),
      nonce: oidc.randomNonce(),
      codeVerifier: oidc.randomPKCECodeVerifier(),
      at: Date.now(),
    };
    const url = oidc.buildAuthorizationUrl(configuration, {
      redirect_uri: this.#sso.redirectUrl,
      scope: this.#sso.scopes,
      state: transaction.state,
      nonce: transaction.nonce,
      code_challenge: await oidc.calculatePKCECodeChallenge(transaction.codeVerifier),
      code_challenge_method: 'S256',
    });
    return { url, transaction };
  }

  /** The person's claims, once openid-client has checked the callback (state, the code exchanged
   * with the PKCE verifier, the ID token's signature, issuer, audience, expiry and nonce). Throws
   * SsoRefusal saying what did not match. `query` is the callback's query string. */
  async finish(query: string, transaction: SsoTransaction): Promise<SsoClaims> {
    const configuration = await this.discover();
    if (Date.now() - transaction.at > TRANSACTION_MS)
      throw new SsoRefusal('The sign-in took too long: start again.', 'sign-in expired before the callback');
    // The URL the provider was told to send the browser to, with what it sent: not the request's
    // Host header, which the client chooses.
    const currentUrl = new URL(this.#sso.redirectUrl);
    currentUrl.search = query;
    let tokens: Awaited<ReturnType<typeof oidc.authorizationCodeGrant>>;
    try {
      tokens = await oidc.authorizationCodeGrant(configuration, currentUrl, {
        pkceCodeVerifier: transaction.codeVerifier,
        expectedState: transaction.state,
        expectedNonce: transaction.nonce,
        idTokenExpected: true,
      });
    } catch (err) {
      throw refusalOf(err);
    }
    const claims = tokens.claims();
    if (!claims) throw new SsoRefusal('The provider sent no ID token.', 'no ID token');
    const all: SsoClaims = { ...claims };
    if (!(this.#sso.groupsClaim in all) && configuration.serverMetadata().userinfo_endpoint) {
      // Many providers put groups (and the profile) only in the userinfo answer.
      const info = await oidc.fetchUserInfo(configuration, tokens.access_token, claims.sub).catch((err: unknown) => {
        throw new SsoRefusal(`The provider's userinfo endpoint failed: ${causeOf(err)}`, 'userinfo failed');
      });
      for (const [key, value] of Object.entries(info)) if (!(key in all)) all[key] = value;
    }
    return all;
  }

  /** Where to send a browser that logs out, when the provider has an end-session endpoint. */
  async endSessionUrl(postLogoutRedirect: string): Promise<URL | null> {
    const configuration = await this.discover().catch(() => null);
    const endpoint = configuration?.serverMetadata().end_session_endpoint;
    // The pages' CSP lets a form lead to the issuer's origin only (http/pages.ts): an endpoint
    // elsewhere would be blocked by the browser, so the person just lands on the login page.
    if (!configuration || !endpoint || new URL(endpoint).origin !== this.origin) return null;
    return oidc.buildEndSessionUrl(configuration, { post_logout_redirect_uri: postLogoutRedirect });
  }

  /** The transaction as a cookie's value: its JSON and an HMAC of it, base64url. */
  seal(transaction: SsoTransaction): string {
    const body = Buffer.from(JSON.stringify(transaction)).toString('base64url');
    return `${body}.${this.#sign(body)}`;
  }

  /** The transaction a cookie holds, or null when it is absent, malformed or not signed by us. */
  unseal(cookie: string | undefined): SsoTransaction | null {
    const [body, signature, ...rest] = (cookie ?? '').split('.');
    if (!body || !signature || rest.length > 0) return null;
    const expected = Buffer.from(this.#sign(body));
    const presented = Buffer.from(signature);
    if (expected.length !== presented.length || !timingSafeEqual(expected, presented)) return null;
    try {
      const parsed = JSON.parse(Buffer.from(body, 'base64url').toString()) as Partial<SsoTransaction>;
      const { state, nonce, codeVerifier, at } = parsed;
      if (typeof state !== 'string' || typeof nonce !== 'string' || typeof codeVerifier !== 'string' || typeof at !== 'number') return null;
      return { state, nonce, codeVerifier, at };
    } catch {
      return null;
    }
  }

  #sign(body: string): string {
    return createHmac('sha256', this.#key).update(body).digest('base64url');
  }
}

/** openid-client's failure as a refusal a person understands: which check failed. */
function refusalOf(err: unknown): SsoRefusal {
  if (err instanceof oidc.AuthorizationResponseError) {
    const said = err.error_description ? `${err.error}: ${err.error_description}` : err.error;
    return new SsoRefusal(`The provider refused the sign-in (${said}).`, `provider refused: ${err.error}`);
  }
  // openid-client says which check failed in the error's cause.
  const message = causeOf(err);
  if (/"state"/.test(message))
    return new SsoRefusal(
      'This sign-in answer does not belong to the sign-in this browser began (its state does not match): start again.',
      'state mismatch',
    );
  if (/"nonce"/.test(message))
    return new SsoRefusal(
      'The ID token was not issued for the sign-in this browser began (its nonce does not match): start again.',
      'nonce mismatch',
    );
  if (err instanceof oidc.ResponseBodyError)
    return new SsoRefusal(`The provider refused the sign-in (${err.error}).`, `token endpoint refused: ${err.error}`);
  return new SsoRefusal(`The provider's answer was refused: ${message}`, `invalid answer: ${message.slice(0, 160)}`);
}

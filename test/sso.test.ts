// Single sign-on end to end, in Chromium, against a real OpenID provider (oidc-provider in a
// process of its own, test/fixtures/oidc-provider-process.ts): logging in through it lands on the
// dashboard with the role the person's groups map to, and a viewer cannot start a tuning session
// while an admin manages people; a person with no mapped group gets a refusal page and no account;
// logging out ends the local session and goes to the provider's end-session page; a tampered
// state, a replayed callback and a mismatched nonce are refused with a page that says so; with
// password login off only the break-glass admin may use a password; an unreachable issuer at start
// is logged naming it, and password login keeps working. The client secret is never in the logs,
// the pages or the audit export. And the configuration's errors name their variables.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { freePort } from '../src/lab/cluster.ts';
import { ConfigError, parseServiceArgs } from '../src/service/app/config.ts';
import { launchChromium, skipWithoutChromium } from './helpers/browser.ts';
import { startOidcProvider, type OidcProvider } from './helpers/oidc-provider.ts';
import {
  ADMIN_PASSWORD,
  PersonClient,
  assertClientError,
  createServiceStore,
  startTestService,
  type ServiceStore,
  type TestService,
} from './helpers/service.ts';
import { until } from './helpers/until.ts';

const CLIENT_ID = 'tuner-service';
const CLIENT_SECRET = 'sso-client-secret-for-tests-7f3a9c';
const PROVIDER_NAME = 'Example IdP';

interface AuditJson {
  actor: { username: string; via: string | null };
  action: string;
  details: Record<string, unknown>;
}

/** The settings of a service that signs in through `issuer`. */
function ssoEnv(issuer: string, publicUrl: string): Record<string, string> {
  return {
    TUNER_PUBLIC_URL: publicUrl,
    TUNER_SSO_ISSUER: issuer,
    TUNER_SSO_NAME: PROVIDER_NAME,
    TUNER_SSO_CLIENT_ID: CLIENT_ID,
    TUNER_SSO_CLIENT_SECRET: CLIENT_SECRET,
    TUNER_SSO_SCOPES: 'openid profile email groups',
    TUNER_SSO_ROLES: 'tuner-admins=admin,dba=operator,readers=viewer',
  };
}

describe('single sign-on configuration', () => {
  const base = ['--listen', '127.0.0.1:0'];
  const fails = (env: Record<string, string>, ...mentions: RegExp[]) => {
    assert.throws(
      () => parseServiceArgs(base, env),
      (err: unknown) => {
        assert.ok(err instanceof ConfigError, String(err));
        for (const m of mentions) assert.match(err.message, m);
        assert.ok(!err.message.includes(CLIENT_SECRET), 'the client secret is never in a message');
        return true;
      },
    );
  };

  test('a complete configuration is read; incomplete or bad ones are refused naming the variable', () => {
    const env = ssoEnv('https://idp.example.com/', 'https://tuner.example.com');
    const request = parseServiceArgs(base, env);
    assert.equal(request.kind, 'run');
    if (request.kind !== 'run') return;
    assert.equal(request.config.sso?.issuer, 'https://idp.example.com');
    assert.equal(request.config.sso?.redirectUrl, 'https://tuner.example.com/login/sso/callback');
    assert.equal(request.config.sso?.roles.get('dba'), 'operator');
    assert.equal(request.config.sso?.groupsClaim, 'groups');
    assert.equal(request.config.sso?.organization, 'admin');
    assert.deepEqual(request.config.passwordLogin, { enabled: true });
    assert.ok(!('ssoClientSecret' in request.config), 'the raw settings do not linger in the configuration');

    fails({ ...env, TUNER_SSO_CLIENT_ID: '' }, /TUNER_SSO_CLIENT_ID/);
    fails({ ...env, TUNER_PUBLIC_URL: '' }, /TUNER_PUBLIC_URL/);
    fails({ ...env, TUNER_SSO_ISSUER: 'http://idp.example.com' }, /TUNER_SSO_ISSUER: expected an https:\/\/ issuer URL/);
    fails({ ...env, TUNER_SSO_ROLES: 'tuner-admins=root' }, /TUNER_SSO_ROLES: expected group=role pairs/, /tuner-admins=root/);
    fails({ ...env, TUNER_SSO_CLIENT_SECRET: 'short' }, /TUNER_SSO_CLIENT_SECRET: expected the client secret/);
    // A bad secret is not echoed either (it may be the real one, pasted with a stray character).
    fails({ ...env, TUNER_SSO_CLIENT_SECRET: `${CLIENT_SECRET}\n` }, /TUNER_SSO_CLIENT_SECRET: expected the client secret/);
    fails({ ...env, TUNER_SSO_ROLES: '' }, /TUNER_SSO_ROLES or TUNER_SSO_DEFAULT_ROLE/);
    fails({ TUNER_SSO_CLIENT_ID: 'x' }, /TUNER_SSO_CLIENT_ID: set TUNER_SSO_ISSUER too/);
    fails({ TUNER_PASSWORD_LOGIN: 'off' }, /TUNER_PASSWORD_LOGIN=off needs single sign-on/);
    fails({ ...env, TUNER_PASSWORD_LOGIN: 'off' }, /TUNER_BREAK_GLASS_ADMIN/);
    fails({ ...env, TUNER_PASSWORD_LOGIN: 'maybe' }, /TUNER_PASSWORD_LOGIN: expected on or off/);
  });
});

describe('single sign-on through a real OpenID provider, in Chromium', { skip: skipWithoutChromium }, () => {
  let provider: OidcProvider;
  let store: ServiceStore;
  let service: TestService;
  let serviceUrl: string;
  let admin: PersonClient;
  let browser: Browser;
  /** Every page the browser showed, to look for the client secret in. */
  const shown: string[] = [];

  before(async () => {
    const listen = `127.0.0.1:${await freePort()}`;
    serviceUrl = `http://${listen}`;
    provider = await startOidcProvider({ id: CLIENT_ID, secret: CLIENT_SECRET, serviceUrl });
    store = await createServiceStore('pglite');
    service = await startTestService(
      store,
      { ...ssoEnv(provider.issuer, serviceUrl), TUNER_PASSWORD_LOGIN: 'off', TUNER_BREAK_GLASS_ADMIN: 'admin', TUNER_LOG_LEVEL: 'info' },
      listen,
    );
    admin = await PersonClient.login(service.url, 'admin', ADMIN_PASSWORD);
    browser = await launchChromium();
  });
  after(async () => {
    await browser?.close();
    await service?.close();
    await store?.dispose();
    await provider?.close();
  });

  const newPage = async (): Promise<{ context: BrowserContext; page: Page }> => {
    const context = await browser.newContext();
    const page = await context.newPage();
    page.on(
      'load',
      () =>
        void page.content().then(
          (html) => shown.push(html),
          () => undefined,
        ),
    );
    return { context, page };
  };

  /** From the login page through the provider's login form (its development form: any password). */
  const signIn = async (page: Page, login: string) => {
    await page.goto(`${serviceUrl}/login`);
    await page.click('#sso-login');
    await page.waitForURL(`${provider.issuer}/**`);
    await page.fill('input[name=login]', login);
    await page.fill('input[name=password]', 'anything');
    await page.click('button[type=submit]');
  };

  /** Who the browser is logged in as (the people's API, with the browser's cookies). */
  const whoAmI = async (context: BrowserContext) => {
    const response = await context.request.get(`${serviceUrl}/api/manage/login`);
    if (response.status() !== 200) return { status: response.status(), user: null, csrfToken: '' };
    const body = (await response.json()) as { user: { username: string; role: string }; csrfToken: string };
    return { status: 200, ...body };
  };

  const audit = async (action: string) =>
    (await admin.get<{ events: AuditJson[] }>(`/api/manage/audit?action=${encodeURIComponent(action)}`)).body.events;

  test('the login page offers the provider; an admin by group lands on the dashboard and manages people', async () => {
    const { context, page } = await newPage();
    await page.goto(`${serviceUrl}/login`);
    assert.equal(await page.textContent('#sso-login'), `Log in with ${PROVIDER_NAME}`);
    await signIn(page, 'alice');
    await page.waitForURL(`${serviceUrl}/`);
    const me = await whoAmI(context);
    assert.equal(me.user?.username, 'alice');
    assert.equal(me.user?.role, 'admin');
    const people = await page.goto(`${serviceUrl}/users`);
    assert.equal(people?.status(), 200);
    const added = await context.request.post(`${serviceUrl}/api/manage/users`, {
      headers: { 'x-csrf-token': me.csrfToken },
      data: { username: 'added-by-alice', role: 'viewer' },
    });
    assert.equal(added.status(), 201);
    const logins = await audit('login');
    const login = logins.find((e) => e.actor.username === 'alice');
    assert.equal(login?.actor.via, 'sso');
    assert.deepEqual(login?.details['groups'], ['tuner-admins', 'everyone']);
    const created = (await audit('user.created')).find((e) => e.details['username'] === 'alice');
    assert.equal(created?.details['by'], 'single sign-on');
    // Signing in again is the same user, not a second one.
    await context.clearCookies();
    await signIn(page, 'alice');
    await page.waitForURL(`${serviceUrl}/`);
    const users = (await admin.get<{ users: { username: string }[] }>('/api/manage/users')).body.users;
    assert.equal(users.filter((u) => u.username.startsWith('alice')).length, 1);
    await context.close();
  });

  test('groups give roles: a viewer cannot start a tuning session (403), an operator is an operator', async () => {
    const { databaseId } = await admin.createDatabase('sso-tuned');
    const { context: viewerContext, page: viewerPage } = await newPage();
    await signIn(viewerPage, 'victor');
    await viewerPage.waitForURL(`${serviceUrl}/`);
    const victor = await whoAmI(viewerContext);
    assert.equal(victor.user?.role, 'viewer');
    const refused = await viewerContext.request.post(`${serviceUrl}/api/manage/databases/${databaseId}/tuning-sessions`, {
      headers: { 'x-csrf-token': victor.csrfToken },
      data: {},
    });
    assert.equal(refused.status(), 403);
    assert.match(await refused.text(), /only an operator or an admin can start tuning sessions: your role is viewer/);
    const people = await viewerContext.request.get(`${serviceUrl}/api/manage/users`);
    assert.equal(people.status(), 403);
    await viewerContext.close();

    const { context, page } = await newPage();
    await signIn(page, 'olga');
    await page.waitForURL(`${serviceUrl}/`);
    assert.equal((await whoAmI(context)).user?.role, 'operator');
    await context.close();
  });

  test('a person none of whose groups is mapped gets a refusal page, and no account', async () => {
    const { context, page } = await newPage();
    await signIn(page, 'nora');
    await page.waitForSelector('#sso-refused');
    assert.equal(page.url().startsWith(`${serviceUrl}/login/sso/callback`), true);
    const text = await page.textContent('#sso-refused');
    assert.match(text ?? '', /your groups \(marketing\) give you no role in this tuning service/);
    assert.equal((await whoAmI(context)).status, 401);
    const users = (await admin.get<{ users: { username: string }[] }>('/api/manage/users')).body.users;
    assert.ok(!users.some((u) => u.username.startsWith('nora')), 'no account was created');
    const refusal = (await audit('login.refused')).find((e) => e.actor.username === 'nora');
    assert.equal(refusal?.actor.via, 'sso');
    assert.equal(refusal?.details['reason'], 'no mapped group');
    await context.close();
  });

  test("logging out ends the local session and goes to the provider's end-session page", async () => {
    const { context, page } = await newPage();
    await signIn(page, 'olga');
    await page.waitForURL(`${serviceUrl}/`);
    assert.equal((await whoAmI(context)).status, 200);
    await page.click('form[action="/logout"] button');
    await page.waitForURL(`${provider.issuer}/session/end**`);
    assert.equal((await whoAmI(context)).status, 401);
    const logout = (await audit('logout')).find((e) => e.actor.username === 'olga');
    assert.equal(logout?.actor.via, 'sso');
    await context.close();
  });

  /** Begins a sign-in as the login button does, but hands the browser to the provider with its
   * authorization request changed by `tamper` (a fresh navigation: routes do not see redirects). */
  const signInTampered = async (context: BrowserContext, page: Page, login: string, tamper: (request: URL) => void) => {
    const begun = await context.request.get(`${serviceUrl}/login/sso`, { maxRedirects: 0 });
    assert.equal(begun.status(), 303);
    const authorization = new URL(begun.headers()['location'] ?? '');
    tamper(authorization);
    await page.goto(authorization.href);
    await page.fill('input[name=login]', login);
    await page.fill('input[name=password]', 'anything');
    await page.click('button[type=submit]');
    await page.waitForSelector('#sso-refused');
  };

  test('a tampered state is refused with a page that says so', async () => {
    const { context, page } = await newPage();
    await signInTampered(context, page, 'alice', (url) => url.searchParams.set('state', 'a-state-this-browser-never-began'));
    assert.match((await page.textContent('#sso-refused')) ?? '', /its state does not match/);
    assert.equal((await whoAmI(context)).status, 401);
    const reasons = (await audit('login.refused')).map((e) => e.details['reason']);
    assert.ok(reasons.includes('state mismatch'), JSON.stringify(reasons));
    await context.close();
  });

  test('an ID token whose nonce is not the one this browser sent is refused', async () => {
    const { context, page } = await newPage();
    // The provider is asked with another nonce: its ID token carries that one.
    await signInTampered(context, page, 'alice', (url) => url.searchParams.set('nonce', 'a-nonce-this-browser-never-sent'));
    assert.match((await page.textContent('#sso-refused')) ?? '', /its nonce does not match/);
    assert.equal((await whoAmI(context)).status, 401);
    const reasons = (await audit('login.refused')).map((e) => e.details['reason']);
    assert.ok(reasons.includes('nonce mismatch'), JSON.stringify(reasons));
    await context.close();
  });

  test('a callback replayed after its sign-in is refused', async () => {
    const { context, page } = await newPage();
    const callbacks: string[] = [];
    page.on('request', (request) => {
      if (request.url().startsWith(`${serviceUrl}/login/sso/callback`)) callbacks.push(request.url());
    });
    await signIn(page, 'olga');
    await page.waitForURL(`${serviceUrl}/`);
    await context.clearCookies();
    const replayed = await page.goto(callbacks[0] ?? assert.fail('no callback seen'));
    assert.equal(replayed?.status(), 400);
    assert.match((await page.textContent('#sso-refused')) ?? '', /not begun in this browser/);
    assert.equal((await whoAmI(context)).status, 401);
    await context.close();
  });

  test('password login is off: the form refuses everyone but the break-glass admin', async () => {
    const password = 'local-operator-password-1';
    assert.equal((await admin.post('/api/manage/users', { username: 'local-op', password, role: 'operator' })).status, 201);
    const { context, page } = await newPage();
    await page.goto(`${serviceUrl}/login`);
    await page.fill('input[name=username]', 'local-op');
    await page.fill('input[name=password]', password);
    await page.click('form[action="/login"] button[type=submit]');
    await page.waitForSelector('[role=alert]');
    assert.match((await page.textContent('[role=alert]')) ?? '', new RegExp(`password login is off: log in with ${PROVIDER_NAME}`));
    assert.equal((await whoAmI(context)).status, 401);
    assertClientError(
      await new PersonClient(serviceUrl).post('/api/manage/login', { username: 'local-op', password }),
      403,
      'forbidden',
      /password login is off/,
    );
    await page.fill('input[name=username]', 'admin');
    await page.fill('input[name=password]', ADMIN_PASSWORD);
    await page.click('form[action="/login"] button[type=submit]');
    await page.waitForURL(`${serviceUrl}/`);
    assert.equal((await whoAmI(context)).user?.username, 'admin');
    const refusal = (await audit('login.refused')).find((e) => e.actor.username === 'local-op');
    assert.equal(refusal?.details['reason'], 'password login is off');
    await context.close();
  });

  test('the client secret is never in the logs, the pages or the audit export', async () => {
    const exported = await fetch(`${serviceUrl}/api/manage/audit/export`, { headers: { cookie: admin.cookie } });
    assert.equal(exported.status, 200);
    const everything = [...service.logs, ...shown, await exported.text()].join('\n');
    assert.ok(shown.length >= 10, `pages were collected (${shown.length})`);
    assert.ok(service.logs.some((line) => line.includes('single sign-on: provider discovered')));
    assert.ok(!everything.includes(CLIENT_SECRET), 'the client secret appeared');
  });
});

describe('single sign-on with an unreachable issuer at start', { skip: skipWithoutChromium }, () => {
  test('the service starts, logs the issuer and the cause, keeps password login, and the button says why', async () => {
    const listen = `127.0.0.1:${await freePort()}`;
    const issuer = `http://127.0.0.1:${await freePort()}/realms/nowhere`;
    const store = await createServiceStore('pglite');
    const service = await startTestService(store, ssoEnv(issuer, `http://${listen}`), listen);
    const browser = await launchChromium();
    try {
      const logged = await until('the unreachable issuer is logged', () =>
        Promise.resolve(service.logs.find((line) => line.includes(`single sign-on: cannot read the OpenID configuration of ${issuer}`))),
      );
      assert.match(logged, /ECONNREFUSED|fetch failed/);
      assert.ok(!logged.includes(CLIENT_SECRET));
      await PersonClient.login(service.url, 'admin', ADMIN_PASSWORD);
      const page = await browser.newPage();
      await page.goto(`${service.url}/login`);
      assert.match((await page.textContent('#sso-unavailable')) ?? '', new RegExp(`cannot read the OpenID configuration of ${issuer}`));
      const answer = page.waitForResponse(`${service.url}/login/sso`);
      await page.click('#sso-login');
      assert.equal((await answer).status(), 503);
      assert.match((await page.textContent('[role=alert]')) ?? '', new RegExp(`Log in with ${PROVIDER_NAME} is unavailable`));
      await page.fill('input[name=username]', 'admin');
      await page.fill('input[name=password]', ADMIN_PASSWORD);
      await page.click('form[action="/login"] button[type=submit]');
      await page.waitForURL(`${service.url}/`);
      assert.ok(!service.logs.join('\n').includes(CLIENT_SECRET));
    } finally {
      await browser.close();
      await service.close();
      await store.dispose();
    }
  });
});

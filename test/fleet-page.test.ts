// The fleet page in Chromium: its sort links and its filter form (GET parameters, no script)
// change what it shows, on real rows in PGlite, served under the service's Content-Security-
// Policy with its stylesheet, so that a CSP violation or a script error fails the test. Served by
// a small node:http server until the page has its route (the integrator's part).
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import { readFleet } from '../src/service/fleet/fleet.ts';
import { fleetQueryFromPage } from '../src/service/fleet/query.ts';
import type { LoginSession } from '../src/service/people/store.ts';
import { createFleetStore } from '../src/service/storage/sql-fleet.ts';
import { APP_CSS, APP_JS } from '../src/service/web/assets.ts';
import { fleetPage } from '../src/service/web/fleet-page.ts';
import { SCREENSHOTS, launchChromium, openWatchedPage, skipWithoutChromium } from './helpers/browser.ts';
import { SCENARIOS, SHORT_LEASE_MS, addDatabase, openFreshStorage, type OpenedStorage } from './helpers/fleet-fixture.ts';

const skip = skipWithoutChromium;
/** The pages' policy (src/service/http/pages.ts). */
const CSP =
  "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

let opened: OpenedStorage;
let browser: Browser;
let page: Page;
let problems: string[] = [];
let base = '';
const server = createServer((req, res) => {
  const url = new URL(req.url ?? '/', 'http://localhost');
  if (url.pathname === '/static/app.css') return void res.writeHead(200, { 'content-type': 'text/css' }).end(APP_CSS);
  if (url.pathname === '/static/app.js') return void res.writeHead(200, { 'content-type': 'text/javascript' }).end(APP_JS);
  // The fleet is the home page (/), and /fleet the same.
  if (url.pathname !== '/' && url.pathname !== '/fleet') return void res.writeHead(404).end();
  const query = fleetQueryFromPage(url.searchParams);
  readFleet({ stores: { fleet: createFleetStore(opened.driver) } }, session.user, query).then(
    (answer) =>
      res
        .writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'content-security-policy': CSP })
        .end(fleetPage(session, answer, query).value),
    (err: unknown) => res.writeHead(500).end(String(err)),
  );
});
let session: LoginSession;

before(async () => {
  if (skip) return;
  opened = await openFreshStorage('pglite');
  const user = await opened.storage.createOrganization('fleet-person', 'fleet-person', 'not-a-real-hash');
  session = {
    user: { ...user, via: 'password', address: null, token: null },
    csrfToken: 'csrf',
    expiresAt: new Date(Date.now() + 3600_000),
  };
  for (const scenario of SCENARIOS) await addDatabase(opened.storage, user, `${scenario.replaceAll('_', ' ')} db`, scenario);
  await sleep(SHORT_LEASE_MS + 200);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  browser = await launchChromium();
  ({ page, problems } = await openWatchedPage(browser, { expectedStatuses: [] }));
});

after(async () => {
  if (skip) return;
  await browser.close();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  await opened.dispose();
});

/** The rows' names and first states, as the browser shows them. */
async function rows(): Promise<Array<[string, string]>> {
  const out: Array<[string, string]> = [];
  for (const tr of await page.locator('#fleet tbody tr').all()) {
    const name = (await tr.locator('td a').first().textContent()) ?? '';
    out.push([name, ((await tr.getAttribute('data-states')) ?? '').split(' ')[0] ?? '']);
  }
  return out;
}

test('the fleet page sorts and filters in the browser, by links and a GET form', { skip }, async () => {
  await page.goto(`${base}/fleet`);
  assert.deepEqual(
    (await rows()).map(([, state]) => state),
    ['awaiting_approval', 'agent_lost', 'blocked', 'session_failed', 'agent_stopped', 'no_agent', 'tuning', 'kept', 'idle', 'idle', 'idle'],
    'what needs a person first',
  );
  assert.equal(await page.locator('.sub').textContent(), '11 databases; 6 need a person. Sorted: needs attention first.');
  await page.screenshot({ path: join(SCREENSHOTS, 'fleet.png'), fullPage: true });

  // A column heading sorts by it.
  await page.click('#fleet thead a:has-text("Database")');
  assert.equal(new URL(page.url()).searchParams.get('sort'), 'name');
  const names = (await rows()).map(([name]) => name);
  assert.deepEqual(
    names,
    [...names].sort((a, b) => a.localeCompare(b, 'en')),
  );
  assert.equal(names.length, 11);

  // The form: a piece of the name and a state, kept with the sort.
  await page.fill('#fleet-filter input[name=q]', 'KEPT');
  await page.selectOption('#fleet-filter select[name=state]', 'idle');
  await page.click('#fleet-filter button[type=submit]');
  const params = new URL(page.url()).searchParams;
  assert.deepEqual([params.get('q'), params.get('state'), params.get('sort')], ['KEPT', 'idle', 'name']);
  assert.deepEqual(await rows(), [
    ['kept revert pending db', 'idle'],
    ['kept then reverted db', 'idle'],
  ]);
  assert.equal(await page.inputValue('#fleet-filter input[name=q]'), 'KEPT', 'the form shows the filter in force');

  // The chips filter by state, keeping the name filter; "all" with nothing matching says so.
  await page.click('a.badge:has-text("needs attention")');
  assert.deepEqual(await rows(), [], 'no database named …kept… needs attention');
  assert.match((await page.locator('.card .empty').textContent()) ?? '', /No database matches this filter/);
  await page.fill('#fleet-filter input[name=q]', '');
  await page.click('#fleet-filter button[type=submit]');
  assert.equal((await rows()).length, 6);
  await page.click('a.badge:has-text("changes blocked")');
  assert.deepEqual(await rows(), [['blocked db', 'blocked']]);
  assert.deepEqual(problems, [], 'no script error or CSP violation');
});

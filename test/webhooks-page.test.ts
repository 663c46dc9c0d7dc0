// The people page's webhooks section in Chromium: the admin adds a webhook with the form (a URL
// with credentials refused first, naming the field), sees it listed by its receiver, without its
// secret or its URL's query, with the kinds chosen; its events reach it signed with its secret;
// the admin removes it. The audit page shows both, without the secret. No script error or CSP
// violation on the way.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { test } from 'node:test';
import { webhookBody } from '../src/service/notify/webhook.ts';
import { SCREENSHOTS, dashboardInChromium, logInOnPage, skipWithoutChromium } from './helpers/browser.ts';
import { until } from './helpers/until.ts';
import { URL_QUERY_SECRET, receiverAccepts, webhookReceiverForFile } from './helpers/webhook-receiver.ts';

const skip = skipWithoutChromium;
// The receiver is on loopback, which organizations' webhooks may reach only when allowed.
const web = dashboardInChromium({ service: { env: { TUNER_WEBHOOK_ALLOW_NETWORKS: '127.0.0.1' } }, page: { expectedStatuses: [400] } });
const server = webhookReceiverForFile();
const SECRET = 'webhook-page-secret-0123456789abcdef-XYZ';

test("the people page adds, lists and removes the organization's webhooks", { skip, timeout: 120_000 }, async () => {
  const { page, problems, lab } = web;
  const { service, admin } = lab;
  const { databaseId } = await admin.createDatabase('paged');
  const receiver = server.path((_n, res) => res.writeHead(204).end());
  const receiverPath = receiver.url.split('?')[0]!;

  await logInOnPage(page, service.url);
  await page.goto(`${service.url}/users`);
  assert.match((await page.textContent('#webhooks')) ?? '', /No webhooks yet/);

  // A URL with credentials: refused on the page, naming the field; the secret not shown back.
  const form = '#webhooks form[action="/webhooks"]';
  await page.fill(`${form} input[name=url]`, 'https://someone:pw@hooks.example.com/x');
  await page.fill(`${form} input[name=secret]`, SECRET);
  await page.click(`${form} button[type=submit]`);
  await page.waitForSelector('.notice.bad');
  assert.match((await page.textContent('.notice.bad')) ?? '', /form\.url: the URL must not carry credentials/);
  assert.ok(!(await page.content()).includes(SECRET));

  // A good one, for kept_gain_gone only.
  await page.fill(`${form} input[name=url]`, receiver.url);
  await page.fill(`${form} input[name=secret]`, SECRET);
  await page.uncheck(`${form} input[name="event-workload_changed"]`);
  await page.click(`${form} button[type=submit]`);
  await page.waitForURL(`${service.url}/users?done=webhook-added#webhooks`);
  const row = (await page.textContent('#webhooks table')) ?? '';
  assert.ok(row.includes(receiverPath) && row.includes('(and a query, not shown)') && row.includes('kept_gain_gone'), row);
  assert.ok(!row.includes('workload_changed'), row);
  await page.screenshot({ path: join(SCREENSHOTS, 'users-webhooks.png'), fullPage: true });
  const shown = await page.content();
  assert.ok(!shown.includes(SECRET) && !shown.includes(URL_QUERY_SECRET), 'neither the secret nor the query is on the page');

  // An event of the organization's database reaches it, signed with the secret given.
  const eventId = randomUUID();
  const body = webhookBody({
    id: eventId,
    kind: 'kept_gain_gone',
    database: { id: databaseId, name: 'paged' },
    at: new Date(),
    details: {},
  });
  await service.storage.enqueueWebhooks([{ eventId, databaseId, kind: 'kept_gain_gone', body, serviceWide: false }]);
  await until('the event delivered', () => Promise.resolve(receiver.requests(eventId).length === 1), 15_000, 50);
  assert.ok(receiverAccepts(receiver.requests(eventId)[0]!, SECRET));

  await page.click('#webhooks form[action$="/remove"] button');
  await page.waitForURL(`${service.url}/users?done=webhook-removed#webhooks`);
  assert.match((await page.textContent('#webhooks')) ?? '', /No webhooks yet/);

  await page.goto(`${service.url}/audit`);
  const audit = await page.content();
  assert.ok(audit.includes('webhook.created') && audit.includes('webhook.removed'), 'the audit page shows both');
  assert.ok(!audit.includes(SECRET) && !audit.includes(URL_QUERY_SECRET));
  assert.deepEqual(problems, []);
});

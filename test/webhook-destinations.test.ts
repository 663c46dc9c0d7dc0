// Organizations' webhooks may not reach the service's own network (SSRF): over real HTTP, with a
// real receiver on loopback. Without TUNER_WEBHOOK_ALLOW_NETWORKS, an admin's webhook to a
// loopback, private, link-local (cloud metadata) or IPv6 loopback address, or to a name resolving
// to one (localhost), is a 400 naming body.url and saying why, on the API and the page alike; a
// public address is taken. With it, what it names is allowed and nothing else. At delivery, a
// destination no longer allowed (the operator took it off the list; DNS changed) is refused before
// any request, not retried, the reason in the outcome and the log, the URL's query in neither;
// the service-wide webhook (TUNER_WEBHOOK_URL, the operator's own) still delivers to loopback. A
// bad TUNER_WEBHOOK_ALLOW_NETWORKS is a ConfigError naming it.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { ConfigError, parseServiceArgs } from '../src/service/app/config.ts';
import { WebhookDestinations } from '../src/service/notify/destinations.ts';
import type { OutboxEvent } from '../src/service/notify/store.ts';
import { REFUSED_MESSAGE, WebhookNotifier, webhookBody } from '../src/service/notify/webhook.ts';
import { assertClientError } from './helpers/service.ts';
import { startAdminService, type AdminService } from './helpers/service-admin.ts';
import { until } from './helpers/until.ts';
import { URL_QUERY_SECRET, webhookReceiverForFile } from './helpers/webhook-receiver.ts';

const SECRET = 'destination-tests-webhook-secret-0123456789';
const SERVICE_SECRET = 'destination-tests-service-wide-secret-0123456789';
const HOW_TO_ALLOW = "the service's operator can allow it with TUNER_WEBHOOK_ALLOW_NETWORKS";

const server = webhookReceiverForFile();
const accepting = () => server.path((_n, res) => res.writeHead(204).end());

/** The receiver's URL with another host (same port, path and query). */
const withHost = (url: string, host: string) => url.replace('127.0.0.1', host);

/** What the admin gets for adding a webhook to `url` through the people's API. */
const addWebhook = (lab: AdminService, url: string) =>
  lab.admin.post<{ webhook: { id: string } }>('/api/manage/webhooks', { url, secret: SECRET });

/** An event of `databaseId` in the outbox, as the watch writes it. */
async function raise(lab: AdminService, databaseId: string, serviceWide: boolean): Promise<OutboxEvent> {
  const id = randomUUID();
  const body = webhookBody({ id, kind: 'kept_gain_gone', database: { id: databaseId, name: 'orders' }, at: new Date(), details: {} });
  const event: OutboxEvent = { eventId: id, databaseId, kind: 'kept_gain_gone', body, serviceWide };
  await lab.service.storage.enqueueWebhooks([event]);
  return event;
}

/** Every row of the outbox attempted, and how many ended in each state. */
async function settled(lab: AdminService): Promise<Record<string, number>> {
  let states: Record<string, number> = {};
  await until(
    'the outbox settled',
    async () => {
      states = (await lab.service.storage.metricsSnapshot()).webhooksByState;
      return (states['pending'] ?? 0) === 0;
    },
    15_000,
    50,
  );
  return states;
}

test('TUNER_WEBHOOK_ALLOW_NETWORKS: addresses and CIDR ranges, IPv4 and IPv6; none by default; anything else a ConfigError naming it', () => {
  const allowed = (env: Record<string, string>) => {
    const request = parseServiceArgs([], env);
    assert.equal(request.kind, 'run');
    return request.kind === 'run' ? request.config.webhookAllowNetworks : undefined;
  };
  assert.deepEqual(allowed({}), []);
  assert.deepEqual(allowed({ TUNER_WEBHOOK_ALLOW_NETWORKS: '10.20.0.0/16, 127.0.0.1,fd00::/8 , ::1' }), [
    '10.20.0.0/16',
    '127.0.0.1',
    'fd00::/8',
    '::1',
  ]);
  for (const bad of ['10.0.0.0/33', 'intranet.example.com', '10.0.0.1,', 'fd00::/129', 'all']) {
    assert.throws(
      () => parseServiceArgs([], { TUNER_WEBHOOK_ALLOW_NETWORKS: bad }),
      (err: Error) => err instanceof ConfigError && /TUNER_WEBHOOK_ALLOW_NETWORKS: expected addresses or CIDR ranges/.test(err.message),
      bad,
    );
  }
});

test("a notifier through the destinations' dispatcher is refused a loopback receiver: one attempt, not retried, never connected", async () => {
  const receiver = accepting();
  const notifier = new WebhookNotifier(
    { url: receiver.url, secret: SECRET, maxAttempts: 3, initialBackoffMs: 1 },
    { dispatcher: new WebhookDestinations([]).dispatcher() },
  );
  const id = randomUUID();
  const outcome = await notifier.notify({ id, kind: 'test', database: { id: randomUUID(), name: 'x' }, at: new Date(), details: {} });
  assert.deepEqual(outcome, {
    status: 'failed',
    eventId: id,
    attempts: 1,
    retryable: false,
    reason: `the destination is not allowed: 127.0.0.1 is a loopback address; ${HOW_TO_ALLOW}`,
  });
  assert.deepEqual(receiver.requests(), []);
});

describe("organizations' webhooks without TUNER_WEBHOOK_ALLOW_NETWORKS", () => {
  let lab: AdminService;
  before(async () => {
    lab = await startAdminService('pglite');
  });
  after(() => lab?.close());

  test('loopback, private, link-local and IPv6 loopback addresses, and a name resolving to loopback: a 400 naming body.url and why', async () => {
    const url = accepting().url;
    const refused: Array<[string, RegExp]> = [
      [url, /body\.url: 127\.0\.0\.1 is a loopback address; the service's operator can allow it with TUNER_WEBHOOK_ALLOW_NETWORKS/],
      [
        'http://169.254.169.254/latest/meta-data/',
        /body\.url: 169\.254\.169\.254 is a link-local address \(where clouds serve instance metadata\)/,
      ],
      ['http://[::1]:9/hook', /body\.url: ::1 is a loopback address/],
      ['http://10.1.2.3/hook', /body\.url: 10\.1\.2\.3 is a private address; the service's operator can allow it/],
      ['http://[::ffff:192.168.1.1]/hook', /body\.url: 192\.168\.1\.1 is a private address/],
      ['http://0.0.0.0:9/hook', /body\.url: 0\.0\.0\.0 is the unspecified address/],
      [withHost(url, 'localhost'), /body\.url: localhost resolves to (127\.0\.0\.1|::1), a loopback address/],
      ['https://no-such-host.invalid/hook', /body\.url: no-such-host\.invalid does not resolve to an address/],
    ];
    for (const [target, why] of refused) {
      const answer = await addWebhook(lab, target);
      assertClientError(answer, 400, 'bad_request', why);
      assert.ok(!JSON.stringify(answer.body).includes(URL_QUERY_SECRET), "the URL's query is not echoed");
    }
    // The page's form says the same, on the page.
    const form = new URLSearchParams({ _csrf: lab.admin.csrfToken, url, secret: SECRET, 'event-kept_gain_gone': 'true' });
    const posted = await fetch(`${lab.service.url}/webhooks`, {
      method: 'POST',
      headers: { cookie: lab.admin.cookie, 'content-type': 'application/x-www-form-urlencoded' },
      body: form,
      redirect: 'manual',
    });
    assert.equal(posted.status, 400);
    assert.match(await posted.text(), /127\.0\.0\.1 is a loopback address; the service(&#39;|&#x27;|')s operator can allow it/);
    assert.deepEqual((await lab.admin.get<{ webhooks: unknown[] }>('/api/manage/webhooks')).body.webhooks, [], 'nothing added');

    // A public address is a destination (nothing is sent to it here).
    const fine = await addWebhook(lab, 'https://93.184.215.14/hook');
    assert.equal(fine.status, 201, JSON.stringify(fine.body));
    assert.equal((await lab.admin.delete(`/api/manage/webhooks/${fine.body.webhook.id}`)).status, 204);
  });
});

describe('TUNER_WEBHOOK_ALLOW_NETWORKS allows what it names, and only that', () => {
  let lab: AdminService;
  let serviceWide: ReturnType<typeof accepting>;
  before(async () => {
    serviceWide = accepting();
    lab = await startAdminService('pglite', {
      env: {
        TUNER_WEBHOOK_ALLOW_NETWORKS: '127.0.0.0/8, ::1, 10.1.0.0/16',
        TUNER_WEBHOOK_URL: serviceWide.url,
        TUNER_WEBHOOK_SECRET: SERVICE_SECRET,
      },
    });
  });
  after(() => lab?.close());

  test('allowed: the ranges named, a name resolving into them; refused: the rest of the private networks', async () => {
    const receiver = accepting();
    for (const target of [receiver.url, withHost(receiver.url, 'localhost'), 'http://[::1]:9/hook', 'http://10.1.200.3/hook']) {
      const answer = await addWebhook(lab, target);
      assert.equal(answer.status, 201, `${target}: ${JSON.stringify(answer.body)}`);
    }
    assertClientError(await addWebhook(lab, 'http://10.2.0.1/hook'), 400, 'bad_request', /body\.url: 10\.2\.0\.1 is a private address/);
    assertClientError(await addWebhook(lab, 'http://169.254.169.254/'), 400, 'bad_request', /169\.254\.169\.254 is a link-local address/);
    assertClientError(await addWebhook(lab, 'http://[fd00::1]/'), 400, 'bad_request', /fd00::1 is a private address \(IPv6 unique local\)/);
  });

  test('a destination allowed when added but not any more is refused at delivery: not retried, never connected; the service-wide webhook still delivers', async () => {
    // Only this test's webhooks in the organization.
    for (const { id } of (await lab.admin.get<{ webhooks: Array<{ id: string }> }>('/api/manage/webhooks')).body.webhooks)
      assert.equal((await lab.admin.delete(`/api/manage/webhooks/${id}`)).status, 204);
    const { databaseId } = await lab.admin.createDatabase(`orders-${randomUUID().slice(0, 8)}`);
    const byAddress = accepting();
    const byName = accepting();
    for (const target of [byAddress.url, withHost(byName.url, 'localhost')]) assert.equal((await addWebhook(lab, target)).status, 201);
    // The operator takes loopback off the list: the same storage, the webhooks still there.
    await lab.restart({ TUNER_WEBHOOK_URL: serviceWide.url, TUNER_WEBHOOK_SECRET: SERVICE_SECRET });
    const before = await settled(lab);
    const event = await raise(lab, databaseId, true);
    const after = await settled(lab);
    assert.equal((after['failed'] ?? 0) - (before['failed'] ?? 0), 2, 'both webhooks given up at once');
    assert.deepEqual([byAddress.requests().length, byName.requests().length], [0, 0], 'neither receiver was connected to');
    assert.equal(serviceWide.requests(event.eventId).length, 1, 'the service-wide webhook, on loopback, delivered');

    const refusals = lab.service.logs.filter((line) => line.includes(REFUSED_MESSAGE) && line.includes(event.eventId));
    assert.equal(refusals.length, 2, lab.service.logs.join('\n'));
    assert.ok(refusals.some((line) => line.includes(`the destination is not allowed: 127.0.0.1 is a loopback address; ${HOW_TO_ALLOW}`)));
    assert.ok(
      refusals.some((line) => /the destination is not allowed: localhost resolves to (127\.0\.0\.1|::1), a loopback address/.test(line)),
    );
    assert.ok(!lab.service.logs.some((line) => line.includes(URL_QUERY_SECRET)), "the URL's query is never logged");
  });
});

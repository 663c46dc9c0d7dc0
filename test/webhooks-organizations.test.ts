// An organization's webhooks over real HTTP, on both storages, with real receivers on loopback
// (node:http): two organizations, each with its webhook, and the service-wide one
// (TUNER_WEBHOOK_URL) too. An event of organization A's database goes to A's webhook only, signed
// with A's secret, and to the service-wide one, signed with its own; a webhook that chose its
// kinds gets only those. Only an admin manages webhooks (a viewer's or an operator's request is a
// 403 naming the role); bad input is a 400 naming the field; adding and removing are in the audit
// log with the actor and address; the secret (and the URL's query) is never in an answer, the
// page, the audit log, its export or the logs; a removed webhook gets nothing more.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import type { OutboxEvent } from '../src/service/notify/store.ts';
import { webhookBody, type WebhookEventKind } from '../src/service/notify/webhook.ts';
import { hashPassword } from '../src/service/people/passwords.ts';
import { PersonClient, STORAGE_KINDS, assertClientError } from './helpers/service.ts';
import { startAdminService, type AdminService } from './helpers/service-admin.ts';
import { until } from './helpers/until.ts';
import { URL_QUERY_SECRET, receiverAccepts, webhookReceiverForFile, type ReceiverPath } from './helpers/webhook-receiver.ts';

const SERVICE_SECRET = 'service-wide-webhook-secret-0123456789abcdef';
const SECRET_A = 'organization-a-webhook-secret-0123456789';
const SECRET_B = 'organization-b-webhook-secret-0123456789';
const B_PASSWORD = 'beta-admin-password-for-tests';

const server = webhookReceiverForFile();
const accepting = () => server.path((_n, res) => res.writeHead(204).end());

interface WebhookJson {
  id: string;
  url: string;
  hasQuery: boolean;
  events: string[] | null;
  createdAt: string;
}

interface AuditJson {
  action: string;
  actor: { username: string };
  address: string | null;
  details: Record<string, unknown>;
}

/** What a receiver got of one event. */
const got = (r: ReceiverPath, eventId: string) => r.requests().filter((q) => q.headers['tuner-event-id'] === eventId);

for (const kind of STORAGE_KINDS) {
  describe(`an organization's webhooks on ${kind}`, () => {
    let lab: AdminService;
    let serviceWide: ReceiverPath;
    before(async () => {
      serviceWide = accepting();
      lab = await startAdminService(kind, {
        // The receivers are on loopback, which organizations' webhooks may reach only when allowed.
        env: { TUNER_WEBHOOK_URL: serviceWide.url, TUNER_WEBHOOK_SECRET: SERVICE_SECRET, TUNER_WEBHOOK_ALLOW_NETWORKS: '127.0.0.1' },
      });
    });
    after(() => lab?.close());

    /** An event of a database, written as the watch writes it (its outbox's serviceWide). */
    async function raise(databaseId: string, eventKind: WebhookEventKind = 'kept_gain_gone'): Promise<OutboxEvent> {
      const id = randomUUID();
      const body = webhookBody({
        id,
        kind: eventKind,
        database: { id: databaseId, name: 'orders' },
        at: new Date(),
        details: { message: 'a test event' },
      });
      const event: OutboxEvent = { eventId: id, databaseId, kind: eventKind, body, serviceWide: true };
      await lab.service.storage.enqueueWebhooks([event]);
      return event;
    }

    /** Every row of the outbox attempted: what was not sent by now never will be. */
    const settled = () =>
      until(
        'the outbox settled',
        async () => {
          const { webhooksByState } = await lab.service.storage.metricsSnapshot();
          return (webhooksByState['pending'] ?? 0) === 0;
        },
        15_000,
        50,
      );

    test("each organization's events go to its own webhooks, signed with their secrets, and to the service-wide one", async () => {
      const { admin, service } = lab;
      // A second organization, as another team of the same service.
      await service.storage.createOrganization('beta', 'beta-admin', await hashPassword(B_PASSWORD));
      const beta = await PersonClient.login(service.url, 'beta-admin', B_PASSWORD);
      const a = await admin.createDatabase('alpha-orders');
      const b = await beta.createDatabase('beta-orders');
      // A's receiver fails its first request: the retry is logged (level warn), by webhook id.
      const hookA = server.path((n, res) => res.writeHead(n === 1 ? 503 : 204).end());
      const hookB = accepting();

      const createdA = await admin.post<{ webhook: WebhookJson }>('/api/manage/webhooks', { url: hookA.url, secret: SECRET_A });
      assert.equal(createdA.status, 201, JSON.stringify(createdA.body));
      const createdB = await beta.post<{ webhook: WebhookJson }>('/api/manage/webhooks', {
        url: hookB.url,
        secret: SECRET_B,
        events: ['kept_gain_gone'],
      });
      assert.equal(createdB.status, 201, JSON.stringify(createdB.body));
      assert.deepEqual(
        [createdA.body.webhook.url, createdA.body.webhook.hasQuery, createdA.body.webhook.events],
        [hookA.url.split('?')[0], true, null],
      );
      // Each admin sees their organization's webhook only, and never its secret nor its query.
      const listA = await admin.get<{ webhooks: WebhookJson[] }>('/api/manage/webhooks');
      const listB = await beta.get<{ webhooks: WebhookJson[] }>('/api/manage/webhooks');
      assert.deepEqual(
        [listA.body.webhooks.map((w) => w.id), listB.body.webhooks.map((w) => w.id)],
        [[createdA.body.webhook.id], [createdB.body.webhook.id]],
      );
      for (const text of [JSON.stringify(listA.body), JSON.stringify(listB.body), JSON.stringify(createdA.body)]) {
        for (const secret of [SECRET_A, SECRET_B, URL_QUERY_SECRET]) assert.ok(!text.includes(secret), `${secret} in ${text}`);
      }

      const ofA = await raise(a.databaseId);
      const ofB = await raise(b.databaseId);
      const workloadOfB = await raise(b.databaseId, 'workload_changed');
      await settled();
      const one = (r: ReceiverPath, e: OutboxEvent) => got(r, e.eventId).length;
      assert.deepEqual(
        [one(hookA, ofA), one(hookB, ofA), one(serviceWide, ofA)],
        [2, 0, 1],
        "A's event: A's webhook (a 503, then delivered) and the service-wide one",
      );
      assert.deepEqual(
        [one(hookA, ofB), one(hookB, ofB), one(serviceWide, ofB)],
        [0, 1, 1],
        "B's event: B's webhook and the service-wide one",
      );
      assert.deepEqual(
        [one(hookA, workloadOfB), one(hookB, workloadOfB), one(serviceWide, workloadOfB)],
        [0, 0, 1],
        "B's webhook takes kept_gain_gone only",
      );
      const [, toA] = got(hookA, ofA.eventId);
      assert.ok(
        got(hookA, ofA.eventId).every((q) => q.body === ofA.body && receiverAccepts(q, SECRET_A)),
        "every attempt signed with A's secret",
      );
      assert.ok(toA);
      assert.ok(!receiverAccepts(toA, SECRET_B) && !receiverAccepts(toA, SERVICE_SECRET), 'and with no other');
      assert.ok(receiverAccepts(got(hookB, ofB.eventId)[0]!, SECRET_B), "signed with B's secret");
      assert.ok(
        [ofA, ofB, workloadOfB].every((e) => receiverAccepts(got(serviceWide, e.eventId)[0]!, SERVICE_SECRET)),
        "the service-wide one's with its own",
      );

      // Removed: its events stop, the service-wide one still gets them.
      assert.equal((await admin.delete(`/api/manage/webhooks/${createdA.body.webhook.id}`)).status, 204);
      assertClientError(await admin.delete(`/api/manage/webhooks/${createdA.body.webhook.id}`), 404, 'not_found', 'no webhook');
      assertClientError(await admin.delete(`/api/manage/webhooks/${createdB.body.webhook.id}`), 404, 'not_found', 'no webhook');
      const later = await raise(a.databaseId);
      await settled();
      assert.deepEqual([one(hookA, later), one(serviceWide, later)], [0, 1]);
      const retried = service.logs.filter((line) => line.includes('webhook: attempt failed; retrying'));
      assert.equal(retried.length, 1, service.logs.join('\n'));
      assert.ok(retried[0]!.includes(`"webhookId":"${createdA.body.webhook.id}"`) && retried[0]!.includes(hookA.url.split('?')[0]!));
      assert.deepEqual((await admin.get<{ webhooks: WebhookJson[] }>('/api/manage/webhooks')).body.webhooks, []);

      // The audit log: who added and removed it, from where, the receiver without its query.
      const audit = (await admin.get<{ events: AuditJson[] }>('/api/manage/audit')).body.events;
      const created = audit.find((e) => e.action === 'webhook.created');
      const removed = audit.find((e) => e.action === 'webhook.removed');
      assert.deepEqual(
        [created?.actor.username, created?.address, created?.details['url'], created?.details['webhookId']],
        ['admin', '127.0.0.1', hookA.url.split('?')[0], createdA.body.webhook.id],
      );
      assert.deepEqual([removed?.actor.username, removed?.details['webhookId']], ['admin', createdA.body.webhook.id]);
      const betaAudit = (await beta.get<{ events: AuditJson[] }>('/api/manage/audit')).body.events;
      assert.deepEqual(
        betaAudit.filter((e) => e.action.startsWith('webhook.')).map((e) => [e.action, e.actor.username, e.details['events']]),
        [['webhook.created', 'beta-admin', ['kept_gain_gone']]],
        "B's log has B's webhook only",
      );

      // No secret, nor the URL's query, anywhere people or operators read.
      const exported = await fetch(`${service.url}/api/manage/audit/export`, { headers: { cookie: admin.cookie } });
      assert.equal(exported.status, 200);
      const page = await fetch(`${service.url}/users`, { headers: { cookie: beta.cookie } });
      assert.equal(page.status, 200);
      const pageText = await page.text();
      assert.ok(pageText.includes(hookB.url.split('?')[0]!), 'the page lists the webhook');
      const readable = [await exported.text(), JSON.stringify(audit), JSON.stringify(betaAudit), pageText, service.logs.join('\n')];
      for (const text of readable) {
        for (const secret of [SECRET_A, SECRET_B, SERVICE_SECRET, URL_QUERY_SECRET]) assert.ok(!text.includes(secret), secret);
      }
    });

    test('only an admin manages webhooks; bad input names the field', async () => {
      const { admin, service } = lab;
      for (const role of ['viewer', 'operator']) {
        const password = `${role}-password-for-tests`;
        const made = await admin.post('/api/manage/users', { username: `${role}-of-hooks`, password, role });
        assert.equal(made.status, 201, JSON.stringify(made.body));
        const person = await PersonClient.login(service.url, `${role}-of-hooks`, password);
        const url = accepting().url;
        assertClientError(
          await person.post('/api/manage/webhooks', { url, secret: SECRET_A }),
          403,
          'forbidden',
          /only an admin.*webhooks/,
        );
        assertClientError(await person.get('/api/manage/webhooks'), 403, 'forbidden', /only an admin/);
        assertClientError(await person.delete(`/api/manage/webhooks/${randomUUID()}`), 403, 'forbidden', /only an admin/);
        // Nor through the page's form (the CSRF token is the login's; the role is what refuses).
        const form = new URLSearchParams({ _csrf: person.csrfToken, url, secret: SECRET_A });
        const posted = await fetch(`${service.url}/webhooks`, {
          method: 'POST',
          headers: { cookie: person.cookie, 'content-type': 'application/x-www-form-urlencoded' },
          body: form,
          redirect: 'manual',
        });
        assert.equal(posted.status, 403, `${role} posting the page's form`);
        assert.match(await posted.text(), /only an admin can manage webhooks: your role is (viewer|operator)/);
      }
      const before = (await admin.get<{ webhooks: WebhookJson[] }>('/api/manage/webhooks')).body.webhooks.length;
      const url = accepting().url;
      const bad: Array<[unknown, string]> = [
        [{ url: 'ftp://hooks.example.com/x', secret: SECRET_A }, 'body.url'],
        [{ url: 'https://user:pw@hooks.example.com/x', secret: SECRET_A }, 'body.url'],
        [{ url, secret: 'too-short' }, 'body.secret'],
        [{ url }, 'body.secret'],
        [{ url, secret: SECRET_A, events: ['everything'] }, 'body.events'],
        [{ url, secret: SECRET_A, events: [] }, 'body.events'],
        [{ url, secret: SECRET_A, colour: 'red' }, 'colour'],
      ];
      for (const [body, field] of bad) {
        const answer = await admin.post('/api/manage/webhooks', body);
        assertClientError(answer, 400, 'bad_request', field);
        assert.ok(!JSON.stringify(answer.body).includes(SECRET_A), 'the secret is not echoed');
      }
      assertClientError(await admin.delete('/api/manage/webhooks/not-a-uuid'), 400, 'bad_request', 'path.webhookId');
      assert.equal((await admin.get<{ webhooks: WebhookJson[] }>('/api/manage/webhooks')).body.webhooks.length, before, 'nothing made');
    });
  });
}

// The webhook's outbox on both storages, against a real receiver on loopback (node:http), sent by
// the senders of real service contexts (app/context.ts, configured as the bin is): the signature
// checked as docs/notifications.md tells receivers to, retries after 500s, one delivery per event
// when two contexts (replicas) share the storage and both send, an event written twice stored
// once, and events not delivered when a service stopped (never tried, waiting for a retry, or cut
// off mid-attempt) sent by the next service on the same storage.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { tmpdir } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, test } from 'node:test';
import { parseServiceArgs } from '../src/service/app/config.ts';
import { createServiceContext, type ServiceContext } from '../src/service/app/context.ts';
import type { OutboxEvent } from '../src/service/notify/store.ts';
import { webhookBody, type WebhookLogEntry } from '../src/service/notify/webhook.ts';
import type { SqlDriver } from '../src/service/storage/driver.ts';
import { migrate } from '../src/service/storage/migrations.ts';
import { openPgliteDriver } from '../src/service/storage/pglite-driver.ts';
import { openPostgresDriver } from '../src/service/storage/postgres-driver.ts';
import { createSqlStorage } from '../src/service/storage/sql-storage.ts';
import type { Storage } from '../src/service/storage/storage.ts';
import { addDatabase } from './helpers/fleet-fixture.ts';
import { createServiceStore, STORAGE_KINDS, type StorageKind } from './helpers/service.ts';
import { until } from './helpers/until.ts';
import {
  receiverAccepts as accepts,
  URL_QUERY_SECRET,
  type Received,
  type Script,
  webhookReceiverForFile,
} from './helpers/webhook-receiver.ts';

const SECRET = 'whsec-outbox-tests-0123456789abcdef-XYZ';

const server = webhookReceiverForFile();

/** A path of the receiver's own for one test, answering the n-th request of each event id as `script` says. */
const receiver = (script: Script) => server.path(script, 'event');

const receiverAccepts = (r: Received) => accepts(r, SECRET);

/** A storage the test can close and open again (a restart), and a second connection to it (a
 * replica) where the storage allows one: PostgreSQL; PGlite has one process by design. */
interface Reopenable {
  open(): Promise<{ driver: SqlDriver; storage: Storage }>;
  dispose(): Promise<void>;
}

async function reopenable(kind: StorageKind): Promise<Reopenable> {
  // PGlite: a copy of the migrated template (createServiceStore), as a test service starts from.
  const store = await createServiceStore(kind);
  return {
    async open() {
      const driver = store.databaseUrl
        ? await openPostgresDriver({ url: store.databaseUrl, poolSize: 2 })
        : await openPgliteDriver(store.dataDir);
      await migrate(driver);
      return { driver, storage: createSqlStorage(driver) };
    },
    dispose: () => store.dispose(),
  };
}

/** A service context as the bin makes it, with the webhook configured from the environment. */
function serviceContext(storage: Storage, url: string): { ctx: ServiceContext; logs: WebhookLogEntry[] } {
  const request = parseServiceArgs(['--data-dir', tmpdir()], {
    TUNER_ADMIN_PASSWORD: 'admin-password-for-tests-1',
    TUNER_WEBHOOK_URL: url,
    TUNER_WEBHOOK_SECRET: SECRET,
  });
  if (request.kind !== 'run') throw new Error('expected a run configuration');
  const logs: WebhookLogEntry[] = [];
  const ctx = createServiceContext(storage, request.config, { webhookLog: (e) => logs.push(e) });
  assert.ok(ctx.webhook.serviceWide, 'the service-wide webhook is configured');
  return { ctx, logs };
}

function outboxEvent(databaseId: string | null = null): OutboxEvent {
  const id = randomUUID();
  const body = webhookBody({
    id,
    kind: 'kept_gain_gone',
    database: { id: databaseId ?? randomUUID(), name: 'orders (production)' },
    at: new Date(),
    details: { sessionId: randomUUID(), message: 'the gain is gone (test)' },
  });
  return { eventId: id, databaseId, kind: 'kept_gain_gone', body, serviceWide: true };
}

interface OutboxRow {
  state: string;
  attempts: number;
  last_error: string | null;
  claimed_by: string | null;
}

async function row(driver: SqlDriver, eventId: string): Promise<OutboxRow | undefined> {
  const [r] = await driver.query<OutboxRow>(
    'SELECT state, attempts, last_error, claimed_by FROM webhook_outbox WHERE event_id = $1::uuid',
    [eventId],
  );
  return r;
}

const start = (ctx: ServiceContext) => ctx.webhook.start(50, (err) => assert.fail(`the outbox failed: ${String(err)}`));

for (const kind of STORAGE_KINDS) {
  describe(`the webhook's outbox on ${kind}`, () => {
    test('500, 500, then 200: retried with the same body, signed; written twice, stored and sent once', async () => {
      const store = await reopenable(kind);
      const { driver, storage } = await store.open();
      const r = receiver((n, res) => res.writeHead(n <= 2 ? 500 : 200).end());
      const { ctx, logs } = serviceContext(storage, r.url);
      try {
        const e = outboxEvent();
        assert.equal(await storage.enqueueWebhooks([e]), 1);
        assert.equal(await storage.enqueueWebhooks([e]), 0, 'the same event id again: not stored again');
        start(ctx);
        await until('the event delivered', async () => (await row(driver, e.eventId))?.state === 'delivered', 15_000, 50);
        const requests = r.requests(e.eventId);
        assert.equal(requests.length, 3);
        assert.ok(
          requests.every((q) => q.body === e.body && receiverAccepts(q)),
          'every attempt is the same body, signed',
        );
        assert.equal((JSON.parse(requests[0]!.body) as { id: string }).id, e.eventId);
        assert.deepEqual(await row(driver, e.eventId), { state: 'delivered', attempts: 3, last_error: null, claimed_by: null });
        assert.deepEqual((await storage.metricsSnapshot()).webhooksByState, { delivered: 1 }, 'the gauge reads it');
        assert.deepEqual(
          logs.map((l) => [l.level, l.attempt, l.httpStatus]),
          [
            ['warn', 1, 500],
            ['warn', 2, 500],
            ['info', 3, 200],
          ],
        );
        // Written again after delivery: still nothing sent again.
        assert.equal(await storage.enqueueWebhooks([e]), 0);
        assert.deepEqual(await ctx.webhook.sendDue(), []);
        assert.equal(r.requests(e.eventId).length, 3);
        assert.ok(!JSON.stringify(logs).includes(SECRET) && !JSON.stringify(logs).includes(URL_QUERY_SECRET));
        // Retention: a delivered event goes with the reports of its age; a pending one stays.
        await ctx.webhook.close();
        const waiting = outboxEvent();
        await storage.enqueueWebhooks([waiting]);
        await sleep(10);
        await storage.prune({ maxAgeDays: 0, maxReportsPerDatabase: 100, maxEventsPerDatabase: 100, auditMaxAgeDays: 400 });
        assert.deepEqual([await row(driver, e.eventId), (await row(driver, waiting.eventId))?.state], [undefined, 'pending']);
      } finally {
        await ctx.webhook?.close();
        await storage.close();
        await store.dispose();
      }
    });

    test('two service contexts on one storage, both sending: each event delivered once', async () => {
      const store = await reopenable(kind);
      const first = await store.open();
      // A second replica: its own connections on PostgreSQL; PGlite is one process's storage.
      const second = kind === 'postgres' ? await store.open() : first;
      // Each event's first attempt fails, so its retry is up for grabs by either replica; answers
      // take a moment, so that the replicas' rounds overlap.
      const r = receiver((n, res) => setTimeout(() => res.writeHead(n === 1 ? 503 : 200).end(), 30));
      const a = serviceContext(first.storage, r.url);
      const b = serviceContext(second.storage, r.url);
      try {
        const events = Array.from({ length: 12 }, () => outboxEvent());
        // Both replicas write every event (as two watches judging at once would try to).
        const written = await Promise.all([first.storage.enqueueWebhooks(events), second.storage.enqueueWebhooks(events)]);
        assert.equal(written[0] + written[1], events.length, 'each event stored once');
        start(a.ctx);
        start(b.ctx);
        a.ctx.webhook.kick();
        b.ctx.webhook.kick();
        await until(
          'every event delivered',
          async () => {
            const [n] = await first.driver.query<{ n: number }>("SELECT count(*)::int AS n FROM webhook_outbox WHERE state = 'delivered'");
            return n!.n === events.length;
          },
          20_000,
          100,
        );
        // Time for a stray second delivery to show.
        await sleep(500);
        for (const e of events) {
          const requests = r.requests(e.eventId);
          assert.equal(requests.length, 2, `event ${e.eventId}: one failed attempt and one delivery, no more`);
          assert.ok(requests.every((q) => q.body === e.body && receiverAccepts(q)));
          assert.equal((await row(first.driver, e.eventId))?.attempts, 2);
        }
        const delivered = [a.logs, b.logs].map((logs) => logs.filter((l) => l.message === 'webhook: event delivered').length);
        assert.equal(delivered[0]! + delivered[1]!, events.length, `deliveries per replica: ${delivered.join(', ')}`);
      } finally {
        await a.ctx.webhook?.close();
        await b.ctx.webhook?.close();
        if (second !== first) await second.storage.close();
        await first.storage.close();
        await store.dispose();
      }
    });

    test('a restart: what was not delivered (never tried, waiting for a retry, cut off mid-attempt) is sent by the next service', async () => {
      const store = await reopenable(kind);
      let opened = await store.open();
      const hanging = new Set<string>();
      const failing = new Set<string>();
      const r = receiver((n, res, id) => {
        // The cut-off event's first attempt gets no answer before the service stops.
        if (hanging.has(id) && n === 1) return void setTimeout(() => res.writeHead(200).end(), 3000);
        res.writeHead(failing.has(id) && n === 1 ? 503 : 200).end();
      });
      try {
        const user = await opened.storage.createOrganization('outbox-person', 'outbox-person', 'not-a-real-hash');
        const databaseId = await addDatabase(opened.storage, user, 'orders', 'idle');
        // The first service: it tries one event (503: to be retried), and is cut off during the
        // first attempt of another.
        const retried = outboxEvent(databaseId);
        const cutOff = outboxEvent(databaseId);
        hanging.add(cutOff.eventId);
        failing.add(retried.eventId);
        const { ctx: before } = serviceContext(opened.storage, r.url);
        await opened.storage.enqueueWebhooks([retried]);
        assert.deepEqual(
          (await before.webhook.sendDue()).map((o) => [o.eventId, o.state, o.error]),
          [[retried.eventId, 'pending', 'HTTP 503']],
        );
        await opened.storage.enqueueWebhooks([cutOff]);
        const round = before.webhook.sendDue();
        await until('the cut-off attempt under way', () => Promise.resolve(r.requests(cutOff.eventId).length === 1), 5000, 20);
        await before.webhook.close();
        assert.deepEqual(
          (await round).map((o) => [o.eventId, o.state]),
          [[cutOff.eventId, 'cancelled']],
        );
        assert.equal((await row(opened.driver, cutOff.eventId))?.claimed_by, null, 'its claim given back at close');
        // Its last act: the watch's save writes an event and its webhook in one transaction
        // (sql-watch.ts), and the service stops before any sender runs.
        const watched = outboxEvent(databaseId);
        const at = new Date();
        const saved = await opened.storage.saveWatch(
          {
            databaseId,
            sessionId: randomUUID(),
            state: 'gone',
            stateSince: at,
            runtime: null,
            judgedAt: at,
            workloadCheckedAt: null,
            workloadChangedSince: null,
            workload: null,
          },
          null,
          [{ id: watched.eventId, code: 'kept_gain_gone', message: 'the gain is gone (test)', at }],
          [watched],
        );
        assert.equal(saved, true);
        await opened.storage.close();

        // The next service on the same storage.
        opened = await store.open();
        const { ctx: next } = serviceContext(opened.storage, r.url);
        start(next);
        const storage = opened;
        await until(
          'the three events delivered',
          async () => {
            const rows = await Promise.all([watched, retried, cutOff].map((e) => row(storage.driver, e.eventId)));
            return rows.every((x) => x?.state === 'delivered');
          },
          15_000,
          100,
        );
        await next.webhook.close();
        assert.deepEqual(
          [watched, retried].map((e) => r.requests(e.eventId).length),
          [1, 2],
          'the watch event once; the retried one: its failed attempt before the restart and the delivery after it',
        );
        // The cut-off attempt reached the receiver, but its answer was lost: sent again, with the
        // same id (docs/notifications.md: the receiver drops it), its aborted attempt not counted.
        assert.equal(r.requests(cutOff.eventId).length, 2);
        assert.equal((await row(opened.driver, cutOff.eventId))?.attempts, 1);
        for (const e of [watched, retried, cutOff]) {
          assert.ok(r.requests(e.eventId).every((q) => q.body === e.body && receiverAccepts(q)));
        }
      } finally {
        await opened.storage.close().catch(() => undefined);
        await store.dispose();
      }
    });
  });
}

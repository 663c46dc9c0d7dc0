// Migration 24 on both storages: the outbox as the service-wide webhook left it (one row per
// event, keyed by the event's id) reads back as rows for the service-wide webhook: a pending one
// is claimed, sent and settled as before, but only by a replica that has the service-wide webhook
// configured; an event written again is still stored once; a delivered one stays delivered.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { test } from 'node:test';
import { MIGRATIONS, migrate } from '../src/service/storage/migrations.ts';
import { createSqlStorage } from '../src/service/storage/sql-storage.ts';
import { STORAGE_KINDS, openScratchDriver } from './helpers/service.ts';

for (const kind of STORAGE_KINDS) {
  test(`migration 24 on ${kind}: the outbox's rows become the service-wide webhook's, nothing lost`, async () => {
    const { driver, dispose } = await openScratchDriver(kind);
    try {
      await migrate(
        driver,
        MIGRATIONS.filter((m) => m.version < 24),
      );
      const [pending, delivered] = [randomUUID(), randomUUID()];
      await driver.query(`INSERT INTO webhook_outbox (event_id, kind, body) VALUES ($1, 'test', '{"pending":true}')`, [pending]);
      await driver.query(
        `INSERT INTO webhook_outbox (event_id, kind, body, state, attempts, finished_at) VALUES ($1, 'test', '{}', 'delivered', 1, now())`,
        [delivered],
      );
      assert.deepEqual(await migrate(driver), [24]);
      const storage = createSqlStorage(driver);
      const claimer = randomUUID();

      assert.deepEqual(await storage.claimWebhooks(claimer, 10, 30, false), [], 'not for a replica without the service-wide webhook');
      const claimed = await storage.claimWebhooks(claimer, 10, 30, true);
      assert.deepEqual(
        claimed.map((c) => [c.eventId, c.destination, c.body, c.attempts]),
        [[pending, null, '{"pending":true}', 0]],
      );
      const again = { eventId: pending, databaseId: null, kind: 'test' as const, body: '{}', serviceWide: true };
      assert.equal(await storage.enqueueWebhooks([again]), 0, 'the same event again: stored once');
      assert.equal(
        await storage.settleWebhook(claimer, claimed[0]!.deliveryId, { state: 'delivered', attempts: 1, lastError: null }),
        true,
      );
      assert.deepEqual((await storage.metricsSnapshot()).webhooksByState, { delivered: 2 });
      assert.deepEqual(await storage.claimWebhooks(claimer, 10, 30, true), []);
    } finally {
      await dispose();
    }
  });
}

// The watch's storage on both storages, with databases in the fleet fixture's states: only a
// configuration still kept is due; a save is conditional on the state it was computed from, so
// two replicas judging at once raise an event once; the fleet and the metrics read the state for
// the kept configuration only.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { describe, test } from 'node:test';
import type { WatchRecord } from '../src/service/watch/store.ts';
import { addDatabase, openFreshStorage } from './helpers/fleet-fixture.ts';
import { STORAGE_KINDS } from './helpers/service.ts';

for (const kind of STORAGE_KINDS) {
  describe(`the watch's storage on ${kind}`, () => {
    test('due only while kept; one save wins; the event once; the fleet and the counts see it', async () => {
      const { storage, dispose } = await openFreshStorage(kind);
      try {
        const user = await storage.createOrganization('watch-person', 'watch-person', 'not-a-real-hash');
        const kept = await addDatabase(storage, user, 'kept', 'kept');
        await addDatabase(storage, user, 'reverted', 'kept_then_reverted');
        await addDatabase(storage, user, 'idle', 'idle');

        const due = await storage.watchDue(60, 100);
        assert.deepEqual(
          due.map((d) => d.databaseId),
          [kept],
          'only the configuration still kept is watched',
        );
        const [first] = due;
        assert.ok(first!.watchFrom.getTime() >= first!.keptAt.getTime());

        const at = new Date(Math.floor(Date.now() / 1000) * 1000);
        const record: WatchRecord = {
          databaseId: kept,
          sessionId: first!.sessionId,
          state: 'gone',
          stateSince: at,
          runtime: { estimate: 1.01, low: 0.97, high: 1.05 },
          judgedAt: at,
          workloadCheckedAt: null,
          workloadChangedSince: null,
          workload: null,
        };
        const event = () => ({ id: randomUUID(), code: 'kept_gain_gone' as const, message: 'the gain is gone (test)', at });
        // Two replicas judging the same state at once: one save wins, one event.
        const saved = await Promise.all([storage.saveWatch(record, null, [event()]), storage.saveWatch(record, null, [event()])]);
        assert.deepEqual(saved.toSorted(), [false, true]);
        const events = await storage.recentEvents(user.organizationId, kept, 10);
        assert.deepEqual(
          events.map((e) => [e.code, e.level]),
          [['kept_gain_gone', 'warn']],
        );

        const stored = await storage.watchRecord(kept);
        assert.equal(stored?.state, 'gone');
        assert.equal(stored?.judgedAt.getTime(), at.getTime());
        assert.deepEqual(stored?.runtime, record.runtime);
        // A save computed from a state another replica has replaced since is refused.
        const later = { ...record, state: 'holding' as const, judgedAt: new Date(at.getTime() + 1000) };
        assert.equal(await storage.saveWatch(later, { ...stored, judgedAt: new Date(at.getTime() - 5000) }, []), false);
        assert.equal(await storage.saveWatch({ ...later, state: 'gone' }, stored, []), true);
        assert.equal((await storage.watchDue(3600, 100)).length, 0, 'judged just now: not due');

        const fleet = await storage.fleet(user.organizationId);
        const byName = new Map(fleet.map((e) => [e.name, e]));
        assert.equal(byName.get('kept')?.watch, 'gone');
        assert.equal(byName.get('reverted')?.watch, null);
        const counts = await storage.watchCounts();
        assert.deepEqual(counts, { byState: { measuring: 0, holding: 0, gone: 1 }, workloadChanged: 0 });
      } finally {
        await dispose();
      }
    });
  });
}

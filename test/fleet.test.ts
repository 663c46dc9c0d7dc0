// The fleet home page's data: each database's states computed from real rows made through the
// service's own storage and engine steps, on PGlite and on PostgreSQL (a scratch database of the
// shared server); the order of attention and the filters; the JSON view against its schema; the
// page's HTML (escaped, sorted, filtered); and one storage round-trip for 1,000 databases.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { gzipSync } from 'node:zlib';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, test } from 'node:test';
import { answerFleet, fleetFlags, filterFleet, needsAttentionRank, sortFleet, verifiedGain } from '../src/service/fleet/attention.ts';
import { readFleet } from '../src/service/fleet/fleet.ts';
import { FLEET_FLAGS } from '../src/service/fleet/flags.ts';
import { FLEET_PAGE_SIZE, FLEET_SORTS, FleetQuerySchema, fleetQueryFromPage, type FleetQuery } from '../src/service/fleet/query.ts';
import type { FleetAnswer, FleetEntry } from '../src/service/fleet/store.ts';
import { FleetViewSchema, fleetView } from '../src/service/fleet/views.ts';
import type { LoginSession } from '../src/service/people/store.ts';
import type { Queryable, SqlDriver } from '../src/service/storage/driver.ts';
import { createFleetStore } from '../src/service/storage/sql-fleet.ts';
import { fleetHref, fleetPage } from '../src/service/web/fleet-page.ts';
import {
  BLOCKED_REASON,
  KEPT_CONFIG,
  KEPT_RUNTIME,
  POLICY,
  SCENARIOS,
  SHORT_LEASE_MS,
  addDatabase,
  createSession,
  openFreshStorage,
  startAgent,
  type Scenario,
} from './helpers/fleet-fixture.ts';
import { reportRequest } from './helpers/service-reports.ts';
import { PG15_KNOB_SETTINGS } from './helpers/pg15-settings.ts';
import { MIX, syntheticReport } from './helpers/synthetic-reports.ts';
import { MiB, PAGE_BYTES } from '../src/knobs/index.ts';
import { refreshDueAdvice } from '../src/service/advice/refresh.ts';
import type { Storage } from '../src/service/storage/storage.ts';
import type { User } from '../src/service/people/store.ts';
import { STORAGE_KINDS } from './helpers/service.ts';

const query = (q: Partial<FleetQuery> = {}): FleetQuery => FleetQuerySchema.parse(q);

const PERSON: LoginSession = {
  user: {
    id: 'u',
    organizationId: 'a',
    username: 'dba',
    role: 'operator',
    createdAt: new Date(0),
    via: 'password',
    address: null,
    token: null,
  },
  csrfToken: 'csrf',
  expiresAt: new Date(0),
};

/** A database whose agent sent five one-minute reports (synthetic statements); with `spills`, the
 * report query (103) writes 16 MB of temporary files per call. */
async function databaseReporting(storage: Storage, user: User, name: string, spills: boolean): Promise<string> {
  const { id } = await storage.createDatabase(user.organizationId, { id: randomUUID(), name, target: 'local' });
  const leaseId = await startAgent(storage, id);
  for (let seq = 0; seq < 5; seq++) {
    const r = syntheticReport(Date.now() - (5 - seq) * 60_000, 60, MIX, 10, 1);
    const top = r.statements.top.map((row) =>
      spills && row.queryId === '103' ? { ...row, tempBlksWritten: row.calls * ((16 * MiB) / PAGE_BYTES) } : row,
    );
    const tempBytes = top.reduce((n, row) => n + row.tempBlksWritten * PAGE_BYTES, 0);
    const metrics = { ...r, statements: { ...r.statements, top }, database: { ...r.database, total: { ...r.database.total, tempBytes } } };
    // Every setting the search space reads (a real agent reports the catalog's).
    const body = { ...reportRequest(leaseId, seq, { metrics }), settings: PG15_KNOB_SETTINGS };
    const result = await storage.recordReport(id, body, gzipSync(JSON.stringify(body)), POLICY);
    assert.equal(result.kind, 'accepted');
  }
  return id;
}

/** The states each scenario must show, most pressing first. */
const EXPECTED: Record<Scenario, string[]> = {
  no_agent: ['no_agent'],
  idle: ['idle'],
  stopped: ['agent_stopped'],
  lost: ['agent_lost'],
  blocked: ['blocked'],
  tuning: ['tuning'],
  awaiting_approval: ['awaiting_approval'],
  failed: ['session_failed'],
  kept: ['kept'],
  kept_then_reverted: ['idle'],
  kept_revert_pending: ['idle'],
};

/** A driver that counts the statements sent to the storage (round-trips). */
function counting(driver: SqlDriver): { db: Queryable; count: () => number } {
  let n = 0;
  return {
    db: { query: (text, params, options) => (n++, driver.query(text, params, options)) },
    count: () => n,
  };
}

for (const kind of STORAGE_KINDS) {
  describe(`the fleet on ${kind}`, () => {
    test('every state is computed from the rows the service wrote, in one statement', async () => {
      const { driver, storage, dispose } = await openFreshStorage(kind);
      try {
        const user = await storage.createOrganization('fleet-person', 'fleet-person', 'not-a-real-hash');
        const other = await storage.createOrganization('someone-else', 'someone-else', 'not-a-real-hash');
        await addDatabase(storage, other, 'not yours', 'idle');
        const ids = new Map<string, Scenario>();
        for (const scenario of SCENARIOS) ids.set(await addDatabase(storage, user, `db ${scenario}`, scenario), scenario);
        await sleep(SHORT_LEASE_MS + 200);

        const { db, count } = counting(driver);
        const entries = await createFleetStore(db).fleet(user.organizationId);
        assert.equal(count(), 1, 'one statement for the whole fleet');
        assert.deepEqual(entries.map((e) => e.name).sort(), SCENARIOS.map((s) => `db ${s}`).sort(), "only the person's account");
        for (const entry of entries) {
          const scenario = ids.get(entry.id)!;
          assert.deepEqual(fleetFlags(entry), EXPECTED[scenario], scenario);
          assert.deepEqual(
            [entry.advice, entry.workloadChange, entry.watch],
            [null, null, null],
            'no advice computed, nothing watched: null',
          );
        }
        const by = (s: Scenario) => entries.find((e) => ids.get(e.id) === s)!;

        assert.equal(by('no_agent').agent, null);
        assert.equal(by('idle').agent?.health, 'connected');
        assert.ok(by('idle').agent?.lastReportAt instanceof Date, 'the last report time');
        assert.equal(by('stopped').agent?.health, 'stopped');
        assert.ok(by('stopped').agent?.releasedAt);
        assert.equal(by('lost').agent?.health, 'lost');
        assert.equal(by('lost').agent?.lastReportAt, null);
        assert.equal(by('blocked').agent?.applyBlockedReason, BLOCKED_REASON);
        assert.equal(by('tuning').latestSession?.state, 'baseline');
        assert.equal(by('awaiting_approval').latestSession?.state, 'awaiting_approval');
        assert.equal(by('awaiting_approval').kept, null, 'approval pending: nothing kept yet');
        assert.equal(by('failed').latestSession?.state, 'failed');

        const kept = by('kept').kept;
        assert.ok(kept, 'the kept configuration');
        assert.deepEqual(kept.config, KEPT_CONFIG);
        assert.deepEqual(kept.runtime, KEPT_RUNTIME);
        assert.deepEqual(kept.throughput, { estimate: 1.2, low: 1.1, high: 1.3 });
        assert.ok(kept.keptAt instanceof Date, 'when the agent acknowledged it');
        assert.ok(Math.abs(verifiedGain(by('kept'))! - 0.2) < 1e-9);
        assert.equal(by('kept').latestSession?.state, 'done');
        assert.equal(by('kept_then_reverted').kept, null, 'a revert to the baseline undoes it');
        assert.equal(by('kept_then_reverted').latestSession?.state, 'reverted');
        assert.equal(by('kept_revert_pending').kept, null, 'a revert on its way undoes it too');

        // The JSON view is what its schema says, and the people's answer filters and sorts.
        const answer = await readFleet({ stores: { fleet: createFleetStore(driver) } }, user, query({ state: 'attention' }));
        const view = FleetViewSchema.parse(fleetView(answer, query({ state: 'attention' })));
        assert.deepEqual(
          view.databases.map((d) => d.name),
          ['db awaiting_approval', 'db lost', 'db blocked', 'db failed', 'db stopped', 'db no_agent'],
        );
        assert.equal(view.total, SCENARIOS.length);
        assert.equal(view.counts.kept, 1);
        assert.equal(view.counts.idle, 3);
        const keptView = FleetViewSchema.parse(fleetView({ ...answer, shown: [by('kept')] }, query())).databases[0]!;
        assert.ok(Math.abs(keptView.kept!.verifiedGain! - 0.2) < 1e-9);

        // The storage's states, filters, order, counts and pages are those of attention.ts, for
        // every state, and every sort over pages of 4.
        const store = createFleetStore(driver);
        const names = (a: FleetAnswer) => ({ ...a, shown: a.shown.map((e) => e.name) });
        const asked = [
          ...FLEET_FLAGS.map((state) => query({ state })),
          ...FLEET_SORTS.flatMap((sort) =>
            (['all', 'attention', 'idle'] as const).flatMap((state) => [1, 2, 3].map((page) => query({ sort, state, page }))),
          ),
        ];
        for (const q of asked) {
          assert.deepEqual(names(await store.fleetPage(user.organizationId, q, 4)), names(answerFleet(entries, q, 4)), JSON.stringify(q));
        }
        for (const q of ['DB K', 'lost', 'nothing like it'])
          assert.deepEqual(
            names(await store.fleetPage(user.organizationId, query({ q }), 4)),
            names(answerFleet(entries, query({ q }), 4)),
            q,
          );
      } finally {
        await dispose();
      }
    });

    test('advice pending: for the database whose reports spill temporary files, not the other; not while a session runs', async () => {
      const { driver, storage, dispose } = await openFreshStorage(kind);
      try {
        const user = await storage.createOrganization('fleet-person', 'fleet-person', 'not-a-real-hash');
        const spilling = await databaseReporting(storage, user, 'spills', true);
        const calm = await databaseReporting(storage, user, 'calm', false);
        const deps = { stores: { databases: storage, tuning: storage, advice: storage } };
        const fleet = async () => {
          const { db, count } = counting(driver);
          const entries = await createFleetStore(db).fleet(user.organizationId);
          assert.equal(count(), 1, 'one statement, the advice joined');
          return new Map(entries.map((e) => [e.id, e]));
        };
        assert.equal((await fleet()).get(spilling)?.advice, null, 'nothing computed yet: nothing shown');

        // What the service's background round does after reports arrive (advice/refresh.ts).
        assert.equal(await refreshDueAdvice(deps, { everySeconds: 0, perRound: 10 }), 2);
        assert.deepEqual(await storage.adviceDue(3600, 900, 10), [], 'computed just now: not due');
        const entries = await fleet();
        const advice = entries.get(spilling)?.advice;
        assert.ok(advice, 'advice pending for the database that spills');
        assert.deepEqual([advice.count, advice.findings, advice.parameters], [1, ['temp-files'], ['work_mem']]);
        assert.deepEqual(fleetFlags(entries.get(spilling)!), ['advice']);
        assert.equal(entries.get(calm)?.advice, null, 'none for the one that does not');
        assert.deepEqual(fleetFlags(entries.get(calm)!), ['idle']);
        const all = [...entries.values()];
        assert.deepEqual(
          sortFleet(all, 'attention').map((e) => e.name),
          ['spills', 'calm'],
        );
        // The JSON and the page say it.
        const answer = await createFleetStore(driver).fleetPage(user.organizationId, query(), 100);
        assert.deepEqual(
          answer.shown.map((e) => e.name),
          ['spills', 'calm'],
          'the storage orders it so too',
        );
        assert.deepEqual([answer.counts.advice, answer.attention], [1, 1]);
        const view = FleetViewSchema.parse(fleetView(answer, query()));
        const spillingView = view.databases.find((d) => d.id === spilling)!;
        assert.deepEqual(spillingView.states, ['advice']);
        assert.deepEqual(spillingView.advice && [spillingView.advice.findings, spillingView.advice.parameters], [
          ['temp-files'],
          ['work_mem'],
        ]);
        assert.equal(view.counts.advice, 1);
        const text = fleetPage(PERSON, answer, query(), new Date()).value;
        const cells = [...text.matchAll(/<tr data-database="([^"]+)"[\s\S]*?<td class="advice">([\s\S]*?)<\/td>/g)].map((m) => [
          m[1],
          m[2],
        ]);
        assert.match(cells.find(([id]) => id === spilling)![1]!, /advice pending[\s\S]*work_mem/);
        assert.doesNotMatch(cells.find(([id]) => id === calm)![1]!, /advice pending/);

        // A session started since: its own diagnoses run; the advice waits for a computation after it.
        await createSession(storage, user, spilling);
        assert.equal((await fleet()).get(spilling)?.advice, null);
      } finally {
        await dispose();
      }
    });

    test('1,000 databases: one storage round-trip, the counts of all and one page', async () => {
      const { driver, storage, dispose } = await openFreshStorage(kind);
      try {
        const user = await storage.createOrganization('fleet-person', 'fleet-person', 'not-a-real-hash');
        // Databases without agents are the bulk (cheap to make); a few of each state among them.
        for (const scenario of SCENARIOS) await addDatabase(storage, user, `state ${scenario}`, scenario);
        await driver.query(
          `INSERT INTO databases (id, organization_id, name, target)
           SELECT gen_random_uuid(), $1::uuid, 'bulk ' || lpad(i::text, 4, '0'), 'local' FROM generate_series(1, $2::int) AS i`,
          [user.organizationId, 1000 - SCENARIOS.length],
        );
        const { db, count } = counting(driver);
        const answer = await readFleet({ stores: { fleet: createFleetStore(db) } }, user, query({ sort: 'attention' }));
        assert.equal(answer.total, 1000);
        assert.equal(answer.counts.no_agent, 1000 - SCENARIOS.length + 1);
        assert.equal(count(), 1);
        assert.equal(answer.shown.length, FLEET_PAGE_SIZE);
        assert.equal(answer.shown[0]!.name, 'state awaiting_approval');
        const last = await readFleet({ stores: { fleet: createFleetStore(driver) } }, user, query({ sort: 'name', page: 10 }));
        assert.deepEqual([last.matched, last.shown.length, last.shown.at(-1)!.name], [1000, FLEET_PAGE_SIZE, 'state tuning']);
      } finally {
        await dispose();
      }
    });
  });
}

// ---- pure: order, filters, query, page ----

const T0 = new Date('2026-11-26T08:00:00Z');
let serial = 0;
function entry(name: string, patch: Partial<FleetEntry> = {}): FleetEntry {
  serial++;
  return {
    id: `00000000-0000-4000-8000-${String(serial).padStart(12, '0')}`,
    name,
    target: 'local',
    createdAt: T0,
    agent: {
      health: 'connected',
      hostname: 'h',
      agentVersion: '0.1.0',
      lastReportAt: T0,
      leaseExpiresAt: T0,
      releasedAt: null,
      applyBlockedReason: null,
    },
    kept: null,
    latestSession: null,
    advice: null,
    workloadChange: null,
    watch: null,
    ...patch,
  };
}
const session = (state: NonNullable<FleetEntry['latestSession']>['state'], updatedAt = T0): FleetEntry['latestSession'] => ({
  id: '00000000-0000-4000-8000-000000000000',
  state,
  message: null,
  createdAt: T0,
  updatedAt,
  endedAt: null,
});
const keptWith = (estimate: number): FleetEntry['kept'] => ({
  sessionId: '00000000-0000-4000-8000-000000000000',
  keptAt: T0,
  config: { work_mem: 8192 },
  runtime: { estimate, low: estimate - 0.05, high: estimate + 0.05 },
  throughput: null,
  minEffectPercent: 5,
  confidencePercent: 95,
});

test('the order of attention: a person first, then the quiet; the longest waiting first among equals', () => {
  const early = new Date(T0.getTime() - 3600_000);
  const fleet = [
    entry('idle'),
    entry('kept', { kept: keptWith(0.8) }),
    entry('approval late', { latestSession: session('awaiting_approval') }),
    entry('approval early', { latestSession: session('awaiting_approval', early) }),
    entry('lost', { agent: { ...entry('x').agent!, health: 'lost' } }),
    entry('tuning', { latestSession: session('iterating') }),
    entry('gain gone', { kept: keptWith(0.9), watch: 'gone' }),
    entry('advice', { advice: { count: 1, findings: ['temp-files'], parameters: ['work_mem'], since: T0 } }),
    entry('none', { agent: null }),
  ];
  assert.deepEqual(
    sortFleet(fleet, 'attention').map((e) => e.name),
    ['approval early', 'approval late', 'lost', 'gain gone', 'advice', 'none', 'tuning', 'kept', 'idle'],
  );
  assert.deepEqual(fleetFlags(fleet[6]!), ['gain_gone', 'kept']);
  assert.ok(needsAttentionRank(fleet[2]!) < needsAttentionRank(fleet[5]!));
  assert.deepEqual(
    sortFleet(fleet, 'gain')
      .slice(0, 2)
      .map((e) => e.name),
    ['kept', 'gain gone'],
  );
  assert.deepEqual(
    sortFleet(fleet, 'name').map((e) => e.name),
    [...fleet.map((e) => e.name)].sort((a, b) => a.localeCompare(b, 'en')),
  );
  assert.equal(sortFleet(fleet, 'last_report')[0]!.name, 'none', 'never reported: silent longest');
  assert.equal(FLEET_FLAGS.length, new Set(FLEET_FLAGS).size);
});

test('filters: by state, by a piece of the name (any case), both at once', () => {
  const fleet = [
    entry('Orders (production)', { agent: { ...entry('x').agent!, applyBlockedReason: 'default.postgres15' } }),
    entry('orders (staging)'),
    entry('billing', { agent: { ...entry('x').agent!, applyBlockedReason: 'read-only' } }),
  ];
  const names = (q: Partial<FleetQuery>) => filterFleet(fleet, query(q)).map((e) => e.name);
  assert.deepEqual(names({ q: 'ORDERS' }), ['Orders (production)', 'orders (staging)']);
  assert.deepEqual(names({ state: 'blocked' }), ['Orders (production)', 'billing']);
  assert.deepEqual(names({ state: 'blocked', q: 'order' }), ['Orders (production)']);
  assert.deepEqual(names({ state: 'attention' }), ['Orders (production)', 'billing']);
  assert.deepEqual(names({ state: 'idle' }), ['orders (staging)']);
  assert.deepEqual(
    names({ q: '  ' }),
    fleet.map((e) => e.name),
  );
});

test("the query: strict for the API, forgiving for the page's GET parameters", () => {
  assert.deepEqual(query(), { sort: 'attention', state: 'all', q: '', page: 1 });
  assert.equal(FleetQuerySchema.safeParse({ sort: 'cost' }).success, false);
  assert.equal(FleetQuerySchema.safeParse({ state: 'blocked', extra: 1 }).success, false);
  assert.deepEqual(fleetQueryFromPage(new URLSearchParams('sort=cost&state=blocked&q=%20orders%20&page=2')), {
    sort: 'attention',
    state: 'blocked',
    q: 'orders',
    page: 2,
  });
  assert.equal(fleetQueryFromPage(new URLSearchParams('page=0')).page, 1, 'a page that is not one: the first');
  assert.equal(FleetQuerySchema.safeParse({ page: 'x' }).success, false);
  assert.deepEqual(fleetQueryFromPage(new URLSearchParams(`q=${'x'.repeat(101)}`)).q, '');
  assert.equal(fleetHref(query()), '/');
  assert.equal(fleetHref(query({ state: 'blocked', q: 'a&b' })), '/?state=blocked&q=a%26b');
});

test('the page: rows in the order asked, names escaped, filter and sort controls that keep each other', () => {
  const person: LoginSession = {
    user: { id: 'u', organizationId: 'a', username: 'dba', role: 'operator', createdAt: T0, via: 'password', address: null, token: null },
    csrfToken: 'csrf',
    expiresAt: T0,
  };
  const fleet = [
    entry('<script>alert(1)</script>', { latestSession: session('awaiting_approval') }),
    entry('calm', { kept: keptWith(0.8) }),
    entry('blocked one', { agent: { ...entry('x').agent!, applyBlockedReason: 'default.postgres15 <b>' } }),
  ];
  const q = query({ state: 'attention', q: 'C' });
  const text = fleetPage(person, answerFleet(fleet, q, FLEET_PAGE_SIZE), q, T0).value;
  assert.ok(!text.includes('<script>alert'), 'a name is text, never markup');
  assert.ok(text.includes('&lt;script&gt;alert(1)&lt;/script&gt;'));
  assert.ok(text.includes('default.postgres15 &lt;b&gt;'));
  const rows = [...text.matchAll(/<tr data-database="[^"]+" data-states="([^"]+)">\s*<td><a href="[^"]+">([^<]*)</g)].map((m) => [
    m[2],
    m[1],
  ]);
  assert.deepEqual(rows, [
    ['&lt;script&gt;alert(1)&lt;/script&gt;', 'awaiting_approval'],
    ['blocked one', 'blocked'],
  ]);
  // The sort links keep the filter; the form sends the filter as GET parameters.
  assert.ok(text.includes('href="/?state=attention&amp;q=C&amp;sort=name"'));
  assert.ok(text.includes('<form class="stack" method="get" action="/" id="fleet-filter">'));
  assert.ok(text.includes('value="C"'));
  assert.match(text, /<option value="attention" selected>/);
  assert.ok(!/<script(?! src)/.test(text), 'no inline script (the CSP forbids it)');
  assert.ok(!text.includes('id="fleet-pager"'), 'one page: no pager');
  // Pages of one: the second of three, with links to the first and the third that keep the query.
  const second = query({ sort: 'name', page: 2 });
  const paged = fleetPage(person, answerFleet(fleet, second, 1), second, T0).value;
  assert.match(paged, /<tr data-database="[^"]+" data-states="[^"]+">\s*<td><a href="[^"]+">blocked one</);
  assert.ok(paged.includes('href="/?sort=name" rel="prev"'));
  assert.ok(paged.includes('href="/?sort=name&amp;page=3" rel="next"'));
  assert.match(paged, /2–2 of 3 \(page 2 of 3\)/);
  assert.ok(paged.includes('href="/?state=kept&amp;sort=name"'), 'a state chip goes back to the first page');
});

// Advice between sessions (issue 31 part 3): the diagnoses read a database's latest reports while
// no session runs, the people's API shows what they argue for with its evidence and statements,
// and a session started from the advice tries that diagnosis first, even when its own baseline
// window no longer shows it. Pure on synthetic reports, then through the running service on
// both storages with a simulated agent.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { MiB, PAGE_BYTES } from '../src/knobs/index.ts';
import { freePort } from '../src/lab/cluster.ts';
import type { MetricsReport } from '../src/protocol/report.ts';
import { adviceFrom } from '../src/service/advice/advice.ts';
import { AdviceViewSchema } from '../src/service/advice/views.ts';
import { buildSpace, sessionSpaceInput } from '../src/service/tuning/space.ts';
import {
  ADMIN_PASSWORD,
  PersonClient,
  STORAGE_KINDS,
  assertClientError,
  createServiceStore,
  startTestService,
  type ServiceStore,
  type TestService,
} from './helpers/service.ts';
import { MIX, syntheticReport } from './helpers/synthetic-reports.ts';
import { FULL_SETTINGS, MACHINE, getTuningSession, isTrialJson, reportingAgent, startTuningSession } from './sessions-agent.ts';

const space = () =>
  buildSpace(sessionSpaceInput({ target: 'local', mode: 'reload-only', machine: MACHINE, settings: FULL_SETTINGS, maxConnections: 100 }));

const SPILLING_TEXT = 'SELECT customer, sum(amount) FROM orders GROUP BY customer ORDER BY 2 DESC';

/** Reports of a minute each where statement 103 (the report query) writes 16 MB of temporary
 * files per call, its text as the agent sends it. */
function spillingReports(count: number): MetricsReport[] {
  return Array.from({ length: count }, (_, i) => {
    const r = syntheticReport(i * 60_000, 60, MIX, 10, 1);
    const top = r.statements.top.map((row) =>
      row.queryId === '103' ? { ...row, tempBlksWritten: row.calls * ((16 * MiB) / PAGE_BYTES), text: SPILLING_TEXT } : row,
    );
    const tempBytes = top.reduce((n, row) => n + row.tempBlksWritten * PAGE_BYTES, 0);
    return { ...r, statements: { ...r.statements, top }, database: { ...r.database, total: { ...r.database.total, tempBytes } } };
  });
}

describe('advice from reports (pure)', () => {
  test('temporary files: work_mem raised, with the figures and the statement behind it', () => {
    const { items, signals } = adviceFrom(space(), spillingReports(5));
    assert.equal(items.length, 1, JSON.stringify(items.map((i) => i.finding)));
    const [item] = items;
    assert.equal(item!.finding, 'temp-files');
    assert.match(item!.reason, /of temporary files per minute from 1 statement .*work_mem 4MB→/);
    assert.equal(item!.changes.length, 1);
    assert.deepEqual(
      {
        parameter: item!.changes[0]!.parameter,
        direction: item!.changes[0]!.direction,
        from: item!.changes[0]!.from,
        restart: item!.changes[0]!.restart,
      },
      { parameter: 'work_mem', direction: 'raise', from: '4MB', restart: false },
    );
    assert.ok(Number(item!.changes[0]!.value) >= 32 * 1024, 'room for a 16 MB spill in memory, twice over (kB)');
    const perMinute = item!.evidence.find((e) => e.name === 'temporary files written per minute');
    assert.equal(perMinute?.unit, 'bytes/min');
    assert.equal(perMinute?.value, (signals.tempBytes * 60) / signals.seconds);
    assert.equal(item!.evidence.find((e) => e.name === 'largest temporary bytes per call')?.value, 16 * MiB);
    assert.deepEqual(
      item!.statements.map((s) => [s.queryId, s.figure.value, s.text]),
      [['103', 16 * MiB, SPILLING_TEXT]],
    );
  });

  test('reports without temporary files, checkpoints or misses: no advice', () => {
    const quiet = Array.from({ length: 5 }, (_, i) => syntheticReport(i * 60_000, 60, MIX, 10, 1));
    assert.deepEqual(adviceFrom(space(), quiet).items, []);
  });
});

interface CommandView {
  command: { kind: string; keep?: boolean; values?: Record<string, string | number> };
}

for (const kind of STORAGE_KINDS) {
  describe(`advice through the service on ${kind} storage`, () => {
    let store: ServiceStore;
    let service: TestService;
    let person: PersonClient;

    const connect = (name: string, spills: boolean) => reportingAgent(person, service.url, name, { spills });
    const advice = async (databaseId: string) => {
      const response = await person.get(`/api/manage/databases/${databaseId}/advice`);
      assert.equal(response.status, 200, JSON.stringify(response.body));
      return AdviceViewSchema.parse(response.body);
    };

    before(async () => {
      store = await createServiceStore(kind);
      service = await startTestService(store, {}, `127.0.0.1:${await freePort()}`);
      person = await PersonClient.login(service.url, 'admin', ADMIN_PASSWORD);
    });
    after(async () => {
      await service?.close();
      await store?.dispose();
    });

    test('a workload writing temporary files: the advice names work_mem; a session from it tries that first', async () => {
      const { databaseId, agent } = await connect('spilling', true);
      const view = await advice(databaseId);
      assert.equal(view.state, 'advice', view.message);
      assert.equal(view.window?.reports, 3);
      const [item] = view.items;
      assert.equal(item?.finding, 'temp-files');
      assert.equal(item?.changes[0]?.parameter, 'work_mem');
      assert.equal(item?.changes[0]?.direction, 'raise');
      assert.ok((item?.evidence.find((e) => e.name === 'temporary files written per minute')?.value ?? 0) > 0);
      assert.equal(item?.statements.length, 1, 'the spilling statement');
      assert.equal(view.sessionMode, 'reload-only');
      const advised = item.changes[0].value;

      // The workload stops spilling: the session's own baseline would argue for nothing, the
      // advice it was started from still does.
      agent.spills = false;
      const session = await startTuningSession(person, databaseId, {
        fromAdvice: true,
        iterations: 2,
        windowSeconds: 2,
        warmupSeconds: 0,
        seed: 7,
      });
      assert.equal((await advice(databaseId)).state, 'session_active', 'no advice while a session holds the database');
      assert.deepEqual(session.fromAdvice?.findings, ['temp-files']);
      await agent.runUntil('the first trial', async () => {
        const { iterations } = await getTuningSession(person, databaseId, session.id);
        return iterations.some(isTrialJson);
      });
      const { iterations } = await getTuningSession(person, databaseId, session.id);
      const first = iterations.find(isTrialJson)!;
      assert.equal(first.kind, 'diagnosis', JSON.stringify(first));
      assert.match(first.reason, /temporary files per minute/);
      assert.equal(Number(first.config['work_mem']), Number(advised));
      const commands = (await person.get<{ commands: CommandView[] }>(`/api/manage/databases/${databaseId}/commands?limit=10`)).body
        .commands;
      assert.ok(
        commands.some(
          (c) => c.command.kind === 'apply' && c.command.keep === false && Number(c.command.values?.['work_mem']) === Number(advised),
        ),
        'the advised work_mem went out as a trial (keep=false), nothing was kept from the advice alone',
      );
      assert.ok(!commands.some((c) => c.command.keep === true));
    });

    test('a quiet workload: no advice, and a session cannot start from none', async () => {
      const { databaseId } = await connect('quiet', false);
      const view = await advice(databaseId);
      assert.equal(view.state, 'nothing', view.message);
      assert.deepEqual(view.items, []);
      const response = await person.post(`/api/manage/databases/${databaseId}/tuning-sessions`, { fromAdvice: true, windowSeconds: 2 });
      assertClientError(response, 409, 'conflict', /no advice to start a session from/);
    });

    test('another account’s database, or none: not found', async () => {
      const response = await person.get('/api/manage/databases/00000000-0000-4000-8000-000000000000/advice');
      assertClientError(response, 404, 'not_found');
    });
  });
}

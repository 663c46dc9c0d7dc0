// End to end: tuning sessions with the real tuner-agent (--local), the real service on PGlite
// storage, and a throwaway cluster under pgbench, windows of a few seconds and reports every
// second. Two workloads from src/lab/workloads.ts, one session each:
//   select-1  no parameter can make it faster: the session ends "no significant improvement",
//             keeps nothing, and the database is back on its baseline;
//   work-mem  a NOT IN report that work_mem above ~5 MB makes several times faster: the session
//             verifies its best in A/B rounds, recommends it with an interval that excludes no
//             gain at all, and after approval the configuration is in pg_settings.
// No speed is asserted: only what the session concludes and does.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { WORKLOADS } from '../src/lab/workloads.ts';
import { startE2eLab, type E2eLab } from './helpers/e2e-lab.ts';
import type { PersonClient } from './helpers/service.ts';
import { FULL_SETTINGS, assertSessionShape, getTuningSession, startTuningSession, type SessionJson } from './sessions-agent.ts';
import { until } from './helpers/until.ts';

describe('tuning sessions end to end (real tuner-agent, throwaway cluster, PGlite storage)', () => {
  let e2e: E2eLab;
  let person: PersonClient;
  let databaseId: string;
  const began = Date.now();

  const settings = async (names: string[]) =>
    new Map(
      (await e2e.cluster.sql<{ name: string; setting: string }>('SELECT name, setting FROM pg_settings WHERE name = ANY($1)', [names])).map(
        (r) => [r.name, r.setting],
      ),
    );

  const runSession = async (body: Record<string, unknown>, ends: readonly string[]) => {
    const started = await startTuningSession(person, databaseId, body);
    const ended = await until(
      'the session to end its search and verification',
      async () => {
        const { session } = await getTuningSession(person, databaseId, started.id);
        return [...ends, 'failed', 'stopped'].includes(session.state) ? session : null;
      },
      240_000,
      500,
    );
    const { iterations } = await getTuningSession(person, databaseId, started.id);
    console.log(`${ended.state}: ${ended.message ?? ''}`);
    for (const it of iterations)
      console.log(
        `  #${it.ordinal} ${it.phase} ${it.kind}${it.round ? ` ${it.round}` : ''} ${it.state} objective ${it.objective?.toFixed(3) ?? '–'} ${it.failure ?? ''}`,
      );
    assert.notEqual(ended.state, 'failed', `${ended.message ?? ''}\n${e2e.agent.output().slice(-3000)}`);
    return { id: started.id, session: ended, iterations };
  };

  before(async () => {
    e2e = await startE2eLab('e2e-session', { workloads: [WORKLOADS['select-1'], WORKLOADS['work-mem']] });
    ({ person, databaseId } = e2e);
    console.log(`setup: ${((Date.now() - began) / 1000).toFixed(1)} s`);
  });
  after(() => e2e?.close());

  test('SELECT 1: no significant improvement, nothing kept, the database back on its baseline', { timeout: 300_000 }, async () => {
    await e2e.runLoad(WORKLOADS['select-1']);
    const { session, iterations } = await runSession(
      { iterations: 2, windowSeconds: 4, warmupSeconds: 1, seed: 20261122, abRoundsMin: 3, abRoundsMax: 4, requireApproval: false },
      ['done'],
    );
    assert.equal(session.state, 'done');
    assert.match(session.message ?? '', /^no significant improvement: /);
    assert.equal(session.best, null);
    if (session.verification) {
      assert.equal(session.verification.decision, 'no_significant_improvement');
      assert.ok(session.verification.runtime && session.verification.runtime.high > 0.95, session.verification.summary ?? '');
    }
    assertSessionShape(iterations, 2);
    const commands = (
      await person.get<{ commands: Array<{ command: { kind: string; keep?: boolean } }> }>(
        `/api/manage/databases/${databaseId}/commands?limit=100`,
      )
    ).body.commands;
    assert.ok(!commands.some((c) => c.command.kind === 'apply' && c.command.keep), 'nothing kept');
    const baseline = new Map(FULL_SETTINGS.map((s) => [s.name, s.setting]));
    await until(
      'the database back on its baseline',
      async () => {
        const now = await settings(['work_mem', 'random_page_cost', 'effective_cache_size']);
        return [...now].every(([name, value]) => value === baseline.get(name));
      },
      30_000,
    );
  });

  test(
    'work_mem: the diagnosis is verified as a step before the search ends, approved and kept, and the search goes on from it',
    { timeout: 300_000 },
    async () => {
      await e2e.runLoad(WORKLOADS['work-mem']);
      const planned = 3;
      const { id, session, iterations } = await runSession(
        { iterations: planned, windowSeconds: 6, warmupSeconds: 1, seed: 20261122, abRoundsMin: 3, abRoundsMax: 5 },
        ['awaiting_approval', 'done'],
      );
      assert.equal(session.state, 'awaiting_approval', session.message ?? '');
      const v = session.verification!;
      assert.equal(v.decision, 'recommend');
      assert.ok(v.runtime!.high < 0.95, `the whole interval is a gain of at least the minimum effect: ${v.summary}`);
      const [step] = session.steps;
      assert.ok(step && step.outcome === 'awaiting_approval', JSON.stringify(session.steps));
      const measured = iterations.filter((it) => it.phase === 'search' && it.kind !== 'baseline' && it.state === 'ok').length;
      assert.ok(measured < planned, `verified after ${measured} of ${planned} trials, before the search ended`);
      assert.match(
        session.message ?? '',
        /^step 1 \(iteration \d+\) is verified: runtime −\d+(\.\d)? % \(95 % CI −\d+(\.\d)? % to −\d+(\.\d)? %\)/,
      );
      assert.ok(Number(session.best!.config['work_mem']) > 5 * 1024, `work_mem ${session.best!.config['work_mem']} kB`);
      console.log(`first verified gain after ${1 + iterations.filter((it) => it.state === 'ok').length} windows: ${step.summary ?? ''}`);

      const approved = await person.post<{ session: SessionJson }>(`/api/manage/databases/${databaseId}/tuning-sessions/${id}/approve`);
      assert.equal(approved.status, 200, JSON.stringify(approved.body));
      // The search goes on from the step; a later recommendation is approved too.
      const done = await until(
        'the session to end after the kept step',
        async () => {
          const { session: now } = await getTuningSession(person, databaseId, id);
          if (now.state === 'awaiting_approval' && now.steps.length === 1 && now.steps[0]!.outcome === 'kept')
            await person.post(`/api/manage/databases/${databaseId}/tuning-sessions/${id}/approve`);
          return now.state === 'done' || now.state === 'failed' ? now : null;
        },
        240_000,
        500,
      );
      assert.equal(done.state, 'done', done.message ?? '');
      assert.equal(done.steps[0]!.outcome, 'kept');
      assert.match(done.message ?? '', /verified step kept \(step 1 \(iteration \d+\): runtime −/);
      const { iterations: all } = await getTuningSession(person, databaseId, id);
      assertSessionShape(all, planned);
      const best = done.best!;
      // The session may end on the kept step with a revert to it in flight (the last trial was on
      // the database): the agent carries it out at its next report.
      const differences = async () => {
        const now = await settings(Object.keys(best.config));
        return Object.entries(best.config).flatMap(([name, value]) => {
          const actual = now.get(name);
          const same = typeof value === 'number' ? Math.abs(Number(actual) - value) <= 1e-6 * Math.max(1, value) : actual === value;
          return same ? [] : [`${name}: pg_settings ${actual}, best ${value}`];
        });
      };
      await until('the database on the kept configuration', async () => (await differences()).length === 0, 30_000).catch(async () =>
        assert.fail((await differences()).join('; ')),
      );
      console.log(`whole test: ${((Date.now() - began) / 1000).toFixed(1)} s`);
    },
  );
});

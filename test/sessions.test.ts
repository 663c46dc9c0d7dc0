// Tuning sessions over real HTTP with the real storage (both), and a simulated agent: baseline →
// iterations → awaiting approval → approve → the keep=true apply; refused, failed and
// guardrail-reverted trials teach the optimizer to keep away; an ack that never comes; stop and
// revert; a service restarted mid-iteration; bad inputs.
// test-tier: slow (its sessions run in real time: minutes of windows on each storage)
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { DEFAULT_FAILED_RADIUS, distance, encode } from '../src/optimizer/index.ts';
import { advanceTuningSession } from '../src/service/tuning/advance.ts';
import { buildSpace, sessionSpaceInput } from '../src/service/tuning/space.ts';
import { STORAGE_KINDS, assertClientError, startTestService, type PersonClient, type TestService } from './helpers/service.ts';
import { startAdminService, type AdminService } from './helpers/service-admin.ts';
import {
  FULL_SETTINGS,
  MACHINE,
  SimulatedAgent,
  assertSessionShape,
  getTuningSession,
  isTrialJson,
  startTuningSession,
  type IterationJson,
} from './sessions-agent.ts';

interface CommandView {
  id: string;
  state: string;
  command: { id: string; kind: string; keep?: boolean; to?: string; values?: Record<string, string | number> };
}

/** The space the service builds for the simulated agent (its settings, 100 connections). */
const space = () =>
  buildSpace(sessionSpaceInput({ target: 'local', mode: 'reload-only', machine: MACHINE, settings: FULL_SETTINGS, maxConnections: 100 }));

for (const kind of STORAGE_KINDS) {
  describe(`tuning sessions on ${kind} storage`, () => {
    let lab: AdminService;
    let service: TestService;
    let person: PersonClient;

    const connect = async (name: string, options: Parameters<SimulatedAgent['start']>[0] = {}) => {
      const { databaseId, apiKey } = await person.createDatabase(name, options.target ?? 'local');
      const agent = new SimulatedAgent(service.url, databaseId, apiKey);
      await agent.start(options);
      await agent.report();
      return { databaseId, agent };
    };
    const stateOf = async (databaseId: string, sessionId: string) => (await getTuningSession(person, databaseId, sessionId)).session.state;
    const commands = async (databaseId: string) =>
      (await person.get<{ commands: CommandView[] }>(`/api/manage/databases/${databaseId}/commands?limit=100`)).body.commands;

    before(async () => {
      lab = await startAdminService(kind);
      ({ service, admin: person } = lab);
    });
    after(() => lab?.close());

    test('baseline → trials with baseline windows between them → A/B verification → awaiting approval → approve → kept', async () => {
      const { databaseId, agent } = await connect('approve');
      agent.noise = 0.03;
      const started = await startTuningSession(person, databaseId, { iterations: 5, windowSeconds: 2, warmupSeconds: 0, seed: 42 });
      assert.equal(started.state, 'baseline');
      assert.equal(started.requireApproval, true, 'approval is required by default');
      assert.equal(started.mode, 'reload-only');
      assert.deepEqual(
        [started.abRoundsMin, started.abRoundsMax, started.minEffectPercent, started.confidencePercent],
        [3, 5, 5, 95],
        'the verification defaults',
      );
      assert.equal((await agent.report()).nextReportInSeconds, 1, 'while measuring, about six reports a window');

      // The answers to the reports sent while the session verified: the A/B windows are measured
      // too, so the agent keeps reporting about six times a window (it fell back to its 60 s).
      const verifyingIntervals: number[] = [];
      await agent.runUntil(
        'awaiting approval',
        async () => {
          const state = await stateOf(databaseId, started.id);
          if (state === 'verifying') verifyingIntervals.push(agent.last!.nextReportInSeconds);
          return state === 'awaiting_approval';
        },
        { timeoutMs: 90_000 },
      );
      assert.ok(verifyingIntervals.length > 0, 'the session verified its best before recommending it');
      assert.deepEqual(new Set(verifyingIntervals), new Set([1]), 'while verifying, about six reports a window');
      const { session, iterations } = await getTuningSession(person, databaseId, started.id);
      const rounds = assertSessionShape(iterations, 5, ['ok']);
      assert.ok(rounds >= 3 && rounds <= 8, `${rounds} A/B rounds`);
      const trials = iterations.filter(isTrialJson);
      assert.equal(trials[0]!.kind, 'heuristic', "pgtune's recommendation first");
      for (const it of trials) assert.ok(it.objective !== null && it.objective > 0 && it.diff.length > 0);
      assert.ok(
        iterations.some((it) => it.kind === 'baseline' && it.phase === 'search' && it.baselineRatio !== null),
        'a baseline window between the trials',
      );
      // The noise of one window comes from the baseline windows, and each later trial carries its interval.
      assert.ok(session.noise !== null && session.noise! > 0, `noise ${session.noise}`);
      assert.ok(session.drift && session.drift.windows >= 3, JSON.stringify(session.drift));
      assert.ok(trials.at(-1)!.objectiveInterval, 'the last trial has an interval from the measured noise');
      assert.ok(session.baseline.stats && session.baseline.reports! > 0);

      const v = session.verification!;
      assert.equal(v.decision, 'recommend');
      assert.equal(v.rounds, rounds);
      assert.ok(v.runtime!.high <= 0.95, `the whole interval shows at least 5 %: ${v.summary}`);
      assert.match(v.summary ?? '', /^runtime −\d+(\.\d)? % \(95 % CI −\d+(\.\d)? % to −\d+(\.\d)? %\), throughput .* \d A\/B rounds$/);
      assert.ok(session.best, 'a recommendation');
      assert.deepEqual(session.best.config, v.candidate.config, 'the verified candidate is recommended');
      assert.equal(session.best.objective, v.runtime!.estimate);
      assert.ok(
        session.best.diff.some((d) => d.name === 'work_mem'),
        JSON.stringify(session.best.diff),
      );
      assert.match(session.message ?? '', /verified: runtime −.*approve/);
      // The trials are done: the database waits on known-good, and the agent reports at its own pace.
      const queued = await commands(databaseId);
      assert.deepEqual(queued[0]?.command.kind === 'revert' && queued[0].command.to, 'known-good');
      assert.equal((await agent.report()).nextReportInSeconds, 60);
      assert.equal(agent.settings.get('work_mem'), '4096', 'back on known-good while awaiting approval');
      assert.ok(
        queued.every((c) => c.command.kind === 'revert' || c.command.keep === false),
        'every window was a trial (keep=false) or a revert',
      );

      const approved = await person.post<{ session: { state: string; finalCommandId: string } }>(
        `/api/manage/databases/${databaseId}/tuning-sessions/${started.id}/approve`,
      );
      assert.equal(approved.status, 200, JSON.stringify(approved.body));
      assert.equal(approved.body.session.state, 'applying_best');
      const response = await agent.report();
      assert.equal(response.command?.kind, 'apply');
      assert.ok(response.command.kind === 'apply' && response.command.keep, 'the approved configuration is kept');
      assert.deepEqual(response.command.values, session.best.config);
      assert.equal(response.command.id, approved.body.session.finalCommandId);
      assert.equal(await stateOf(databaseId, started.id), 'done', 'the ack ends the session');
      const done = (await getTuningSession(person, databaseId, started.id)).session;
      assert.match(done.message ?? '', /applied and kept/);
      assert.equal(agent.knownGood.get('work_mem'), String(session.best.config['work_mem']));

      assertClientError(
        await person.post(`/api/manage/databases/${databaseId}/tuning-sessions/${started.id}/approve`),
        409,
        'conflict',
        /only a session awaiting approval/,
      );
      const list = await person.get<{ sessions: Array<{ id: string; state: string }> }>(
        `/api/manage/databases/${databaseId}/tuning-sessions`,
      );
      assert.deepEqual(
        list.body.sessions.map((s) => [s.id, s.state]),
        [[started.id, 'done']],
      );
    });

    test('a workload no knob speeds up ends "no significant improvement" and keeps nothing', async () => {
      const { databaseId, agent } = await connect('null-workload');
      agent.effect = () => 1;
      agent.noise = 0.05;
      const started = await startTuningSession(person, databaseId, {
        iterations: 3,
        windowSeconds: 2,
        warmupSeconds: 0,
        seed: 8,
        abRoundsMin: 3,
        abRoundsMax: 4,
        requireApproval: false,
      });
      await agent.runUntil('the session to end', async () => ['done', 'failed'].includes(await stateOf(databaseId, started.id)), {
        timeoutMs: 90_000,
      });
      const { session, iterations } = await getTuningSession(person, databaseId, started.id);
      assert.equal(session.state, 'done', session.message ?? '');
      assert.match(session.message ?? '', /^no significant improvement: .*the database stays on its known-good configuration$/);
      assert.doesNotMatch(session.message ?? '', /faster/);
      assert.equal(session.best, null, 'nothing recommended');
      if (session.verification) {
        assert.equal(session.verification.decision, 'no_significant_improvement');
        assert.ok(session.verification.runtime!.high > 0.95, session.verification.summary ?? '');
        assert.ok(assertSessionShape(iterations, 3) <= 4);
      }
      assert.ok(!agent.received.some((c) => c.kind === 'apply' && c.keep), 'no configuration kept');
      await agent.report();
      assert.deepEqual(agent.settings, agent.baseline, 'the database is on its known-good configuration');
    });

    test('a faster mix with one statement 3× slower is not kept silently: named and held for approval, or refused', async () => {
      const flipped = async (name: string, statementRegressions: 'approve' | 'refuse') => {
        const { databaseId, agent } = await connect(name);
        agent.noise = 0.03;
        // The statement with 12 % of the baseline's time runs 3× slower under any other work_mem:
        // the mix is still about 20 % faster with work_mem 64 MB.
        agent.statementEffect = (settings, i) => (i === 3 && settings.get('work_mem') !== '4096' ? 3 : 1);
        const started = await startTuningSession(person, databaseId, {
          iterations: 3,
          windowSeconds: 2,
          warmupSeconds: 0,
          seed: 42,
          abRoundsMax: 5,
          requireApproval: false,
          statementRegressions,
        });
        assert.equal(started.statementRegressions, statementRegressions);
        await agent.runUntil(
          'the verification to decide',
          async () => ['awaiting_approval', 'done', 'failed', 'applying_best'].includes(await stateOf(databaseId, started.id)),
          { timeoutMs: 90_000 },
        );
        return { agent, ...(await getTuningSession(person, databaseId, started.id)) };
      };
      const held = await flipped('regression-approve', 'approve');
      assert.equal(held.session.state, 'awaiting_approval', held.session.message ?? '');
      assert.match(
        held.session.message ?? '',
        /is verified: runtime −.*; but it makes a statement slower by 25 % or more: statement \d+:\d+:-3999976243000000000:t \(12 % of the baseline's time\) ×\d\.\d\d \(95 % CI ×\d\.\d\d to ×\d\.\d\d\); approve it/,
      );
      const statements = held.session.verification!.statements!;
      const regressions = statements.filter((c) => c.regression);
      assert.equal(regressions.length, 1, JSON.stringify(statements));
      assert.match(regressions[0]!.key, /^\d+:\d+:-3999976243000000000:t$/);
      assert.ok(
        statements.some((c) => !c.regression && c.ratio !== null && c.ratio.high < 1),
        'the faster ones are shown too',
      );
      assert.ok(!held.agent.received.some((c) => c.kind === 'apply' && c.keep), 'nothing kept without approval');

      const refused = await flipped('regression-refuse', 'refuse');
      assert.equal(refused.session.state, 'done', refused.session.message ?? '');
      assert.match(
        refused.session.message ?? '',
        /^not recommended: the configuration is verified: .*, but it makes a statement slower by 25 % or more: statement /,
      );
      assert.equal(refused.session.best, null);
      assert.equal(refused.session.verification!.decision, 'no_significant_improvement');
      assert.ok(!refused.agent.received.some((c) => c.kind === 'apply' && c.keep), 'nothing kept');
    });

    test('a window whose query mix shifts is contaminated, measured again, and not given to the optimizer', async () => {
      const { databaseId, agent } = await connect('mix-shift');
      const started = await startTuningSession(person, databaseId, { iterations: 2, windowSeconds: 2, warmupSeconds: 0, seed: 4 });
      let shifted = false;
      await agent.runUntil(
        'awaiting approval',
        async () => {
          const { session, iterations } = await getTuningSession(person, databaseId, started.id);
          const second = iterations.filter(isTrialJson)[1];
          // A batch job runs during the second trial's first window, and stops when it is judged.
          if (second?.state === 'measuring' && !shifted) shifted = agent.mixShifted = true;
          if (iterations.some((it) => it.state === 'contaminated')) agent.mixShifted = false;
          return ['awaiting_approval', 'done', 'failed'].includes(session.state);
        },
        { timeoutMs: 90_000 },
      );
      const { session, iterations } = await getTuningSession(person, databaseId, started.id);
      assert.equal(session.state, 'awaiting_approval', session.message ?? '');
      const contaminated = iterations.filter((it) => it.state === 'contaminated');
      assert.equal(contaminated.length, 1, JSON.stringify(iterations.map((it) => [it.ordinal, it.kind, it.state, it.failure])));
      const [bad] = contaminated;
      assert.match(
        bad!.failure ?? '',
        /^contaminated: the query mix moved away from the baseline's \(Jensen-Shannon distance 0\.\d\d, over 0\.25\)/,
      );
      assert.equal(bad!.objective, null, 'a contaminated window has no objective: the optimizer never sees it');
      const again = iterations.find((it) => it.ordinal === bad!.ordinal + 1)!;
      assert.equal(again.commandId, bad!.commandId, 'measured again with the configuration still applied');
      assert.deepEqual([again.kind, again.state], [bad!.kind, 'ok']);
      assert.match(again.reason, new RegExp(`^iteration ${bad!.ordinal} measured again: its window was contaminated`));
      assertSessionShape(iterations, 2, ['ok']);
      const stopped = await person.post(`/api/manage/databases/${databaseId}/tuning-sessions/${started.id}/revert`);
      assert.equal(stopped.status, 200);
    });

    test('a baseline window the agent cannot return to fails the session after three tries, instead of asking forever', async () => {
      const { databaseId, agent } = await connect('stuck-revert');
      agent.failReverts = true;
      const started = await startTuningSession(person, databaseId, { iterations: 1, windowSeconds: 2, warmupSeconds: 0, seed: 5 });
      await agent.runUntil(
        'the session to fail',
        async () => ['failed', 'done', 'awaiting_approval'].includes(await stateOf(databaseId, started.id)),
        { timeoutMs: 60_000 },
      );
      const { session, iterations } = await getTuningSession(person, databaseId, started.id);
      assert.equal(session.state, 'failed', session.message ?? '');
      assert.match(
        session.message ?? '',
        /^the last 3 windows of the known-good configuration could not be measured \(the last: failed by the agent: work_mem/,
      );
      assert.deepEqual(
        iterations.slice(-3).map((it) => [it.kind, it.state]),
        Array.from({ length: 3 }, () => ['baseline', 'failed']),
      );
    });

    test('refused, failed and guardrail-reverted trials fail their iterations, and their regions are not proposed again', async () => {
      const { databaseId, agent } = await connect('failures');
      agent.plan = (_command, trial) => {
        if (trial === 1) return { status: 'refused', errors: ['work_mem: 2 GB is above the bound of 1 GB'] };
        if (trial === 2) return { status: 'failed', errors: ['max_wal_size: pg_settings shows 1024, expected 2048'] };
        if (trial === 3) return { status: 'applied', breach: true };
        return { status: 'applied' };
      };
      const started = await startTuningSession(person, databaseId, {
        iterations: 6,
        windowSeconds: 2,
        warmupSeconds: 0,
        seed: 7,
        requireApproval: false,
      });
      await agent.runUntil('the session to end', async () => ['done', 'failed'].includes(await stateOf(databaseId, started.id)), {
        timeoutMs: 60_000,
      });
      const { session, iterations } = await getTuningSession(person, databaseId, started.id);
      assert.equal(session.state, 'done', session.message ?? '');
      assert.match(iterations[0]!.failure ?? '', /^refused by the agent: work_mem/);
      assert.match(iterations[1]!.failure ?? '', /^failed by the agent: max_wal_size/);
      assert.match(iterations[2]!.failure ?? '', /^guardrail: /);
      assert.deepEqual(
        iterations.slice(0, 3).map((it) => it.state),
        ['failed', 'failed', 'failed'],
      );
      assertSessionShape(iterations, 6);

      // No later suggestion falls in the region of a failed one.
      const s = space();
      const failed = iterations.filter((it) => it.state === 'failed' && isTrialJson(it));
      for (const f of failed) {
        for (const later of iterations.filter((it: IterationJson) => it.ordinal > f.ordinal && isTrialJson(it))) {
          const d = distance(s, encode(s, later.config), encode(s, f.config));
          assert.ok(d >= DEFAULT_FAILED_RADIUS, `iteration ${later.ordinal} is ${d.toFixed(3)} from failed iteration ${f.ordinal}`);
        }
      }
      // The recommendation is none of the failed ones.
      if (session.best) assert.ok(!failed.some((f) => JSON.stringify(f.config) === JSON.stringify(session.best!.config)));
      assert.ok(
        agent.received.some((c) => c.kind === 'apply' && c.keep) || /no significant improvement/.test(session.message ?? ''),
        session.message ?? '',
      );
    });

    test('an acknowledgement that never comes fails the iteration after the timeout, and the session moves on', async () => {
      const { databaseId, agent } = await connect('silent');
      agent.plan = (_command, trial) => (trial === 1 ? { status: 'ignore' } : { status: 'applied' });
      const started = await startTuningSession(person, databaseId, { iterations: 3, windowSeconds: 2, warmupSeconds: 0, seed: 3 });
      await agent.runUntil('the first trial to be sent twice', async () => {
        const [first] = (await getTuningSession(person, databaseId, started.id)).iterations;
        return (
          first?.sentAt != null &&
          agent.received.length === 1 &&
          (await commands(databaseId)).some((c) => c.id === first.commandId && c.state === 'sent')
        );
      });
      // Eleven minutes later, by the storage's clock as the timer would see it.
      const advanced = await advanceTuningSession(service.storage, databaseId, { now: new Date(Date.now() + 11 * 60_000) });
      assert.ok(advanced?.commandIssued, 'the next trial is queued');
      const { iterations } = await getTuningSession(person, databaseId, started.id);
      assert.equal(iterations[0]!.state, 'failed');
      assert.match(iterations[0]!.failure ?? '', /no acknowledgement within 600 s/);
      const cancelled = (await commands(databaseId)).find((c) => c.id === iterations[0]!.commandId);
      assert.equal(cancelled?.state, 'failed', 'the command is no longer handed out');
      const next = await agent.report();
      assert.equal(next.command?.id, iterations[1]!.commandId);
      const stopped = await person.post<{ session: { state: string } }>(
        `/api/manage/databases/${databaseId}/tuning-sessions/${started.id}/stop`,
      );
      assert.equal(stopped.body.session.state, 'stopped');
    });

    test('an agent gone for longer than a window pauses the session, which says so and goes on when it is back', async () => {
      const { databaseId, agent } = await connect('gone');
      const started = await startTuningSession(person, databaseId, { iterations: 3, windowSeconds: 2, warmupSeconds: 0, seed: 5 });
      await agent.runUntil('a trial to be measured', async () =>
        (await getTuningSession(person, databaseId, started.id)).iterations.some((it) => it.state === 'measuring'),
      );
      // The agent stops (its lease released), and the timer looks a minute later.
      assert.equal((await agent.client.stop({ leaseId: agent.leaseId })).status, 204);
      const before = (await getTuningSession(person, databaseId, started.id)).iterations;
      await advanceTuningSession(service.storage, databaseId, { now: new Date(Date.now() + 60_000) });
      const paused = await getTuningSession(person, databaseId, started.id);
      assert.equal(paused.session.state, 'iterating');
      assert.match(
        paused.session.message ?? '',
        /^paused: the agent is gone \(no live lease, no report since .*\): the session goes on when it reports again$/,
      );
      assert.deepEqual(
        paused.iterations.map((it) => it.state),
        before.map((it) => it.state),
        'no window was condemned while nobody measured it',
      );
      // Back: the session goes on.
      await agent.start();
      await agent.report();
      const resumed = await getTuningSession(person, databaseId, started.id);
      assert.doesNotMatch(resumed.session.message ?? '', /^paused/);
      await agent.runUntil('a later window measured', async () => {
        const { iterations } = await getTuningSession(person, databaseId, started.id);
        return iterations.some((it) => it.ordinal > before.at(-1)!.ordinal && it.state !== 'applying' && it.state !== 'measuring');
      });
      await person.post(`/api/manage/databases/${databaseId}/tuning-sessions/${started.id}/stop`);
    });

    test('stop returns a trial to known-good; revert returns the database to its baseline', async () => {
      const { databaseId, agent } = await connect('stop-revert');
      const first = await startTuningSession(person, databaseId, { iterations: 5, windowSeconds: 2, warmupSeconds: 0, seed: 11 });
      await agent.runUntil(
        'a trial to be measured',
        async () => (await getTuningSession(person, databaseId, first.id)).iterations[0]?.state === 'measuring',
      );
      assert.notEqual(agent.settings.get('work_mem'), '4096', 'the trial is applied');
      const stopped = await person.post<{ session: { state: string; message: string } }>(
        `/api/manage/databases/${databaseId}/tuning-sessions/${first.id}/stop`,
      );
      assert.equal(stopped.status, 200, JSON.stringify(stopped.body));
      assert.equal(stopped.body.session.state, 'stopped');
      assert.match(stopped.body.session.message, /stopped by admin: the database returns to its known-good configuration/);
      const revert = await agent.report();
      assert.deepEqual(revert.command && revert.command.kind === 'revert' && revert.command.to, 'known-good');
      assert.equal(agent.settings.get('work_mem'), '4096', 'back on known-good');
      const { iterations } = await getTuningSession(person, databaseId, first.id);
      assert.equal(iterations.at(-1)?.state, 'cancelled');
      assertClientError(
        await person.post(`/api/manage/databases/${databaseId}/tuning-sessions/${first.id}/stop`),
        409,
        'conflict',
        'stopped already',
      );

      const second = await startTuningSession(person, databaseId, { iterations: 5, windowSeconds: 2, warmupSeconds: 0, seed: 12 });
      await agent.runUntil(
        'a trial to be applied',
        async () => (await getTuningSession(person, databaseId, second.id)).iterations[0]?.state === 'measuring',
      );
      assertClientError(
        await person.post(`/api/manage/databases/${databaseId}/tuning-sessions/${first.id}/revert`),
        409,
        'conflict',
        'latest session',
      );
      const reverted = await person.post<{ session: { state: string; message: string } }>(
        `/api/manage/databases/${databaseId}/tuning-sessions/${second.id}/revert`,
      );
      assert.equal(reverted.body.session.state, 'reverted');
      const toBaseline = await agent.report();
      assert.deepEqual(toBaseline.command && toBaseline.command.kind === 'revert' && toBaseline.command.to, 'baseline');
      assert.deepEqual(agent.settings, agent.baseline);
      assertClientError(
        await person.post(`/api/manage/databases/${databaseId}/tuning-sessions/${second.id}/revert`),
        409,
        'conflict',
        'reverted already',
      );
    });

    test('a session goes on after the service restarts mid-iteration', async () => {
      const { databaseId, agent } = await connect('restart');
      const started = await startTuningSession(person, databaseId, { iterations: 2, windowSeconds: 2, warmupSeconds: 1, seed: 5 });
      await agent.runUntil(
        'the first trial to be measured',
        async () => (await getTuningSession(person, databaseId, started.id)).iterations[0]?.state === 'measuring',
      );
      await lab.restart();
      ({ service, admin: person } = lab);
      await agent.runUntil(
        'awaiting approval after the restart',
        async () => (await stateOf(databaseId, started.id)) === 'awaiting_approval',
      );
      const { iterations } = await getTuningSession(person, databaseId, started.id);
      assertSessionShape(iterations, 2, ['ok']);
    });

    test(
      'two replicas on one PostgreSQL advance a session one at a time',
      { skip: kind === 'postgres' ? false : 'PGlite serves one process' },
      async () => {
        const replica = await startTestService(lab.store);
        try {
          const { databaseId, agent } = await connect('replicas');
          const started = await startTuningSession(person, databaseId, { iterations: 3, windowSeconds: 2, warmupSeconds: 0, seed: 9 });
          let flip = false;
          await agent.runUntil('awaiting approval', async () => {
            // Every step, both replicas' requests and timers at once, besides the agent's report.
            await Promise.all([
              advanceTuningSession(service.storage, databaseId),
              advanceTuningSession(replica.storage, databaseId),
              advanceTuningSession(service.storage, databaseId, { skipLocked: true }),
              advanceTuningSession(replica.storage, databaseId, { skipLocked: true }),
            ]);
            flip = !flip;
            agent.useService(flip ? replica.url : service.url);
            return (await stateOf(databaseId, started.id)) === 'awaiting_approval';
          });
          const { iterations } = await getTuningSession(person, databaseId, started.id);
          assertSessionShape(iterations, 3, ['ok']);
          const issued = await commands(databaseId);
          const applies = issued.filter((c) => c.command.kind === 'apply');
          const windows = [...new Set(iterations.filter((it) => it.kind !== 'baseline').map((it) => it.commandId))];
          assert.deepEqual(
            applies.map((c) => c.id).sort(),
            windows.sort(),
            'one apply per trial and per run of candidate windows, none twice',
          );
          const reverts = issued.filter((c) => c.command.kind === 'revert').map((c) => c.id);
          const baselineCommands = new Set(iterations.filter((it) => it.kind === 'baseline').map((it) => it.commandId));
          assert.equal(reverts.length, baselineCommands.size + 1, 'a revert per run of baseline windows, and one to known-good at the end');
        } finally {
          await replica.close();
        }
      },
    );

    test('bad inputs to the session routes get a clear 4xx naming the field', async () => {
      const { databaseId, agent } = await connect('bad-inputs');
      const path = `/api/manage/databases/${databaseId}/tuning-sessions`;
      assertClientError(await person.post(path, { iterations: 0 }), 400, 'bad_request', 'body.iterations: expected at least 1');
      assertClientError(await person.post(path, { iterations: 2.5 }), 400, 'bad_request', 'body.iterations: expected a whole number');
      assertClientError(
        await person.post(path, { windowSeconds: 1 }),
        400,
        'bad_request',
        'body.windowSeconds: expected at least 2 seconds',
      );
      assertClientError(await person.post(path, { windowSeconds: '600' }), 400, 'bad_request', 'body.windowSeconds');
      assertClientError(await person.post(path, { warmupSeconds: -1 }), 400, 'bad_request', 'body.warmupSeconds');
      assertClientError(await person.post(path, { mode: 'fast' }), 400, 'bad_request', 'body.mode');
      assertClientError(await person.post(path, { seed: -3 }), 400, 'bad_request', 'body.seed');
      assertClientError(await person.post(path, { requireApproval: 'no' }), 400, 'bad_request', 'body.requireApproval');
      assertClientError(
        await person.post(path, { statementRegressions: 'ignore' }),
        400,
        'bad_request',
        "body.statementRegressions: expected 'approve' (name it and wait for approval) or 'refuse'",
      );
      assertClientError(await person.post(path, { abRoundsMin: 2 }), 400, 'bad_request', 'body.abRoundsMin: expected at least 3 rounds');
      assertClientError(
        await person.post(path, { abRoundsMin: 6, abRoundsMax: 4 }),
        400,
        'bad_request',
        'body.abRoundsMax: expected at least as many rounds as abRoundsMin',
      );
      assertClientError(
        await person.post(path, { minEffectPercent: -1 }),
        400,
        'bad_request',
        'body.minEffectPercent: expected 0 % or more',
      );
      assertClientError(
        await person.post(path, { confidencePercent: 100 }),
        400,
        'bad_request',
        'body.confidencePercent: expected at most 99.9 %',
      );
      assertClientError(
        await person.post(path, { confidencePercent: '95' }),
        400,
        'bad_request',
        'body.confidencePercent: expected a number of percent',
      );
      assertClientError(await person.post(path, { iterations: 3, extra: true }), 400, 'bad_request', 'extra');
      assertClientError(
        await person.post(path, { mode: 'restart' }),
        400,
        'bad_request',
        /body\.mode: restart needs an agent allowed to restart/,
      );
      assertClientError(await person.post('/api/manage/databases/not-a-uuid/tuning-sessions', {}), 400, 'bad_request', 'path.databaseId');
      assertClientError(
        await person.post(`/api/manage/databases/${crypto.randomUUID()}/tuning-sessions`, {}),
        404,
        'not_found',
        'no database',
      );
      assertClientError(await person.get(`${path}/nope`), 400, 'bad_request', 'path.sessionId');
      assertClientError(await person.get(`${path}/${crypto.randomUUID()}`), 404, 'not_found', 'no tuning session');
      assertClientError(await person.post(`${path}/${crypto.randomUUID()}/approve`), 404, 'not_found', 'no tuning session');
      assertClientError(await person.get(`${path}?limit=0`), 400, 'bad_request', 'query.limit');

      const started = await startTuningSession(person, databaseId, { windowSeconds: 30 });
      assertClientError(await person.post(path, {}), 409, 'conflict', `session ${started.id} is baseline on this database`);
      assertClientError(await person.post(`${path}/${started.id}/approve`), 409, 'conflict', 'only a session awaiting approval');
      assert.equal((await person.post(`${path}/${started.id}/stop`)).status, 200);
      void agent;

      // No agent yet; a reload-only target asked to restart; an agent that may restart.
      const { databaseId: idle } = await person.createDatabase('no-agent');
      assertClientError(await person.post(`/api/manage/databases/${idle}/tuning-sessions`, {}), 409, 'conflict', 'no agent is connected');
      const flex = await connect('flex', { target: 'managed-b-flex', allowRestart: true });
      assertClientError(
        await person.post(`/api/manage/databases/${flex.databaseId}/tuning-sessions`, { mode: 'restart' }),
        400,
        'bad_request',
        'body.mode: managed-b-flex is reload-only',
      );
      const restartable = await connect('restartable', { allowRestart: true });
      const restart = await startTuningSession(person, restartable.databaseId, { mode: 'restart', windowSeconds: 30 });
      assert.equal(restart.mode, 'restart');
      assert.equal((await person.post(`/api/manage/databases/${restartable.databaseId}/tuning-sessions/${restart.id}/stop`)).status, 200);
    });
  });
}

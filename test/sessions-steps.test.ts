// Verified steps (issue #30, part 2), over real HTTP with the real storage and a simulated agent
// whose workload runs three times faster once work_mem is raised: the first trial that shows it
// is verified at once in A/B rounds, before the search ends; approved, it is kept (keep=true) and
// the search goes on from it, its later windows judged against it; the session's result names
// the step with its interval. A workload no knob speeds up starts no step.
// test-tier: slow (its sessions run in real time: a minute or two of two-second windows)
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { PersonClient, TestService } from './helpers/service.ts';
import { startAdminService, type AdminService } from './helpers/service-admin.ts';
import { SimulatedAgent, getTuningSession, isTrialJson, startTuningSession, type IterationJson } from './sessions-agent.ts';

/** The busiest statement spills while work_mem is at its 4 MB default (SimulatedAgent.spills), and
 * the mix runs three times faster once it does not; nothing else matters. */
const workMemWins = (settings: ReadonlyMap<string, string>) => (Number(settings.get('work_mem') ?? 4096) > 4096 ? 0.33 : 1);

describe('verified steps (PGlite storage, simulated agent)', () => {
  let lab: AdminService;
  let service: TestService;
  let person: PersonClient;

  const connect = async (name: string) => {
    const { databaseId, apiKey } = await person.createDatabase(name, 'local');
    const agent = new SimulatedAgent(service.url, databaseId, apiKey);
    await agent.start();
    await agent.report();
    return { databaseId, agent };
  };
  const sessionOf = async (databaseId: string, id: string) => getTuningSession(person, databaseId, id);
  const stepsOf = async (databaseId: string, id: string) => (await sessionOf(databaseId, id)).session.steps;

  before(async () => {
    lab = await startAdminService('pglite');
    ({ service, admin: person } = lab);
  });
  after(() => lab?.close());

  test('a 3× win is verified as soon as it is seen, kept after approval, and the search goes on from it', async () => {
    const { databaseId, agent } = await connect('steps');
    agent.noise = 0.03;
    agent.effect = workMemWins;
    agent.spills = true;
    const started = await startTuningSession(person, databaseId, { iterations: 6, windowSeconds: 2, warmupSeconds: 0, seed: 7 });

    await agent.runUntil(
      'a step waiting for approval',
      async () => (await sessionOf(databaseId, started.id)).session.state === 'awaiting_approval',
      {
        timeoutMs: 90_000,
      },
    );
    const waiting = await sessionOf(databaseId, started.id);
    const [step] = waiting.session.steps;
    assert.ok(step, 'a step');
    assert.equal(step.outcome, 'awaiting_approval');
    const trialsBefore = waiting.iterations.filter(isTrialJson).filter((it) => it.state === 'ok' || it.state === 'failed').length;
    assert.ok(trialsBefore < 6, `verified before the search ended (${trialsBefore} of 6 trials measured)`);
    assert.ok(step.rounds >= 3 && step.runtime !== null && step.runtime.high <= 0.95, JSON.stringify(step));
    assert.match(
      waiting.session.message ?? '',
      /^step 1 \(iteration \d+\) is verified: runtime −\d+.*approve it to apply and keep it; the search goes on from it/,
    );
    // Windows counted to the first verified gain: the first baseline, the trials up to the step, its A/B rounds.
    const windows = 1 + waiting.iterations.filter((it) => it.state === 'ok').length;
    console.log(`first verified gain after ${windows} windows: ${step.summary}`);
    // The revert is handed over with the next report (the timer may have moved the session).
    await agent.report();
    assert.equal(agent.settings.get('work_mem'), '4096', 'back on known-good while awaiting approval');

    const approved = await person.post(`/api/manage/databases/${databaseId}/tuning-sessions/${started.id}/approve`);
    assert.equal(approved.status, 200, JSON.stringify(approved.body));
    await agent.runUntil('the step kept', async () => (await stepsOf(databaseId, started.id))[0]?.outcome === 'kept', {
      timeoutMs: 120_000,
    });
    assert.ok(Number(agent.knownGood.get('work_mem')) > 4096, 'the step is the agent known-good configuration (keep=true)');
    assert.equal((await sessionOf(databaseId, started.id)).session.state, 'iterating', 'the search goes on');

    await agent.runUntil(
      'the session ends',
      async () => {
        const { state } = (await sessionOf(databaseId, started.id)).session;
        if (state === 'awaiting_approval') await person.post(`/api/manage/databases/${databaseId}/tuning-sessions/${started.id}/approve`);
        return state === 'done' || state === 'failed';
      },
      { timeoutMs: 120_000 },
    );
    const { session, iterations } = await sessionOf(databaseId, started.id);
    assert.equal(session.state, 'done', session.message ?? '');
    const steps = session.steps;
    const kept = steps.filter((s) => s.outcome === 'kept');
    assert.ok(kept.length >= 1);
    const boundary = kept[0]!.keptAfter!;
    const after = iterations.filter((it) => it.ordinal > boundary);
    assert.equal(after[0]?.kind, 'baseline', 'the known-good is measured again first after a step is kept');
    // Later trials are judged against the step, on the first baseline's scale: near its 0.33, not near 1.
    const laterTrials = after.filter((it) => isTrialJson(it) && it.state === 'ok' && it.objective !== null);
    for (const it of laterTrials) assert.ok(it.objective! < 0.6, `trial ${it.ordinal} after the step: objective ${it.objective}`);
    assert.match(session.message ?? '', /verified step.* kept \(step 1 \(iteration \d+\): runtime −/);
    assert.ok(session.best && session.best.objective < 0.6, JSON.stringify(session.best));
    assert.ok(
      typeof session.noise === 'number' && session.noise < 0.2,
      `the noise of one window is pooled within epochs, not the step's jump: ${session.noise}`,
    );
    assert.ok(Number(agent.knownGood.get('work_mem')) > 4096, 'the database stays on the kept step (or better)');
  });

  test('a workload no knob speeds up starts no step', async () => {
    const { databaseId, agent } = await connect('no-steps');
    agent.noise = 0.03;
    agent.effect = () => 1;
    const started = await startTuningSession(person, databaseId, { iterations: 4, windowSeconds: 2, warmupSeconds: 0, seed: 3 });
    await agent.runUntil(
      'the session ends',
      async () => ['done', 'failed'].includes((await sessionOf(databaseId, started.id)).session.state),
      { timeoutMs: 120_000 },
    );
    const { session } = await sessionOf(databaseId, started.id);
    assert.equal(session.state, 'done');
    assert.deepEqual(session.steps, []);
    assert.match(session.message ?? '', /no significant improvement/);
    assert.equal(agent.knownGood.get('work_mem'), '4096');
  });

  test('once the noise of one window is measured, the windows shrink to what it needs, no shorter than allowed', async () => {
    const { databaseId, agent } = await connect('window-length');
    agent.noise = 0.02;
    // A step first (kept without approval): its A/B rounds measure the baseline thrice, which
    // measures the noise before the search could end.
    agent.effect = workMemWins;
    agent.spills = true;
    const started = await startTuningSession(person, databaseId, {
      iterations: 7,
      windowSeconds: 4,
      windowMinSeconds: 2,
      warmupSeconds: 0,
      seed: 5,
      requireApproval: false,
    });
    assert.equal(started.windowMinSeconds, 2);
    assert.equal(started.windowNowSeconds, null, 'the longest window first');
    await agent.runUntil('the window chosen', async () => (await sessionOf(databaseId, started.id)).session.windowNowSeconds !== null, {
      timeoutMs: 120_000,
    });
    const { session } = await sessionOf(databaseId, started.id);
    assert.equal(session.windowNowSeconds, 2, `a quiet workload: the shortest allowed (${session.message ?? ''})`);
    assert.equal(session.steps[0]?.outcome, 'kept', JSON.stringify(session.steps));
    const seconds = (it: IterationJson) => (Date.parse(it.window!.end) - Date.parse(it.window!.start)) / 1000;
    await agent.runUntil(
      'a window after the choice',
      async () => (await sessionOf(databaseId, started.id)).iterations.some((it) => it.window && seconds(it) === 2),
      { timeoutMs: 60_000 },
    );
    // 4 s windows, then 2 s ones: never back, never another length.
    const lengths = (await sessionOf(databaseId, started.id)).iterations.filter((it) => it.window).map(seconds);
    const first2 = lengths.indexOf(2);
    assert.ok(
      first2 > 0 && lengths.slice(0, first2).every((x) => x === 4) && lengths.slice(first2).every((x) => x === 2),
      lengths.join(' '),
    );
    await person.post(`/api/manage/databases/${databaseId}/tuning-sessions/${started.id}/stop`);
  });
});

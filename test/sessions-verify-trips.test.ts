// A guardrail trip in a verification's candidate window (issue #30 part 5, for the A/B rounds):
// it used to end the verification, "the candidate failed in A/B round 1", whatever caused it. Now
// the baseline (known-good) is measured right after it, as after a trial's trip (trips.ts): when
// that window is just as slow, the environment caused the trip, the candidate's window is marked
// contaminated and the round measured again; when it is not, the trip stays the configuration's.
// Over real HTTP with the real storage and a simulated agent (sessions-agent.ts) whose workload
// runs three times faster with work_mem raised: the diagnosis is verified at once as a step.
// test-tier: slow (its sessions run in real time: a minute of two-second windows)
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ENVIRONMENT_TRIP } from '../src/service/tuning/trips.ts';
import type { PersonClient, TestService } from './helpers/service.ts';
import { startAdminService, type AdminService } from './helpers/service-admin.ts';
import { SimulatedAgent, assertSessionShape, getTuningSession, startTuningSession } from './sessions-agent.ts';

const workMemWins = (settings: ReadonlyMap<string, string>) => (Number(settings.get('work_mem') ?? 4096) > 4096 ? 0.33 : 1);

describe('a guardrail trip during a verification (PGlite storage, simulated agent)', () => {
  let lab: AdminService;
  let service: TestService;
  let person: PersonClient;

  before(async () => {
    lab = await startAdminService('pglite');
    ({ service, admin: person } = lab);
  });
  after(() => lab?.close());

  /** A session whose step's first A/B candidate window trips a guardrail; `busy`: everything runs
   * three times slower from the trip until the baseline window after it is measured. */
  async function tripInRoundOne(name: string, busy: boolean) {
    const { databaseId, apiKey } = await person.createDatabase(name, 'local');
    const agent = new SimulatedAgent(service.url, databaseId, apiKey);
    await agent.start();
    await agent.report();
    agent.noise = 0.03;
    agent.effect = workMemWins;
    agent.spills = true;
    // Trial 1 is the diagnosis; the next apply is the step's first A/B candidate.
    agent.plan = (_command, trial) => {
      if (trial !== 2) return { status: 'applied' };
      if (busy) agent.effect = (settings) => 3 * workMemWins(settings);
      return { status: 'applied', breach: true };
    };
    const started = await startTuningSession(person, databaseId, {
      iterations: 2,
      windowSeconds: 2,
      warmupSeconds: 0,
      seed: 7,
      requireApproval: false,
    });
    let tripOrdinal: number | null = null;
    await agent.runUntil(
      'the step decided',
      async () => {
        const { session, iterations } = await getTuningSession(person, databaseId, started.id);
        const trip = iterations.find((it) => it.phase === 'verify' && it.kind === 'candidate' && /\bguardrail\b/.test(it.failure ?? ''));
        tripOrdinal ??= trip?.ordinal ?? null;
        // The neighbour leaves once the baseline window after the trip is measured.
        if (
          busy &&
          tripOrdinal !== null &&
          iterations.some((it) => it.ordinal > tripOrdinal! && it.kind === 'baseline' && it.state === 'ok')
        )
          agent.effect = workMemWins;
        const step = session.steps[0];
        return step !== undefined && step.outcome !== 'verifying';
      },
      { timeoutMs: 120_000 },
    );
    const { session, iterations } = await getTuningSession(person, databaseId, started.id);
    assert.ok(tripOrdinal !== null, 'a candidate window tripped the guardrail');
    const trip = iterations.find((it) => it.ordinal === tripOrdinal)!;
    const next = iterations.find((it) => it.ordinal === tripOrdinal! + 1);
    assert.equal(next?.kind, 'baseline', 'the baseline is measured right after the trip');
    assert.match(next.reason, /tripped a guardrail.*if it is just as slow, the environment caused it/);
    return { session, iterations, trip, step: session.steps[0]! };
  }

  test('the baseline after the trip just as slow: the candidate window is contaminated, the round measured again, the step verified', async () => {
    const { iterations, trip, step } = await tripInRoundOne('verify-trip-environment', true);
    console.log(`step 1: ${step.outcome}; ${step.summary ?? step.note ?? ''}`);
    console.log(`trip: ${trip.failure}`);
    assert.equal(trip.state, 'contaminated');
    assert.ok(trip.failure?.startsWith(ENVIRONMENT_TRIP), trip.failure ?? '');
    assert.match(trip.failure ?? '', /the baseline window after it \(iteration \d+\) was just as slow: its runtime was \d+\.\d % above/);
    // The round measured again: a candidate window of the same round after the baseline.
    const again = iterations.find((it) => it.ordinal > trip.ordinal && it.kind === 'candidate' && it.round === trip.round);
    assert.equal(again?.state, 'ok', JSON.stringify(iterations.map((it) => [it.ordinal, it.kind, it.round, it.state])));
    assert.ok(['kept', 'applying'].includes(step.outcome), `${step.outcome}: ${step.note ?? ''}`);
    assert.ok(step.runtime && step.runtime.high <= 0.95, JSON.stringify(step.runtime));
    assertSessionShape(
      iterations.filter((it) => it.ordinal <= (step.keptAfter ?? Infinity)),
      1,
    );
  });

  test("the baseline after the trip as fast as before: the trip stays the candidate's, and the step is not verified", async () => {
    const { trip, step } = await tripInRoundOne('verify-trip-configuration', false);
    assert.equal(trip.state, 'failed');
    assert.equal(step.outcome, 'not_verified');
    assert.match(step.note ?? '', /^the candidate failed in A\/B round 1: guardrail: /);
  });
});

// A guardrail trip the environment caused is not the configuration's failure: the baseline window
// measured after the trip says whether the baseline is just as slow; if so, the trial is marked
// contaminated and the optimizer's history leaves it out, so its region may be tried again.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { WindowStats } from '../src/measure/objective.ts';
import { historyOf, judgeSession } from '../src/service/tuning/history.ts';
import type { TuningIterationKind, TuningIterationRecord, TuningSessionRecord } from '../src/service/tuning/store.ts';
import {
  ENVIRONMENT_TRIP,
  environmentTrips,
  isTrip,
  isVerificationTrip,
  tripAwaitingBaseline,
  verificationTrip,
} from '../src/service/tuning/trips.ts';

const T0 = Date.parse('2026-11-25T10:00:00Z');
const stats = (weightedRuntimeMs: number, callsPerSecond = 100): WindowStats => ({
  weightedRuntimeMs,
  coverage: 1,
  avgRuntimeMs: weightedRuntimeMs,
  calls: callsPerSecond * 600,
  seconds: 600,
  tps: callsPerSecond / 2,
  rollbackRate: 0,
});
/** The 10-minute window that starts `at` minutes after T0. */
const window = (at: number) => ({ start: new Date(T0 + at * 60_000), end: new Date(T0 + (at + 10) * 60_000), attempts: 0 });

const session = {
  id: 'session-1',
  state: 'iterating',
  baselineWindow: window(0),
  baseline: { mix: { q1: 1 }, stats: stats(10), reports: 10, lowestMemoryShare: null, measuredAt: new Date(T0).toISOString() },
} as unknown as TuningSessionRecord;

function iteration(
  ordinal: number,
  kind: TuningIterationKind,
  at: number,
  figures: WindowStats | null,
  state: TuningIterationRecord['state'] = 'ok',
  failure: string | null = null,
): TuningIterationRecord {
  return {
    sessionId: session.id,
    ordinal,
    kind,
    phase: 'search',
    round: null,
    config: kind === 'baseline' ? {} : { max_wal_size: 4096 },
    reason: '',
    predicted: null,
    commandId: `command-${ordinal}`,
    state,
    createdAt: new Date(T0 + at * 60_000),
    sentAt: null,
    ackedAt: null,
    effective: null,
    window: window(at),
    objective: null,
    stats: figures,
    reports: figures ? 10 : null,
    failure,
    finishedAt: new Date(T0 + (at + 10) * 60_000),
    plans: null,
  };
}

/** Three baseline windows near 10 ms (about 3 % noise), then a trial a guardrail reverted. */
const before = [
  iteration(1, 'explore', 12, stats(9.5)),
  iteration(2, 'baseline', 24, stats(10.3)),
  iteration(3, 'explore', 36, stats(9.8)),
  iteration(4, 'baseline', 48, stats(9.9)),
  iteration(5, 'heuristic', 60, null, 'failed', 'guardrail: throughput fell by 22.9 % (77.1 statements/s, baseline 100.0)'),
];

test('after a guardrail trip the baseline is measured at once; a refused apply is no trip', () => {
  assert.ok(isTrip(before[4]!));
  assert.equal(tripAwaitingBaseline(before)?.ordinal, 5, 'the baseline is due');
  const refused = iteration(5, 'heuristic', 60, null, 'failed', 'refused by the agent: work_mem: 2 GB is above the bound');
  assert.equal(isTrip(refused), false);
  assert.equal(tripAwaitingBaseline([...before.slice(0, 4), refused]), null);
  const measured = [...before, iteration(6, 'baseline', 72, stats(10.1))];
  assert.equal(tripAwaitingBaseline(measured), null, 'measured: nothing more is due');
});

test('a baseline as slow as the trip (throughput down by a quarter): the trial is contaminated, not failed, and leaves the history', () => {
  const iterations = [...before, iteration(6, 'baseline', 72, stats(13, 74))];
  const found = environmentTrips(session, iterations);
  assert.equal(found.length, 1);
  assert.equal(found[0]!.ordinal, 5);
  assert.ok(found[0]!.failure.startsWith(ENVIRONMENT_TRIP));
  assert.match(
    found[0]!.failure,
    /guardrail: throughput fell by 22\.9 %.*the baseline window after it \(iteration 6\) was just as slow: its throughput fell by 26\.0 %/,
  );
  assert.match(found[0]!.failure, /it may be tried again$/);
  // Marked so (the engine's update), the optimizer no longer sees a failure there.
  const marked = iterations.map((it) => (it.ordinal === 5 ? { ...it, state: 'contaminated' as const, failure: found[0]!.failure } : it));
  const history = historyOf(marked, judgeSession(session, marked));
  assert.equal(history.filter((o) => o.status === 'failed').length, 0);
  assert.equal(
    historyOf(iterations, judgeSession(session, iterations)).filter((o) => o.status === 'failed').length,
    1,
    'before: a failure',
  );
});

test('a baseline slower than the drift model predicts (runtime +30 %, throughput steady) also shows the environment', () => {
  const found = environmentTrips(session, [...before, iteration(6, 'baseline', 72, stats(13, 95))]);
  assert.equal(found.length, 1);
  assert.match(found[0]!.failure, /its runtime was 3\d\.\d % above what the drift of the baseline windows before it predicts \(σ /);
});

test("a baseline as fast as before: the trip stays the configuration's failure", () => {
  assert.deepEqual(environmentTrips(session, [...before, iteration(6, 'baseline', 72, stats(10.2, 99))]), []);
  // A constraint on the trial's own window (it has stats) is a trip too.
  const constrained = iteration(5, 'explore', 60, stats(9, 70), 'failed', 'throughput fell by 30.0 % (70.0 statements/s, baseline 100.0)');
  assert.ok(isTrip(constrained));
  assert.deepEqual(environmentTrips(session, [...before.slice(0, 4), constrained, iteration(6, 'baseline', 72, stats(10, 100))]), []);
});

test("a verification's candidate window a guardrail ended: awaiting the baseline after it, then the environment's or the candidate's; a refused apply is the candidate's at once", () => {
  const verify = (it: TuningIterationRecord, round: number): TuningIterationRecord => ({ ...it, phase: 'verify', round });
  const rounds = [
    ...before.slice(0, 4),
    verify(iteration(5, 'baseline', 60, stats(10)), 1),
    verify(iteration(6, 'candidate', 72, null, 'failed', 'guardrail: query runtime 30.1 ms is 3.0× the known-good 10.0 ms'), 1),
  ];
  const tripped = rounds[5]!;
  assert.ok(isVerificationTrip(tripped));
  assert.equal(isTrip(tripped), false, "a trial's trip is the search's to judge, not this");
  assert.deepEqual(verificationTrip(session, rounds, tripped), { outcome: 'awaiting' });
  const slow = verificationTrip(session, [...rounds, verify(iteration(7, 'baseline', 84, stats(14, 95)), 1)], tripped);
  assert.equal(slow.outcome, 'environment');
  assert.match(
    slow.outcome === 'environment' ? slow.failure : '',
    /^contaminated: the environment, not the configuration: guardrail: .*\(iteration 7\) was just as slow/,
  );
  assert.deepEqual(verificationTrip(session, [...rounds, verify(iteration(7, 'baseline', 84, stats(10.1, 100)), 1)], tripped), {
    outcome: 'configuration',
  });
  const refused = verify(iteration(6, 'candidate', 72, null, 'failed', 'refused by the agent: work_mem: 2 GB is above the bound'), 1);
  assert.deepEqual(verificationTrip(session, [...rounds.slice(0, 5), refused], refused), { outcome: 'configuration' });
});

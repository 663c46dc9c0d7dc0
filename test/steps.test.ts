// Verified steps, the pure parts (src/service/tuning/steps.ts, history.ts): which window is worth
// verifying at once, the epochs a kept step opens, the objectives carried back to the first
// baseline's scale, and the noise of one window pooled within epochs (a step's jump is no noise).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { noiseUpperBound, pooledWindowNoise, pooledWindowNoiseOf, windowNoise } from '../src/measure/drift.ts';
import { judgeSession } from '../src/service/tuning/history.ts';
import {
  ASSUMED_WINDOW_NOISE,
  chainAt,
  chainedInterval,
  epochOf,
  stepNoise,
  UNARGUED_NOISE_FACTOR,
  worthVerifyingNow,
} from '../src/service/tuning/steps.ts';
import type { SessionStep, TuningIterationRecord, TuningSessionRecord } from '../src/service/tuning/store.ts';

const SETTINGS = { minRounds: 3, maxRounds: 8, minEffect: 0.05, confidence: 0.95 };

test('worth verifying now: a 3× win even before the noise is measured; a 1.2× one only once it is known to be small', () => {
  assert.equal(worthVerifyingNow(0.33, null, SETTINGS), true);
  assert.equal(worthVerifyingNow(0.83, null, SETTINGS), false, `at the assumed ${ASSUMED_WINDOW_NOISE} noise`);
  assert.equal(worthVerifyingNow(0.83, 0.03, SETTINGS), true, 'with windows that vary by 3 %');
  assert.equal(worthVerifyingNow(0.97, 0.01, SETTINGS), false, 'under the minimum effect, whatever the noise');
  assert.equal(worthVerifyingNow(1.2, 0.01, SETTINGS), false);
  // The threshold moves with the noise: monotone.
  const threshold = (noise: number) => {
    let x = 1;
    while (x > 0.05 && !worthVerifyingNow(x, noise, SETTINGS)) x -= 0.005;
    return x;
  };
  assert.ok(
    threshold(0.05) > threshold(0.1) && threshold(0.1) > threshold(0.15),
    `${threshold(0.05)} ${threshold(0.1)} ${threshold(0.15)}`,
  );
});

test('a step is decided on the noise it could still be: a 10 % win is not one on the first three baseline windows, and is on forty', () => {
  // The chi-square bound at 80 %: about twice σ on 2 differences, a sixth more on 20.
  assert.ok(Math.abs(noiseUpperBound(0.02, 2, 0.8) / 0.02 - 2.117) < 0.01);
  assert.ok(Math.abs(noiseUpperBound(0.02, 20, 0.8) / 0.02 - 1.171) < 0.01);
  assert.ok(noiseUpperBound(0.02, 2, 0.8) > noiseUpperBound(0.02, 5, 0.8));
  const windows = (n: number) => Array.from({ length: n + 1 }, (_, i) => ({ at: i * 1000, runtimeMs: 10 * (i % 2 ? 1.01 : 0.99) }));
  const early = pooledWindowNoiseOf([windows(2)])!;
  const late = pooledWindowNoiseOf([windows(40)])!;
  assert.deepEqual([early.differences, late.differences], [2, 40]);
  assert.ok(Math.abs(early.sd - late.sd) < 1e-12, 'the same σ, about 1.4 %');
  assert.equal(worthVerifyingNow(0.9, early.sd, SETTINGS), true, 'on the measured σ alone it would be a step');
  assert.equal(
    worthVerifyingNow(0.9, stepNoise(early.sd, early.differences, 'explore'), SETTINGS),
    false,
    'σ on 2 differences may be twice that',
  );
  assert.equal(worthVerifyingNow(0.9, stepNoise(late.sd, late.differences, 'explore'), SETTINGS), true, 'on 40 it is known');
  assert.equal(worthVerifyingNow(0.33, stepNoise(early.sd, early.differences, 'explore'), SETTINGS), true, 'a 3× win goes at once');
});

test('before the noise is measured: a diagnosis 1.45× faster goes at once, any other trial only when about twice as fast', () => {
  // The settings the sessions take by default: 3-5 rounds.
  const settings = { ...SETTINGS, maxRounds: 5 };
  assert.equal(stepNoise(null, 0, 'diagnosis'), ASSUMED_WINDOW_NOISE);
  assert.equal(stepNoise(null, 0, 'heuristic'), UNARGUED_NOISE_FACTOR * ASSUMED_WINDOW_NOISE);
  assert.equal(worthVerifyingNow(0.65, stepNoise(null, 0, 'diagnosis'), settings), true, 'work-mem-like: a diagnosis at 0.65');
  // Single select-1 windows on a loaded machine (docs/benchmarks.md): no step.
  for (const noiseWindow of [0.62, 0.7]) assert.equal(worthVerifyingNow(noiseWindow, stepNoise(null, 0, 'explore'), settings), false);
  // index-join's pgtune trial (random_page_cost 1.1) at 0.41-0.45: a step.
  for (const pgtune of [0.41, 0.45]) assert.equal(worthVerifyingNow(pgtune, stepNoise(null, 0, 'heuristic'), settings), true);
  // Once the noise is measured, the kind no longer matters.
  assert.equal(stepNoise(0.03, 10, 'explore'), stepNoise(0.03, 10, 'diagnosis'));
});

test('the noise of one window pooled over epochs: a kept step’s jump adds nothing', () => {
  const run = (level: number, start: number, wiggles: number[]) => wiggles.map((w, i) => ({ at: start + i * 1000, runtimeMs: level * w }));
  const before = run(10, 0, [1, 1.05, 0.95, 1.02]);
  const after = run(3.3, 10_000, [1, 0.96, 1.04]);
  const pooled = pooledWindowNoise([before, after])!;
  const naive = windowNoise([...before, ...after])!;
  assert.ok(pooled < 0.06, `pooled ${pooled}`);
  assert.ok(naive > 0.3, `one run across the jump would read it as noise: ${naive}`);
  assert.equal(pooledWindowNoise([before]), windowNoise(before));
  assert.equal(pooledWindowNoise([before.slice(0, 2), after.slice(0, 1)]), null, 'too few differences');
});

const step = (n: number, keptAfter: number | null, estimate: number, outcome: SessionStep['outcome'] = 'kept'): SessionStep => ({
  n,
  iteration: keptAfter ?? 0,
  config: { work_mem: 16384 * n },
  rounds: 3,
  runtime: { estimate, low: estimate * 0.9, high: estimate * 1.1 },
  throughput: null,
  statements: [],
  outcome,
  note: null,
  keptAfter,
  at: '2026-01-01T00:00:00Z',
});

test('epochs and the chain: windows after a kept step are judged against it, on the first baseline’s scale', () => {
  const steps = [step(1, 5, 0.5), step(2, null, 0.5, 'not_verified'), step(3, 9, 0.8)];
  assert.deepEqual(
    [1, 5, 6, 9, 10].map((o) => epochOf({ steps }, o)),
    [0, 0, 1, 1, 2],
  );
  assert.equal(chainAt({ steps }, 0), 1);
  assert.equal(chainAt({ steps }, 1), 0.5);
  assert.ok(Math.abs(chainAt({ steps }, 2) - 0.4) < 1e-12);
  const chained = chainedInterval({ steps })!;
  assert.ok(Math.abs(chained.estimate - 0.4) < 1e-12 && chained.low < 0.4 && chained.high > 0.4);

  // A session: baseline windows at 10 ms in epoch 0, at 5 ms in epoch 1 (the step); a trial at
  // 4 ms in epoch 1 is 0.8 of the step, 0.4 of the first baseline.
  const t0 = Date.parse('2026-01-01T00:00:00Z');
  const window = (i: number) => ({ start: new Date(t0 + i * 10_000), end: new Date(t0 + i * 10_000 + 5_000), attempts: 0 });
  const it = (ordinal: number, kind: TuningIterationRecord['kind'], runtime: number): TuningIterationRecord =>
    ({
      ordinal,
      kind,
      phase: 'search',
      round: null,
      state: 'ok',
      window: window(ordinal),
      stats: { weightedRuntimeMs: runtime },
    }) as unknown as TuningIterationRecord;
  const session = {
    baselineWindow: window(0),
    baseline: { stats: { weightedRuntimeMs: 10 } },
    steps: [step(1, 3, 0.5)],
  } as unknown as TuningSessionRecord;
  const iterations = [
    it(1, 'baseline', 10.2),
    it(2, 'heuristic', 5),
    it(3, 'baseline', 9.8),
    it(4, 'baseline', 5),
    it(5, 'explore', 4),
    it(6, 'baseline', 5.1),
  ];
  const judged = judgeSession(session, iterations);
  assert.ok(Math.abs(judged.judged.get(2)!.objective - 0.5) < 0.02, `epoch 0: ${judged.judged.get(2)!.objective}`);
  assert.ok(Math.abs(judged.judged.get(5)!.objective - 0.4) < 0.02, `epoch 1, carried back: ${judged.judged.get(5)!.objective}`);
  assert.ok(judged.noise !== null && judged.noise < 0.05, `pooled within epochs: ${judged.noise}`);
  assert.ok(judged.drift !== null && Math.abs(judged.drift.total) < 0.1, `the drift on one scale: ${JSON.stringify(judged.drift)}`);
});

// A search that has nothing left to give ends early: the optimizer says what a next step may still
// gain (Prediction.possibleImprovement, the model's optimistic bound over the best so far), and the
// session (history.ts nothingLeft, used by the engine) stops once that stays under the minimum
// effect for 3 steps in a row. On a null workload that is well before a 30-trial budget; on one
// that keeps improving it is not.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createRng, createSpace, encode, suggest, type Observation, type Point } from '../src/optimizer/index.ts';
import { nothingLeft } from '../src/service/tuning/history.ts';
import type { TuningIterationRecord } from '../src/service/tuning/store.ts';
import { pg15Settings } from './helpers/pg15-settings.ts';
import { TARGETS } from '../src/agent/targets/registry.ts';

const space = createSpace({
  target: 'local',
  capabilities: TARGETS.capabilitiesOf('local'),
  mode: 'reload-only',
  machine: { memoryBytes: 16 * 1024 ** 3, vcpus: 4 },
  settings: pg15Settings(),
});
const BUDGET = 30;
const MIN_EFFECT = 0.05;
const NOISE = 0.08;

/** Trials until the session's rule stops the search (or the budget runs out), on `speed` with 8 % window noise. */
function search(seed: number, speed: (p: Point) => number, budget = BUDGET) {
  const rng = createRng('exhausted', seed);
  const history: Observation[] = [];
  const iterations: TuningIterationRecord[] = [];
  for (let i = 0; i < budget; i++) {
    const next = suggest({ space, history, seed, iteration: i });
    const promised = nothingLeft(iterations, next, MIN_EFFECT, 3);
    if (promised) return { trials: i, promised, history };
    const objective = speed(encode(space, next.config)) * Math.exp(NOISE * rng.normal());
    history.push({ config: next.config, objective, status: 'ok', noise: Math.SQRT2 * NOISE, kind: next.kind });
    iterations.push({ phase: 'search', kind: next.kind, state: 'ok', predicted: next.predicted ?? null } as TuningIterationRecord);
  }
  return { trials: budget, promised: null, history };
}

test('a null workload: the search stops well before its budget, each of its last 3 steps promising under the minimum effect', () => {
  const run = search(1, () => 1);
  console.log(`null workload: stopped after ${run.trials} of ${BUDGET} trials; promised ${JSON.stringify(run.promised)}`);
  assert.ok(run.trials < BUDGET, `ran the whole budget of ${BUDGET}`);
  assert.equal(run.promised!.length, 3);
  assert.ok(run.promised!.every((p) => p < MIN_EFFECT));
});

test('a workload that keeps improving with work_mem: the search goes on', () => {
  const wm = space.dimensions.findIndex((d) => d.name === 'work_mem');
  const run = search(2, (p) => Math.exp(-1.2 * Math.min(1, Math.max(0, ((p[wm] ?? 0) - 0.2) * 3))), 12);
  assert.equal(run.promised, null, `stopped after ${run.trials} trials`);
  const lowest = Math.min(...run.history.map((o) => o.objective!));
  assert.ok(lowest < 0.75, `it found a real gain: the best ${lowest}`);
});

// A session's windows read as the optimizer's history: which configuration the search's best is,
// and which one the session puts to its A/B verification.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { WindowStats } from '../src/measure/objective.ts';
import { createSpace, decode, encode } from '../src/optimizer/index.ts';
import { judgeSession, searchBest, searchRecommendation } from '../src/service/tuning/history.ts';
import type { TuningIterationKind, TuningIterationRecord, TuningSessionRecord } from '../src/service/tuning/store.ts';
import { pg15Settings } from './helpers/pg15-settings.ts';
import { TARGETS } from '../src/agent/targets/registry.ts';

const T0 = Date.parse('2026-11-25T10:00:00Z');
const space = createSpace({
  target: 'local',
  capabilities: TARGETS.capabilitiesOf('local'),
  mode: 'reload-only',
  machine: { memoryBytes: 16 * 1024 ** 3, vcpus: 4 },
  settings: pg15Settings(),
});

const stats = (weightedRuntimeMs: number): WindowStats => ({
  weightedRuntimeMs,
  coverage: 1,
  avgRuntimeMs: weightedRuntimeMs,
  calls: 1000,
  seconds: 10,
  tps: 100,
  rollbackRate: 0,
});
/** The 10 s window that starts `at` seconds after T0. */
const window = (at: number) => ({ start: new Date(T0 + at * 1000), end: new Date(T0 + (at + 10) * 1000), attempts: 1 });

const session: TuningSessionRecord = {
  id: 'session-1',
  databaseId: 'db-1',
  state: 'iterating',
  space: { target: 'local', mode: 'reload-only', machine: { memoryBytes: 16 * 1024 ** 3, vcpus: 4 }, settings: [] },
  createdById: null,
  createdBy: null,
  createdAt: new Date(T0),
  updatedAt: new Date(T0),
  endedAt: null,
  message: null,
  baselineWindow: window(0),
  baseline: { mix: { q1: 1 }, stats: stats(10), reports: 10, lowestMemoryShare: null, measuredAt: new Date(T0).toISOString() },
  best: null,
  verification: null,
  steps: [],
  windowNowSeconds: null,
  windowMinSeconds: 10,
  verifyEarly: true,
  planAware: false,
  finalCommandId: null,
  finalSentAt: null,
  mode: 'reload-only',
  iterations: 6,
  windowSeconds: 10,
  warmupSeconds: 0,
  abRoundsMin: 4,
  abRoundsMax: 8,
  minEffectPercent: 5,
  confidencePercent: 95,
  seed: 1,
  requireApproval: false,
  statementRegressions: 'approve',
};

let ordinal = 0;
function iteration(
  kind: TuningIterationKind,
  at: number,
  runtimeMs: number,
  config: Record<string, number | string> = {},
): TuningIterationRecord {
  ordinal++;
  return {
    sessionId: session.id,
    ordinal,
    kind,
    phase: 'search',
    round: null,
    config,
    reason: '',
    predicted: null,
    commandId: `command-${ordinal}`,
    state: 'ok',
    createdAt: new Date(T0 + at * 1000),
    sentAt: null,
    ackedAt: null,
    effective: null,
    window: window(at),
    objective: null,
    stats: stats(runtimeMs),
    reports: 10,
    failure: null,
    finishedAt: new Date(T0 + (at + 10) * 1000),
    plans: null,
  };
}

test("the session verifies the fewest changed knobs its windows cannot tell from the search's best", () => {
  const current = encode(space, {});
  /** The current settings with the first `k` numeric knobs moved by a fifth of their range. */
  const changing = (k: number): Record<string, number | string> => {
    const numeric = space.dimensions.flatMap((d, i) => (d.kind === 'numeric' ? [i] : [])).slice(0, k);
    return decode(
      space,
      current.map((u, i) => (numeric.includes(i) ? (u > 0.5 ? u - 0.2 : u + 0.2) : u)),
    );
  };
  const [five, one] = [changing(5), changing(1)];
  // Baselines of 10, 10.4 and 9.8 ms: about 4 % noise a window.
  const iterations = [
    iteration('heuristic', 20, 7.0, five),
    iteration('explore', 30, 7.3, one),
    iteration('explore', 40, 9.9, changing(2)),
    iteration('baseline', 50, 10.4),
    iteration('baseline', 60, 9.8),
  ];
  const judgement = judgeSession(session, iterations);
  assert.ok(judgement.noise !== null && judgement.noise > 0.02 && judgement.noise < 0.06, `noise ${judgement.noise}`);
  assert.deepEqual(searchBest(space, iterations, judgement)?.config, five);
  const recommended = searchRecommendation(space, iterations, judgement);
  assert.deepEqual(recommended?.config, one);
  assert.equal(recommended?.iteration, 2, 'the trial that measured it');

  // Quieter baselines tell 7.3 from 7.0: the best is the recommendation.
  const quiet = [...iterations.slice(0, 3), iteration('baseline', 50, 10.02), iteration('baseline', 60, 9.99)];
  assert.deepEqual(searchRecommendation(space, quiet, judgeSession(session, quiet))?.config, five);
});

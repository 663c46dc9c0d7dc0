// test-tier: slow
// The live search against random search on synthetic objectives with known optima over the real
// space: a simulation of 40 runs per problem and method (minutes of CPU, no server), so it runs in
// the whole suite, not in `npm run test:fast`.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {} from '../src/knobs/index.ts';
import {
  best,
  DEFAULT_FAILED_RADIUS,
  distance,
  encode,
  knownBest,
  MAX_MOVES,
  MIN_MOVE,
  movedKnobs,
  randomSuggest,
  recommend,
  suggest,
  type Config,
  type Observation,
  type SearchSpace,
  type Suggestion,
} from '../src/optimizer/index.ts';
import { createRng } from '../src/optimizer/random.ts';

import { M16, assertValid, space } from './helpers/search-space.ts';

interface Problem {
  readonly name: string;
  /** True objective at a normalized point (lower is better). */
  readonly f: (u: readonly number[]) => number;
  readonly optimum: number;
  /** Multiplicative measurement noise (log-normal sd). */
  readonly noise: number;
  readonly fails?: (u: readonly number[]) => boolean;
}

/** The four problems with their optimum at a random feasible configuration picked by `placement`. */
function problems(s: SearchSpace, placement: string): Problem[] {
  const index = (name: string) => s.dimensions.findIndex((d) => d.name === name);
  // A few knobs matter a lot, the rest a little, as in knob-ranking studies.
  const important = ['shared_buffers', 'work_mem', 'random_page_cost', 'max_wal_size', 'effective_io_concurrency'].map(index);
  // Where real headroom is: the current settings, badly wrong in three of the important knobs,
  // whose best values are random, so that pgtune's heuristic is no shortcut to them.
  const current = encode(s, {});
  const elsewhere = encode(s, randomSuggest({ space: s, history: [], seed: placement }).config);
  const rng = createRng('wrong knobs', placement);
  const pool = [...important];
  const wrong = Array.from({ length: 3 }, () => pool.splice(rng.int(pool.length), 1)[0] as number);
  const target = current.map((v, i) => (wrong.includes(i) ? (elsewhere[i] as number) : v));
  const bowl = (u: readonly number[], skip: readonly number[] = []) =>
    s.dimensions.reduce((sum, d, i) => {
      if (skip.includes(i)) return sum;
      const weight = important.includes(i) ? 1 : 0.01;
      const gap = d.kind === 'numeric' ? (u[i]! - target[i]!) ** 2 : Math.round(u[i]!) === Math.round(target[i]!) ? 0 : 0.25;
      return sum + weight * gap;
    }, 0);
  const [wm, gather, sb] = [index('work_mem'), index('max_parallel_workers_per_gather'), index('shared_buffers')];
  return [
    { name: 'bowl', f: (u) => 0.5 + bowl(u), optimum: 0.5, noise: 0 },
    // work_mem and parallel workers trade off: the optimum is a ridge (work_mem + ½ workers = 0.8).
    { name: 'interaction', f: (u) => 0.6 + 1.5 * (u[wm]! + 0.5 * u[gather]! - 0.8) ** 2 + bowl(u, [wm, gather]), optimum: 0.6, noise: 0 },
    { name: 'noisy', f: (u) => 0.5 + bowl(u), optimum: 0.5, noise: 0.05 },
    // Too much memory crashes: just beyond the optimum (or the current settings, which run) in
    // shared_buffers + work_mem.
    {
      name: 'failing',
      f: (u) => 0.5 + bowl(u),
      optimum: 0.5,
      noise: 0,
      fails: (u) => u[sb]! + u[wm]! > Math.max(target[sb]! + target[wm]!, current[sb]! + current[wm]!) + 0.15,
    },
  ];
}

interface Run {
  readonly regret: number;
  /** Σ over trials of how much slower than the baseline each ran (a failure counts 1). */
  readonly slowdown: number;
  readonly failures: number;
  readonly suggestions: readonly Suggestion[];
  readonly history: readonly Observation[];
}

function run(s: SearchSpace, p: Problem, method: 'bo' | 'random', seed: number, budget: number): Run {
  const history: Observation[] = [];
  const suggestions: Suggestion[] = [];
  const noise = createRng('noise', p.name, seed);
  const baseline = p.f(encode(s, {}));
  for (let iteration = 0; iteration < budget; iteration++) {
    const next = method === 'bo' ? suggest({ space: s, history, seed, iteration }) : randomSuggest({ space: s, history, seed, iteration });
    suggestions.push(next);
    const u = encode(s, next.config);
    // Objectives are relative to the current settings' (1.0), as the tuning session measures them.
    if (p.fails?.(u)) history.push({ config: next.config, objective: null, status: 'failed', kind: next.kind });
    else
      history.push({
        config: next.config,
        objective: (p.f(u) / baseline) * Math.exp(p.noise * noise.normal()),
        status: 'ok',
        kind: next.kind,
        // The session measures each window's noise from its baseline windows.
        ...(p.noise > 0 && { noise: p.noise }),
      });
  }
  const incumbent = best({ space: s, history });
  assert.ok(incumbent, `${p.name}: something measured`);
  return {
    regret: p.f(encode(s, incumbent.config)) - p.optimum,
    // What the trials cost the database's users: how much slower than the baseline each ran.
    slowdown: history.reduce((sum, o) => sum + (o.status === 'ok' ? Math.max(0, p.f(encode(s, o.config)) / baseline - 1) : 1), 0),
    failures: history.filter((o) => o.status === 'failed').length,
    suggestions,
    history,
  };
}

describe('the live search (diagnoses, pgtune, trust region) against random search', () => {
  const BUDGET = 25;
  // Outcomes are bimodal (a run finds the optimum, or its region settles around pgtune's step
  // with one knob still far off), so a mean over 10 runs per problem turns on one or two runs,
  // and at 20 a change elsewhere in the space (work_mem's floor, which moves the problems'
  // random optima) turned the failing problem from 0.219/0.232 to 0.219/0.215: 40 runs (20
  // seeds × 2 optima) compare the methods, not the seeds.
  const SEEDS = 20;
  const PLACEMENTS = ['optimum-a', 'optimum-b'];
  const s = space(M16, 'restart');

  test(`synthetic problems, ${BUDGET} measurements, ${SEEDS} seeds × ${PLACEMENTS.length} optima: BO's best beats random search's at a fraction of its users' cost`, (t) => {
    const mean = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
    const byProblem = new Map<string, { bo: Run[]; random: Run[]; fails: boolean }>();
    for (const placement of PLACEMENTS) {
      for (const p of problems(s, placement)) {
        const entry = byProblem.get(p.name) ?? { bo: [], random: [], fails: p.fails !== undefined };
        byProblem.set(p.name, entry);
        for (let seed = 0; seed < SEEDS; seed++) {
          entry.bo.push(run(s, p, 'bo', seed, BUDGET));
          entry.random.push(run(s, p, 'random', seed, BUDGET));
        }
      }
    }
    const lines: string[] = [];
    for (const [name, { bo, random, fails }] of byProblem) {
      for (const r of [...bo, ...random]) {
        for (const sug of r.suggestions) assertValid(s, sug.config);
        // The service's promise: once a configuration failed, nothing near it is proposed again.
        r.suggestions.forEach((sug, i) => {
          const point = encode(s, sug.config);
          for (const earlier of r.history.slice(0, i)) {
            if (earlier.status !== 'failed') continue;
            assert.ok(distance(s, point, encode(s, earlier.config)) >= DEFAULT_FAILED_RADIUS, `${name}: step ${i} is in a failed region`);
          }
        });
      }
      for (const r of bo) {
        assert.equal(r.suggestions[0]?.kind, 'heuristic');
        // A live step never moves more than a few knobs from the best configuration known to be
        // good (pgtune's one step aside, which a DBA would take as a whole), nor any by a trifle.
        r.suggestions.forEach((sug, i) => {
          if (sug.kind !== 'explore') return;
          const from = encode(s, knownBest(s, r.history.slice(0, i)));
          const to = encode(s, sug.config);
          assert.ok(movedKnobs(to, from) <= MAX_MOVES, `${name}: step ${i} moves too many knobs: ${sug.reason}`);
          // Nor a knob so little that the window's noise hides it (and restart mode restarts for it).
          const little = s.dimensions.filter((d, k) => {
            const moved = Math.abs((to[k] as number) - (from[k] as number));
            return moved > 1e-9 && moved < MIN_MOVE;
          });
          assert.deepEqual(
            little.map((d) => d.name),
            [],
            `${name}: step ${i} moves a knob too little: ${sug.reason}`,
          );
        });
      }
      const [boRegret, randomRegret] = [mean(bo.map((r) => r.regret)), mean(random.map((r) => r.regret))];
      const [boFailures, randomFailures] = [mean(bo.map((r) => r.failures)), mean(random.map((r) => r.failures))];
      const [boSlowdown, randomSlowdown] = [mean(bo.map((r) => r.slowdown)), mean(random.map((r) => r.slowdown))];
      lines.push(
        `${name.padEnd(12)} mean final regret: BO ${boRegret.toFixed(3)}, random ${randomRegret.toFixed(3)}; ` +
          `users' cost (Σ slowdown over trials): BO ${boSlowdown.toFixed(2)}, random ${randomSlowdown.toFixed(2)}` +
          (fails ? ` (failed measurements per run: BO ${boFailures.toFixed(1)}, random ${randomFailures.toFixed(1)})` : ''),
      );
      assert.ok(boRegret < randomRegret, `${name}: BO ${boRegret} vs random ${randomRegret}`);
      assert.ok(boSlowdown < randomSlowdown / 2, `${name}: the live search's trials cost ${boSlowdown}, random search's ${randomSlowdown}`);
      if (fails) assert.ok(boFailures < randomFailures / 2, `${name}: BO failed ${boFailures} times per run, random ${randomFailures}`);
    }
    t.diagnostic(lines.join('\n'));
  });

  test("when one knob holds the gain, the recommendation carries fewer changed knobs than the search's best, and is as good", (t) => {
    // read-heavy's shape: shared_buffers is the whole gain, every other knob nearly nothing, and
    // each window is 8 % noise, so the steps after the gain are judged by the noise.
    const sb = s.dimensions.findIndex((d) => d.name === 'shared_buffers');
    const current = encode(s, {});
    const f = (u: readonly number[]) =>
      0.75 +
      0.5 * Math.max(0, 0.7 - u[sb]!) ** 2 +
      s.dimensions.reduce((sum, d, i) => sum + (i === sb || d.kind !== 'numeric' ? 0 : 0.002 * (u[i]! - current[i]!) ** 2), 0);
    const NOISE = 0.08;
    const baseline = f(current);
    const changed = (c: Config) => movedKnobs(encode(s, c), current);
    const truth = (c: Config) => f(encode(s, c)) / baseline;
    const outcomes = Array.from({ length: 20 }, (_, seed) => {
      const noise = createRng('one knob', seed);
      const history: Observation[] = [];
      for (let iteration = 0; iteration < 15; iteration++) {
        const next = suggest({ space: s, history, seed, iteration });
        const objective = truth(next.config) * Math.exp(NOISE * noise.normal());
        history.push({ config: next.config, objective, status: 'ok', noise: NOISE, kind: next.kind });
      }
      const [top, chosen] = [best({ space: s, history })!, recommend({ space: s, history })!];
      return { knobs: [changed(top.config), changed(chosen.config)], truth: [truth(top.config), truth(chosen.config)] };
    });
    const mean = (pick: (o: (typeof outcomes)[number]) => number) => outcomes.reduce((a, o) => a + pick(o), 0) / outcomes.length;
    const [bestKnobs, recommendedKnobs] = [mean((o) => o.knobs[0]!), mean((o) => o.knobs[1]!)];
    const [bestTruth, recommendedTruth] = [mean((o) => o.truth[0]!), mean((o) => o.truth[1]!)];
    t.diagnostic(
      `knobs changed: best ${bestKnobs.toFixed(2)}, recommended ${recommendedKnobs.toFixed(2)}; true objective: best ${bestTruth.toFixed(3)}, recommended ${recommendedTruth.toFixed(3)}`,
    );
    assert.ok(recommendedKnobs < bestKnobs - 0.5, `knobs changed: best ${bestKnobs}, recommended ${recommendedKnobs}`);
    assert.ok(recommendedTruth <= bestTruth + 0.005, `true objective: best ${bestTruth}, recommended ${recommendedTruth}`);
  });
});

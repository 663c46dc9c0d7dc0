// The optimizer without a server: the search space built from the knob catalog, pgtune's
// formulas and the heuristic first suggestion, the agent's validator on every suggestion,
// re-measurement of the incumbent, failed regions, determinism, and Bayesian optimization
// (the live search against random search: optimizer-search.test.ts).
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { pg15Settings } from './helpers/pg15-settings.ts';
import { MANAGED_B_FLEX_KNOBS } from '../src/agent/targets/managed-b-flex/parameters.ts';
import { GiB, PAGE_BYTES, type Machine, type TargetKind } from '../src/knobs/index.ts';
import {
  best,
  createSpace,
  decode,
  encode,
  heuristicConfig,
  pgtune,
  randomSuggest,
  recommend,
  suggest,
  type Config,
  type Observation,
  type SearchSpace,
} from '../src/optimizer/index.ts';
import { fitGp } from '../src/optimizer/gp.ts';
import { featuresFor, trainingData } from '../src/optimizer/model.ts';
import { createRng } from '../src/optimizer/random.ts';

import { M1, M16, M64, assertValid, space } from './helpers/search-space.ts';
import { TARGETS } from '../src/agent/targets/registry.ts';

const dim = (s: SearchSpace, name: string) => {
  const d = s.dimensions.find((x) => x.name === name);
  assert.ok(d, `${name} is a dimension`);
  return d;
};
const numericDim = (s: SearchSpace, name: string) => {
  const d = dim(s, name);
  assert.equal(d.kind, 'numeric');
  return d;
};

describe('search space', () => {
  test('reload-only by default: restart knobs are left out, current settings give their values', () => {
    const s = createSpace({ target: 'local', capabilities: TARGETS.capabilitiesOf('local'), machine: M16, settings: pg15Settings() });
    assert.equal(s.mode, 'reload-only');
    const names = s.dimensions.map((d) => d.name);
    for (const restart of ['shared_buffers', 'wal_buffers', 'max_worker_processes']) assert.ok(!names.includes(restart), restart);
    assert.equal(names.length, 27);
    assert.equal(s.settings['max_connections']?.setting, '100');

    const restart = space(M16, 'restart');
    assert.equal(restart.dimensions.length, 30);
    assert.deepEqual(restart.excluded, []);

    // Cloud B cannot restart: restart mode is reload-only there, with the spec's 13 parameters.
    const managedBFlex = space(M16, 'restart', 'managed-b-flex');
    assert.equal(managedBFlex.mode, 'reload-only');
    assert.deepEqual(managedBFlex.dimensions.map((d) => d.name).sort(), [...MANAGED_B_FLEX_KNOBS].sort());
  });

  test('numeric knobs map to [0, 1]: log scale for sizes, pg units, integers rounded, reals to three digits', () => {
    const s = space(M16);
    const sb = numericDim(s, 'shared_buffers');
    assert.equal(sb.scale, 'log');
    assert.equal(sb.unit, '8kB');
    const at = (u: number, name: string) =>
      decode(
        s,
        s.dimensions.map((d) => (d.name === name ? u : 0)),
      )[name];
    assert.equal(at(0, 'shared_buffers'), sb.min);
    assert.equal(at(1, 'shared_buffers'), sb.max);
    // Halfway on a log scale is the geometric mean.
    assert.equal(at(0.5, 'shared_buffers'), Math.round(Math.sqrt(sb.min * sb.max)));
    const pw = numericDim(s, 'max_parallel_workers');
    assert.equal(pw.scale, 'linear');
    assert.equal(at(0.5, 'max_parallel_workers'), 2);
    assert.equal(at(0.123456, 'random_page_cost'), 2.11);
    // Categorical knobs by index.
    assert.deepEqual(dim(s, 'wal_compression'), {
      kind: 'categorical',
      name: 'wal_compression',
      type: 'enum',
      values: ['off', 'pglz', 'lz4', 'zstd'],
    });
    assert.equal(
      decode(
        s,
        s.dimensions.map((d) => (d.name === 'jit' ? 1 : 0)),
      )['jit'],
      'on',
    );

    // encode ∘ decode is the identity on configurations; values given with units are read as the agent reads them.
    const rng = createRng('roundtrip');
    for (let i = 0; i < 50; i++) {
      const config = decode(
        s,
        s.dimensions.map((d) => (d.kind === 'numeric' ? rng.next() : rng.int(d.values.length))),
      );
      assert.deepEqual(decode(s, encode(s, config)), config);
    }
    assert.deepEqual(encode(s, { work_mem: '64MB' }), encode(s, { work_mem: 65536 }));
    // Knobs a configuration does not set are at their current value.
    assert.equal(decode(s, encode(s, {}))['work_mem'], 4096);
  });

  test("bounds are the catalog's for the machine, narrowed by the server's own range and values", () => {
    const s = space(M64);
    assert.deepEqual([numericDim(s, 'max_parallel_workers').min, numericDim(s, 'max_parallel_workers').max], [0, 16]);
    assert.equal(numericDim(s, 'shared_buffers').max, Math.floor((0.4 * 64 * GiB) / PAGE_BYTES));
    const narrow = space(
      M16,
      'restart',
      'local',
      pg15Settings({
        effective_io_concurrency: { max_val: '0' },
        wal_compression: { enumvals: ['pglz', 'on', 'off'] },
        work_mem: { max_val: '1048576' },
      }),
    );
    assert.ok(!narrow.dimensions.some((d) => d.name === 'effective_io_concurrency'));
    assert.match(narrow.excluded.find((e) => e.name === 'effective_io_concurrency')?.reason ?? '', /do not overlap/);
    assert.deepEqual(dim(narrow, 'wal_compression'), {
      kind: 'categorical',
      name: 'wal_compression',
      type: 'enum',
      values: ['off', 'pglz'],
    });
    assert.equal(numericDim(narrow, 'work_mem').max, 1048576);
    // A server that needs a restart for a knob the catalog reloads: left out in reload-only mode.
    const strict = createSpace({
      target: 'local',
      capabilities: TARGETS.capabilitiesOf('local'),
      machine: M16,
      settings: pg15Settings({ work_mem: { context: 'postmaster' } }),
    });
    assert.match(strict.excluded.find((e) => e.name === 'work_mem')?.reason ?? '', /needs a restart/);
  });

  test('a knob the target will not write (read-only, not modifiable) is no dimension: excluded with the reason the agent gave', () => {
    const list = Object.values(pg15Settings()).map((r) =>
      r.name === 'work_mem' ? { ...r, unwritable: 'read-only on the flexible server x' } : r,
    );
    const s = createSpace({ target: 'local', capabilities: TARGETS.capabilitiesOf('local'), machine: M16, settings: list });
    assert.ok(!s.dimensions.some((d) => d.name === 'work_mem'));
    assert.deepEqual(s.excluded, [{ name: 'work_mem', reason: 'read-only on the flexible server x' }]);
    for (let seed = 0; seed < 5; seed++) assert.ok(!('work_mem' in suggest({ space: s, history: [], seed }).config));
  });

  test('settings as the agent reports them (a list, no range columns) are enough; missing constraint inputs are named', () => {
    const list = Object.values(pg15Settings()).map(({ name, setting, unit, context }) => ({ name, setting, unit, context }));
    const s = createSpace({
      target: 'local',
      capabilities: TARGETS.capabilitiesOf('local'),
      mode: 'restart',
      machine: M16,
      settings: list,
    });
    assert.equal(s.dimensions.length, 30);
    assertValid(s, randomSuggest({ space: s, history: [], seed: 1 }).config);
    const without = list.filter((r) => r.name !== 'max_connections' && r.name !== 'wal_segment_size');
    assert.throws(
      () => createSpace({ target: 'local', capabilities: TARGETS.capabilitiesOf('local'), machine: M16, settings: without }),
      /lack max_connections, wal_segment_size/,
    );
  });
});

describe('pgtune', () => {
  test("pgtune's formulas on three machines (mixed workload, SSD, 100 connections)", () => {
    assert.deepEqual(pgtune({ memoryBytes: 1 * GiB, vcpus: 1, maxConnections: 100 }), {
      shared_buffers: 32768, // 256 MB in 8 kB pages
      effective_cache_size: 98304, // 768 MB
      maintenance_work_mem: 65536, // 64 MB in kB
      checkpoint_completion_target: 0.9,
      wal_buffers: 983, // 3 % of 256 MB = 7864 kB
      default_statistics_target: 100,
      random_page_cost: 1.1,
      effective_io_concurrency: 200,
      work_mem: 1310, // (1 GB − 256 MB) / 300 / 1 / 2
      min_wal_size: 1024,
      max_wal_size: 4096,
    });
    assert.deepEqual(pgtune({ memoryBytes: 16 * GiB, vcpus: 4, maxConnections: 100 }), {
      shared_buffers: 524288,
      effective_cache_size: 1572864,
      maintenance_work_mem: 1048576,
      checkpoint_completion_target: 0.9,
      wal_buffers: 2048, // capped at 16 MB
      default_statistics_target: 100,
      random_page_cost: 1.1,
      effective_io_concurrency: 200,
      work_mem: 10485, // (16 GB − 4 GB) / 300 / 2 workers / 2
      min_wal_size: 1024,
      max_wal_size: 4096,
      max_worker_processes: 4,
      max_parallel_workers_per_gather: 2,
      max_parallel_workers: 4,
      max_parallel_maintenance_workers: 2,
    });
    const big = pgtune({ memoryBytes: 64 * GiB, vcpus: 16, maxConnections: 100 });
    assert.equal(big.maintenance_work_mem, 2 * 1024 * 1024); // capped at 2 GB
    assert.equal(big.max_parallel_workers_per_gather, 4); // at most 4 outside analytics
    assert.equal(big.max_parallel_maintenance_workers, 4);
    assert.equal(big.max_parallel_workers, 16);
    assert.equal(big.work_mem, 20971); // (64 GB − 16 GB) / 300 / 4 / 2
  });

  test('workload profiles and storage', () => {
    const oltp = pgtune({ memoryBytes: 16 * GiB, vcpus: 4, workload: 'oltp' });
    assert.equal(oltp.work_mem, 6990); // 300 connections: 12 GB / 900 / 2
    assert.deepEqual([oltp.min_wal_size, oltp.max_wal_size], [2048, 8192]);
    const dw = pgtune({ memoryBytes: 16 * GiB, vcpus: 16, workload: 'dw', storage: 'hdd' });
    assert.equal(dw.default_statistics_target, 500);
    assert.equal(dw.max_parallel_workers_per_gather, 8);
    assert.equal(dw.maintenance_work_mem, 2097152);
    assert.deepEqual([dw.random_page_cost, dw.effective_io_concurrency], [4, 2]);
    const desktop = pgtune({ memoryBytes: 16 * GiB, vcpus: 2, workload: 'desktop' });
    assert.equal(desktop.shared_buffers, (16 * GiB) / 16 / PAGE_BYTES);
    assert.equal(desktop.effective_cache_size, (16 * GiB) / 4 / PAGE_BYTES);
    assert.equal(pgtune({ memoryBytes: 256 * 1024 ** 2, vcpus: 1, maxConnections: 5000 }).work_mem, 64);
  });
});

describe('the heuristic first suggestion', () => {
  // Everything pgtune does not set stays at its current value (clipped to the bounds).
  const unchanged = {
    jit: 'on',
    jit_above_cost: 100000,
    hash_mem_multiplier: 2,
    commit_delay: 0,
    commit_siblings: 5,
    wal_writer_flush_after: 128,
    checkpoint_flush_after: 32,
    backend_flush_after: 0,
    wal_compression: 'off',
    seq_page_cost: 1,
    checkpoint_timeout: 300,
    wal_writer_delay: 200,
    bgwriter_delay: 200,
    bgwriter_lru_maxpages: 100,
    bgwriter_lru_multiplier: 2,
  };
  const pgtuned = {
    checkpoint_completion_target: 0.9,
    default_statistics_target: 100,
    random_page_cost: 1.1,
    effective_io_concurrency: 200,
    min_wal_size: 1024,
    max_wal_size: 4096,
  };

  test("is pgtune's recommendation within the bounds, for 1 GiB/1, 16 GiB/4 and 64 GiB/16", () => {
    const expected: Array<[Machine, Config]> = [
      [
        M1,
        {
          ...unchanged,
          ...pgtuned,
          shared_buffers: 32768,
          effective_cache_size: 98304,
          maintenance_work_mem: 65536,
          wal_buffers: 983,
          work_mem: 1310,
          // 1 vCPU: pgtune leaves parallelism alone; the current 8 and 2 are clipped to the machine.
          max_worker_processes: 8,
          max_parallel_workers: 2,
          max_parallel_workers_per_gather: 1,
          max_parallel_maintenance_workers: 1,
        },
      ],
      [
        M16,
        {
          ...unchanged,
          ...pgtuned,
          shared_buffers: 524288,
          effective_cache_size: 1572864,
          maintenance_work_mem: 1048576,
          wal_buffers: 2048,
          work_mem: 10485,
          max_worker_processes: 8, // pgtune's 4 is below the catalog's minimum of 8
          max_parallel_workers: 4,
          max_parallel_workers_per_gather: 2,
          max_parallel_maintenance_workers: 2,
        },
      ],
      [
        M64,
        {
          ...unchanged,
          ...pgtuned,
          shared_buffers: 2097152,
          effective_cache_size: 6291456,
          maintenance_work_mem: 2097152,
          wal_buffers: 2048,
          work_mem: 20971,
          max_worker_processes: 16,
          max_parallel_workers: 16,
          max_parallel_workers_per_gather: 4,
          max_parallel_maintenance_workers: 4,
        },
      ],
    ];
    for (const [machine, config] of expected) {
      const s = space(machine, 'restart');
      const first = suggest({ space: s, history: [], seed: 1 });
      assert.equal(first.kind, 'heuristic');
      assert.deepEqual(first.config, config, `${machine.memoryBytes / GiB} GiB`);
      assertValid(s, first.config);
    }
  });

  test("only the mode's knobs, and repaired into the constraints when pgtune's values do not fit", () => {
    const reload = space(M16, 'reload-only');
    const h = heuristicConfig(reload);
    assert.ok(h);
    assert.equal(h['shared_buffers'], undefined);
    assert.equal(h['work_mem'], 10485);
    assertValid(reload, h);

    // 10000 connections on 1 GiB: even the smallest work_mem the agent allows there (256 kB)
    // × 10000 with pgtune's shared_buffers is over the budget; the repair gives way on
    // per-connection memory first, then maintenance memory, then shared_buffers.
    const crowded = space(M1, 'restart', 'local', pg15Settings({ max_connections: { setting: '10000' } }));
    const c = heuristicConfig(crowded);
    assert.ok(c);
    assertValid(crowded, c);
    assert.equal(c['work_mem'], 256);
    assert.equal(c['maintenance_work_mem'], 16384);
    assert.ok((c['shared_buffers'] as number) < 32768);
  });
});

describe('every suggestion passes validateChange', () => {
  test('random suggestions on every target, mode and machine', () => {
    const targets: TargetKind[] = ['local', 'managed-a', 'managed-a-cluster', 'managed-b-flex'];
    const variants = [pg15Settings(), pg15Settings({ max_connections: { setting: '2000' }, max_worker_processes: { setting: '4' } })];
    let checked = 0;
    for (const target of targets) {
      for (const mode of ['reload-only', 'restart'] as const) {
        for (const machine of [M1, M16, M64, { memoryBytes: 4 * GiB, vcpus: 2, storage: 'hdd' as const, storageBytes: 20 * GiB }]) {
          for (const rows of variants) {
            const s = space(machine, mode, target, rows);
            for (let i = 0; i < 5; i++) {
              assertValid(s, randomSuggest({ space: s, history: [], seed: `${target}/${mode}/${i}` }).config);
              checked++;
            }
            const h = suggest({ space: s, history: [], seed: 1 });
            assertValid(s, h.config);
          }
        }
      }
    }
    assert.equal(checked, 320);
  });
});

describe('history and incumbent', () => {
  const s = space(M16, 'reload-only');
  const configs = Array.from({ length: 20 }, (_, i) => randomSuggest({ space: s, history: [], seed: `c${i}` }).config);
  const ok = (config: Config, objective: number): Observation => ({ config, objective, status: 'ok' });
  const failed = (config: Config): Observation => ({ config, objective: null, status: 'failed' });
  const heuristic = heuristicConfig(s) as Config;

  test('the incumbent is the lowest mean over its measurements, never a failed configuration', () => {
    assert.equal(best({ space: s, history: [] }), null);
    const history = [ok(configs[0]!, 0.8), ok(configs[1]!, 0.7), ok(configs[0]!, 0.6), failed(configs[2]!), ok(configs[1]!, 0.74)];
    const b = best({ space: s, history });
    assert.ok(b);
    assert.deepEqual(b.config, configs[0]);
    assert.equal(b.objective, 0.7);
    assert.equal(b.measurements, 2);
    // A configuration that failed once is no recommendation, whatever it measured before.
    assert.deepEqual(best({ space: s, history: [...history, failed(configs[0]!)] })?.config, configs[1]);
  });

  test("the recommendation: the fewest changed knobs the windows' noise cannot tell from the best, else the best", () => {
    const current = encode(s, {});
    const numeric = s.dimensions.flatMap((d, i) => (d.kind === 'numeric' ? [i] : []));
    /** The current settings with the first `k` numeric knobs moved. */
    const changing = (k: number, by = 0.2): Config =>
      decode(
        s,
        current.map((u, i) => (numeric.slice(0, k).includes(i) ? (u > 0.5 ? u - by : u + by) : u)),
      );
    const [five, one, another] = [changing(5), changing(1), changing(1, 0.3)];
    const measured = (noise?: number): Observation[] =>
      [ok(five, 0.7), ok(one, 0.74), ok(another, 0.98)].map((o) => ({ ...o, ...(noise !== undefined && { noise }) }));
    // 5 % noise a window: 0.74 against 0.70 is 0.8 standard errors of the difference, 0.98 is 4.8.
    assert.deepEqual(recommend({ space: s, history: measured(0.05) })?.config, one);
    assert.equal(recommend({ space: s, history: measured(0.05) })?.objective, 0.74);
    // 1 % noise tells them apart; without measured noise nothing says they are alike.
    assert.deepEqual(recommend({ space: s, history: measured(0.01) })?.config, five);
    assert.deepEqual(recommend({ space: s, history: measured() })?.config, five);
    // Within the noise but no faster than the baseline: no recommendation of its own.
    const slower = [ok(five, 0.97), ok(one, 1.02)].map((o) => ({ ...o, noise: 0.05 }));
    assert.deepEqual(recommend({ space: s, history: slower })?.config, five);
    // A configuration that failed once is none either.
    assert.deepEqual(recommend({ space: s, history: [...measured(0.05), failed(one)] })?.config, five);
    assert.equal(recommend({ space: s, history: [] }), null);
  });

  test('no re-measurement: after the heuristic every suggestion is a configuration not measured yet (the session verifies its best)', () => {
    let history: Observation[] = [ok(heuristic, 0.7)];
    for (let i = 0; i < 6; i++) {
      const next = suggest({ space: s, history, seed: 1 });
      assert.equal(next.kind, 'explore');
      assert.ok(!history.some((o) => JSON.stringify(o.config) === JSON.stringify(next.config)), 'nothing measured before');
      history = [...history, ok(next.config, 1 + i / 10)];
    }
  });

  test("measured noise levels replace the model's own; a history where only some have one is modelled as before", () => {
    const xs = configs.slice(0, 6).map((c) => encode(s, c));
    const features = featuresFor(s);
    const y = [0.1, -0.2, 0.05, 0.3, -0.1, 0.0];
    const rng = () => createRng('gp-noise');
    const fitted = fitGp(
      xs.map((p) => features.of(p)),
      y,
      features.groups,
      rng(),
    );
    const measured = fitGp(
      xs.map((p) => features.of(p)),
      y,
      features.groups,
      rng(),
      { noiseVariances: y.map(() => 0.2 ** 2) },
    );
    assert.ok(Math.abs(measured.noiseVariance - 0.04) < 1e-9, `${measured.noiseVariance}`);
    assert.notEqual(fitted.noiseVariance, measured.noiseVariance);
    const withNoise = configs.slice(0, 4).map((c, i): Observation => ({ config: c, objective: 0.9 + i / 20, status: 'ok', noise: 0.1 }));
    assert.deepEqual(
      trainingData(s, withNoise).measured.noiseVariances,
      withNoise.map(() => 0.1 ** 2),
    );
    assert.equal(trainingData(s, [...withNoise, ok(configs[5]!, 1)]).measured.noiseVariances, null);
  });

  test('a malformed history is refused with the entry named', () => {
    assert.throws(() => suggest({ space: s, history: [ok(heuristic, Number.NaN)], seed: 1 }), /history\[0\]\.objective/);
    assert.throws(
      () => suggest({ space: s, history: [{ config: heuristic, objective: 1, status: 'done' } as unknown as Observation], seed: 1 }),
      /history\[0\]\.status/,
    );
  });
});

describe('determinism', () => {
  test('same space, history and seed: same suggestion, also after a JSON round trip; another seed explores elsewhere', () => {
    const s = space(M16, 'restart');
    const rng = createRng('history');
    const history = Array.from({ length: 8 }, (_, i): Observation => {
      const config = randomSuggest({ space: s, history: [], seed: `h${i}` }).config;
      return i === 3 ? { config, objective: null, status: 'failed' } : { config, objective: 0.6 + rng.next(), status: 'ok' };
    });
    const withHeuristic: Observation[] = [
      { config: heuristicConfig(s) as Config, objective: 1.5, status: 'ok', kind: 'heuristic' },
      ...history,
    ];
    const a = suggest({ space: s, history: withHeuristic, seed: 42, iteration: 9 });
    assert.equal(a.kind, 'explore');
    assert.match(a.reason, /expected improvement/);
    const b = suggest({ space: s, history: withHeuristic, seed: 42, iteration: 9 });
    assert.deepEqual(b, a);
    const stored = JSON.parse(JSON.stringify({ space: s, history: withHeuristic })) as { space: SearchSpace; history: Observation[] };
    assert.deepEqual(suggest({ ...stored, seed: 42, iteration: 9 }), a);
    assert.notDeepEqual(suggest({ space: s, history: withHeuristic, seed: 43, iteration: 9 }).config, a.config);
    assert.deepEqual(randomSuggest({ space: s, history, seed: 5 }), randomSuggest({ space: s, history, seed: 5 }));
  });
});

// ---- synthetic objectives over the real search space ----

// The live search's first steps: what the baseline's statistics argue for (signals → diagnoses),
// each with its evidence in words, tried one at a time on top of the best so far, before pgtune
// and the trust region; and floors that keep the search from what already spills.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { pg15Settings } from './helpers/pg15-settings.ts';
import { MIX, syntheticReport } from './helpers/synthetic-reports.ts';
import { GiB, MiB, PAGE_BYTES, type Machine } from '../src/knobs/index.ts';
import {
  createRng,
  createSpace,
  diagnose,
  encode,
  knownBest,
  signalsOf,
  suggest,
  withFloors,
  type Observation,
  type WorkloadSignals,
} from '../src/optimizer/index.ts';
import { fitModel } from '../src/optimizer/bayes.ts';
import type { MetricsReport } from '../src/protocol/report.ts';
import { TARGETS } from '../src/agent/targets/registry.ts';

const M16: Machine = { memoryBytes: 16 * GiB, vcpus: 4 };
const reload = createSpace({
  target: 'local',
  capabilities: TARGETS.capabilitiesOf('local'),
  mode: 'reload-only',
  machine: M16,
  settings: pg15Settings(),
});
const restart = createSpace({
  target: 'local',
  capabilities: TARGETS.capabilitiesOf('local'),
  mode: 'restart',
  machine: M16,
  settings: pg15Settings(),
});

/** Nothing wrong: no temporary files, checkpoints by time, every block in the cache. */
const QUIET: WorkloadSignals = {
  seconds: 60,
  tempBytes: 0,
  spillers: [],
  checkpointsTimed: 0,
  checkpointsRequested: 0,
  walBytes: 10 * MiB,
  walFpi: 100,
  walRecords: 10_000,
  blksHit: 1_000_000,
  blksRead: 100,
};

/** A report query spilling 40 MB per call, 30 calls a minute. */
const SPILLING: WorkloadSignals = {
  ...QUIET,
  tempBytes: 30 * 40 * MiB,
  spillers: [{ queryId: '103', calls: 30, tempBytesPerCall: 40 * MiB }],
};

describe('signals from reports', () => {
  test('temporary files per statement, checkpoints, WAL and buffer figures, summed over the window', () => {
    const reports: MetricsReport[] = [0, 1].map((i) => {
      const r = syntheticReport(i * 30_000, 30, MIX, 20, 1);
      return {
        ...r,
        statements: {
          ...r.statements,
          top: r.statements.top.map((row) => (row.queryId === '103' ? { ...row, tempBlksWritten: row.calls * 512 } : row)),
        },
        database: { ...r.database, total: { ...r.database.total, tempBytes: 5 * MiB, blksHit: 900, blksRead: 100 } },
        checkpointer: {
          source: 'pg_stat_bgwriter',
          checkpointsTimed: 0,
          checkpointsRequested: 1,
          writeTimeMs: 0,
          syncTimeMs: 0,
          buffersCheckpoint: 0,
          buffersClean: 0,
          maxwrittenClean: 0,
          buffersAlloc: 0,
          buffersBackend: 0,
          buffersBackendFsync: 0,
        },
        wal: { records: 1000, fpi: 300, bytes: 64 * MiB, buffersFull: 0, write: 0, sync: 0, writeTimeMs: 0, syncTimeMs: 0 },
      };
    });
    const s = signalsOf(reports);
    assert.equal(s.seconds, 60);
    assert.equal(s.tempBytes, 10 * MiB);
    assert.deepEqual(
      s.spillers.map((x) => [x.queryId, x.tempBytesPerCall]),
      [['103', 512 * PAGE_BYTES]],
    );
    assert.equal(s.checkpointsRequested, 2);
    assert.deepEqual([s.walBytes, s.walFpi, s.walRecords], [128 * MiB, 600, 2000]);
    assert.deepEqual([s.blksHit, s.blksRead], [1800, 200]);
    // JIT figures: none in these reports' rows (agents before the field), so no figure at all.
    assert.equal(s.jitMs, null);
    const withJit = reports.map((r) => ({
      ...r,
      statements: {
        ...r.statements,
        top: r.statements.top.map((row) => ({ ...row, jitTimeMs: row.queryId === '103' ? 50 : 0 })),
        other: { ...r.statements.other, jitTimeMs: 0 },
      },
    }));
    const j = signalsOf(withJit);
    assert.deepEqual([j.jitMs, j.jitStatements], [100, 1]);
    assert.ok(j.execMs! > 0);
    // Without pg_stat_wal in one report (before PostgreSQL 14), no WAL figure at all.
    assert.equal(signalsOf([reports[0]!, { ...reports[1]!, wal: null }]).walBytes, null);
  });
});

describe('diagnoses', () => {
  test('a quiet database: nothing to argue for, nothing narrowed', () => {
    assert.deepEqual(diagnose(restart, QUIET), []);
    assert.equal(withFloors(restart, []), restart);
  });

  test('temporary files raise work_mem to hold the largest spill in memory, with the evidence in words, and set a floor', () => {
    const [d, ...rest] = diagnose(reload, SPILLING);
    assert.equal(rest.length, 0);
    assert.equal(d?.finding, 'temp-files');
    // 40 MB on disk is about twice that in memory: 128 MB (kB in pg_settings units).
    assert.deepEqual(d?.changes, { work_mem: 128 * 1024 });
    assert.equal(d?.reason, '1.17GB of temporary files per minute from 1 statement (the largest spills 40MB per call): work_mem 4MB→128MB');
    assert.deepEqual(d?.floors, { work_mem: 4096 });
    const floored = withFloors(reload, [d]);
    const dim = floored.dimensions.find((x) => x.name === 'work_mem');
    assert.equal(dim?.kind === 'numeric' && dim.min, 4096);
  });

  test('a little temporary space, or small spills, are noise: no diagnosis', () => {
    assert.deepEqual(diagnose(reload, { ...SPILLING, tempBytes: 1 * MiB }), []);
    assert.deepEqual(diagnose(reload, { ...SPILLING, spillers: [{ queryId: '103', calls: 3000, tempBytesPerCall: 100 * 1024 }] }), []);
  });

  test('JIT compilation that takes a tenth of the statements time or more turns jit off', () => {
    const [d] = diagnose(reload, { ...QUIET, execMs: 20_000, jitMs: 4_600, jitStatements: 3 });
    assert.equal(d?.finding, 'jit-compilation');
    assert.deepEqual(d?.changes, { jit: 'off' });
    assert.equal(d?.reason, "JIT compilation took 23 % of the statements' execution time (4.6 s of 20.0 s, 3 statements): jit on→off");
    assert.deepEqual(diagnose(reload, { ...QUIET, execMs: 20_000, jitMs: 1_000, jitStatements: 3 }), [], 'five per cent: left alone');
    assert.deepEqual(diagnose(reload, { ...QUIET, execMs: 20_000, jitMs: null }), [], 'no JIT figures (before 1.10)');
    const off = createSpace({
      target: 'local',
      capabilities: TARGETS.capabilitiesOf('local'),
      machine: M16,
      settings: pg15Settings({ jit: { setting: 'off' } }),
    });
    assert.deepEqual(diagnose(off, { ...QUIET, execMs: 20_000, jitMs: 4_600 }), [], 'already off');
  });

  test('checkpoints forced by WAL volume raise max_wal_size to two intervals of WAL', () => {
    // 20 MB/s: 6000 MB per 5-minute interval against max_wal_size 1 GB.
    const [d] = diagnose(reload, { ...QUIET, walBytes: 60 * 20 * MiB, checkpointsRequested: 3, walFpi: 4000 });
    assert.equal(d?.finding, 'wal-checkpoints');
    assert.deepEqual(d?.changes, { max_wal_size: 16384 });
    assert.match(
      d.reason,
      /^3 checkpoints forced by WAL volume in the baseline, 5.86GB of WAL per 5min checkpoint interval \(40 % of records full-page images\)/,
    );
    assert.match(d.reason, /max_wal_size 1GB→16GB$/);
    // WAL well within max_wal_size and no requested checkpoint: nothing.
    assert.deepEqual(diagnose(reload, { ...QUIET, walBytes: 60 * MiB }), []);
  });

  test('buffer misses on a small pool raise shared_buffers to a quarter of RAM, in restart mode only', () => {
    const misses = { ...QUIET, blksHit: 600_000, blksRead: 400_000 };
    const [d] = diagnose(restart, misses);
    assert.equal(d?.finding, 'buffer-misses');
    assert.deepEqual(d?.changes, { shared_buffers: (4 * GiB) / PAGE_BYTES });
    assert.match(
      d.reason,
      /^buffer cache hit ratio 60\.0 % with 6667 reads per second and shared_buffers 128MB: shared_buffers 128MB→4GB \(a restart\)$/,
    );
    assert.deepEqual(diagnose(reload, misses), [], 'reload-only: shared_buffers is no dimension');
  });
});

describe('the live search starts from the diagnoses', () => {
  const ok = (config: Observation['config'], objective: number, kind: Observation['kind']): Observation => ({
    config,
    objective,
    status: 'ok',
    kind,
  });
  const signals: WorkloadSignals = { ...SPILLING, walBytes: 60 * 20 * MiB, checkpointsRequested: 2 };

  test('each diagnosis once, on top of the best so far, then pgtune, then steps of a few knobs', () => {
    const first = suggest({ space: reload, history: [], seed: 1, signals });
    assert.equal(first.kind, 'diagnosis');
    // Only work_mem moved: every other knob keeps its current value, except one the agent's bounds
    // for this machine do not allow (8 parallel workers on 4 vCPUs), and the reason says so.
    assert.match(first.reason, /work_mem 4MB→128MB \(within the bounds for this machine also max_parallel_workers 8→4\)$/);
    const moved = reload.dimensions.filter((d, i) => encode(reload, first.config)[i] !== encode(reload, {})[i]).map((d) => d.name);
    assert.deepEqual(moved, ['work_mem']);

    // It helped: the next diagnosis goes on top of it.
    const second = suggest({ space: reload, history: [ok(first.config, 0.5, 'diagnosis')], seed: 1, signals });
    assert.equal(second.kind, 'diagnosis');
    assert.equal(second.config['work_mem'], 128 * 1024);
    assert.match(second.reason, /max_wal_size 1GB→16GB$/);

    // It did not help: the next one starts from the current settings again.
    const instead = suggest({ space: reload, history: [ok(first.config, 1.2, 'diagnosis')], seed: 1, signals });
    assert.equal(instead.config['work_mem'], 4096);
    assert.equal(instead.config['max_wal_size'], 16384);

    const history = [ok(first.config, 0.5, 'diagnosis'), ok(second.config, 0.45, 'diagnosis')];
    const third = suggest({ space: reload, history, seed: 1, signals });
    assert.equal(third.kind, 'heuristic');
    // pgtune's values, but work_mem and max_wal_size as the diagnoses measured them (work_mem
    // gives way a little to pgtune's maintenance_work_mem within the memory budget; pgtune's
    // own work_mem here would be about 10 MB).
    assert.ok(Number(third.config['work_mem']) > 64 * 1024, String(third.config['work_mem']));
    assert.equal(third.config['max_wal_size'], 16384);
    assert.equal(third.config['random_page_cost'], 1.1);

    const fourth = suggest({ space: reload, history: [...history, ok(third.config, 0.6, 'heuristic')], seed: 1, signals });
    assert.equal(fourth.kind, 'explore');
    // Never below the work_mem that spilled.
    assert.ok(Number(fourth.config['work_mem']) >= 4096);
    assert.match(fourth.reason, /→/, 'the reason names what it moves');
  });

  /** Knobs of the write path (WAL, checkpoints, flushes). */
  const WRITE_PATH = [
    'max_wal_size',
    'min_wal_size',
    'checkpoint_timeout',
    'checkpoint_completion_target',
    'wal_writer_delay',
    'wal_compression',
  ];
  /** Whether the step from `from` to `to` moves one of `names`. */
  const movesAny = (names: ReadonlySet<string>, from: Observation['config'], to: Observation['config']) => {
    const [a, b] = [encode(reload, from), encode(reload, to)];
    return reload.dimensions.some((d, i) => names.has(d.name) && Math.abs((a[i] as number) - (b[i] as number)) > 1e-9);
  };

  test('a workload that hardly writes: steps seldom move a knob of the write path (WAL, checkpoints, flushes)', () => {
    const writePath = new Set(WRITE_PATH);
    const share = (signals: WorkloadSignals) => {
      let moving = 0;
      const seeds = 40;
      for (let seed = 1; seed <= seeds; seed++) {
        // The diagnoses and pgtune first, each a little better; then the first step of the region.
        const history: Observation[] = [];
        let step = suggest({ space: reload, history, seed, signals });
        for (let objective = 0.9; step.kind !== 'explore'; objective -= 0.05) {
          history.push(ok(step.config, objective, step.kind));
          step = suggest({ space: reload, history, seed, signals });
        }
        if (movesAny(writePath, history.at(-1)!.config, step.config)) moving++;
      }
      return moving / seeds;
    };
    const readOnly = share({ ...QUIET, walBytes: 0, walFpi: 0, walRecords: 0 });
    const writing = share({ ...QUIET, walBytes: 60 * 20 * MiB });
    assert.ok(readOnly <= 0.15, `read-only: ${readOnly} of the steps moved a write-path knob`);
    assert.ok(writing >= 0.3, `writing 20 MB/s: ${writing} of the steps moved a write-path knob`);
  });

  test('over a whole search on a workload that writes nothing and compiles nothing, the model seldom spends a step on WAL, JIT or maintenance knobs', () => {
    const ruledOut = new Set([
      ...WRITE_PATH,
      'wal_writer_flush_after',
      'jit',
      'jit_above_cost',
      'maintenance_work_mem',
      'max_parallel_maintenance_workers',
    ]);
    const signals: WorkloadSignals = { ...SPILLING, walBytes: 0, walFpi: 0, walRecords: 0, execMs: 60_000, jitMs: 0, jitStatements: 0 };
    let steps = 0;
    let ruledOutSteps = 0;
    for (let seed = 1; seed <= 4; seed++) {
      const rng = createRng('noise', seed);
      const history: Observation[] = [];
      for (let i = 0; i < 12; i++) {
        const step = suggest({ space: reload, history, seed, iteration: i, signals });
        // Only work_mem matters: the report stops spilling from 64 MB; 5 % noise per window.
        const spills = Number(step.config['work_mem']) < 64 * 1024;
        history.push(ok(step.config, (spills ? 1 : 0.3) * Math.exp(0.05 * rng.normal()), step.kind));
        if (step.kind !== 'explore') continue;
        steps++;
        if (movesAny(ruledOut, knownBest(reload, history.slice(0, -1)), step.config)) ruledOutSteps++;
      }
    }
    assert.ok(steps >= 30, `${steps} steps of the region`);
    assert.ok(ruledOutSteps / steps <= 0.2, `${ruledOutSteps} of ${steps} steps moved a WAL, JIT or maintenance knob`);
  });

  test('the baseline is a measurement: after a gain from one knob, the model still knows the current settings score 1', () => {
    const rng = createRng('model', 1);
    const measured = (config: Observation['config'], objective: number) => ok(config, objective, 'explore');
    const history = [
      measured({ work_mem: 64 * 1024 }, 0.3),
      measured({ work_mem: 64 * 1024, random_page_cost: 2 }, 0.31),
      measured({ work_mem: 96 * 1024 }, 0.29),
    ];
    const model = fitModel(reload, history, rng);
    assert.ok(model);
    const atCurrent = Math.exp(model.gp.predict(model.features.of(encode(reload, {}))).mean);
    assert.ok(atCurrent > 0.7, `predicted ${atCurrent} at the current settings, measured 1 by definition`);
  });

  test('no signals: pgtune first, as before', () => {
    assert.equal(suggest({ space: reload, history: [], seed: 1 }).kind, 'heuristic');
  });
});

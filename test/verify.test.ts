// The measure's statistics as pure functions, on synthetic report streams with a seeded drifting,
// noisy load: interleaved baselines and the drift, the A/B verification and its interval, and
// the windows that cannot be trusted.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { callShares, contamination, CONTAMINATION, mixDistance, type WindowReport } from '../src/measure/contamination.ts';
import { baselineAt, drift, judge, windowNoise, type BaselinePoint } from '../src/measure/drift.ts';
import { queryMix, relativeObjective, windowStats, type QueryMix, type WindowStats } from '../src/measure/objective.ts';
import {
  describeVerdict,
  mixtureRho,
  pairedInterval,
  roundOrder,
  verdict,
  type RoundFigures,
  type Verdict,
  type VerifySettings,
} from '../src/measure/verify.ts';
import { MIX, driftingLoad, syntheticWindow, type Statement } from './helpers/synthetic-reports.ts';

const SETTINGS: VerifySettings = { minRounds: 3, maxRounds: 8, minEffect: 0.05, confidence: 0.95 };
/** A window noise for the stopping rule's cases: small enough that the rounds' own spread decides. */
const NOISE = 0.001;
/** The load gets 3 % faster every window (caches warming, traffic falling) and each window is noisy (8 %). */
const LOAD = { driftPerWindow: -0.03, noise: 0.08 };
const WINDOW_MS = 60_000;
const TRIALS = 10;
const BASELINE_EVERY = 3;

interface Window {
  at: number;
  stats: WindowStats;
  reports: WindowReport[];
}

interface Simulated {
  /** The old rule: every trial divided by the one baseline window at the start; it claims its best when below 1. */
  oldBest: number;
  verdict: Verdict;
  drift: number | null;
  noise: number | null;
}

/** A session on a drifting load: a baseline window, trials with a baseline every few, then A/B rounds on the best. */
function simulate(seed: number, trialFactor: number): Simulated {
  const load = driftingLoad(seed, LOAD);
  let index = 0;
  const measure = (configFactor: number, mix: QueryMix | null): Window => {
    const i = index++;
    const reports = syntheticWindow({
      startMs: i * WINDOW_MS,
      reports: 5,
      reportSeconds: 10,
      callsPerSecond: 20,
      factor: configFactor * load.factor(i),
    });
    const metrics = reports.map((r) => r.metrics);
    return { at: i * WINDOW_MS + 25_000, stats: windowStats(metrics, mix ?? queryMix(metrics)), reports };
  };
  const first = measure(1, null);
  const mix = queryMix(first.reports.map((r) => r.metrics));
  const reference = callShares(first.reports.map((r) => r.metrics));
  const point = (w: Window): BaselinePoint => ({ at: w.at, runtimeMs: w.stats.weightedRuntimeMs! });
  const baselines: BaselinePoint[] = [point(first)];
  const trials: Window[] = [];
  for (let k = 1; k <= TRIALS; k++) {
    const trial = measure(trialFactor, mix);
    assert.deepEqual(contamination({ reports: trial.reports, stats: trial.stats, reference }), [], 'a clean window');
    trials.push(trial);
    if (k % BASELINE_EVERY === 0 && k < TRIALS) baselines.push(point(measure(1, mix)));
  }
  const oldBest = Math.min(...trials.map((t) => relativeObjective(t.stats, first.stats)!));
  const noise = windowNoise(baselines);
  const judged = trials.map((t) => judge(point(t), baselines, noise)!.objective);
  assert.ok(judged.every((o) => o > 0));

  const rounds: RoundFigures[] = [];
  for (let r = 1; ; r++) {
    const figures: Partial<RoundFigures> = {};
    for (const role of roundOrder(r)) {
      const w = measure(role === 'candidate' ? trialFactor : 1, mix);
      figures[role] = { runtimeMs: w.stats.weightedRuntimeMs!, throughput: w.stats.calls / w.stats.seconds };
      if (role === 'baseline') baselines.push(point(w));
    }
    rounds.push(figures as RoundFigures);
    const v = verdict(rounds, SETTINGS, windowNoise(baselines));
    if (v.decision !== 'continue') return { oldBest, verdict: v, drift: drift(baselines)?.total ?? null, noise };
  }
}

const SEEDS = Array.from({ length: 20 }, (_, i) => 1000 + i);

test('a drifting load with no real effect: the single-baseline rule claims a gain, the verification claims none', () => {
  const runs = SEEDS.map((seed) => simulate(seed, 1));
  for (const run of runs) {
    assert.ok(run.oldBest < 0.9, `the old rule saw ${(100 * (1 - run.oldBest)).toFixed(0)} % "faster"`);
    assert.notEqual(run.verdict.decision, 'recommend', describeVerdict(run.verdict, 0.95));
    assert.ok(run.verdict.runtime!.low <= 1 && run.verdict.runtime!.high > 0.95, describeVerdict(run.verdict, 0.95));
    assert.ok(run.drift! < -0.1, `the drift is measured: ${run.drift}`);
    assert.ok(run.noise! > 0.04 && run.noise! < 0.2, `the noise of one window is measured near 8 %: ${run.noise}`);
  }
});

test('a real 20 % effect under the same drift and noise: recommended, with an interval that contains it', () => {
  const runs = SEEDS.map((seed) => simulate(seed, 0.8));
  const recommended = runs.filter((r) => r.verdict.decision === 'recommend');
  const covered = recommended.filter((r) => r.verdict.runtime!.low <= 0.8 && r.verdict.runtime!.high >= 0.8);
  // The price of looking after every round (a confidence sequence, wider than one fixed interval
  // at 8 rounds): 16 of these 20 clear the 5 % within 8 rounds, the other four only just miss it.
  assert.ok(recommended.length >= 15, `${recommended.length} of ${runs.length} recommended`);
  assert.ok(covered.length >= recommended.length - 1, `${covered.length} of ${recommended.length} intervals contain 0.8`);
  for (const r of recommended) assert.ok(r.verdict.rounds >= SETTINGS.minRounds && r.verdict.runtime!.high <= 0.95);
});

test('a mix shift inside a window marks it contaminated; sampling alone does not', () => {
  const first = syntheticWindow({ startMs: 0, reports: 5, reportSeconds: 10, callsPerSecond: 20, factor: 1 });
  const reference = callShares(first.map((r) => r.metrics));
  const mix = queryMix(first.map((r) => r.metrics));
  // From the third report on, a batch job's statement takes half the calls.
  const batch: Statement[] = [...MIX.map((s) => ({ ...s, share: s.share / 2 })), { id: '999', share: 0.5, ms: 3 }];
  const shifted = syntheticWindow({
    startMs: 60_000,
    reports: 5,
    reportSeconds: 10,
    callsPerSecond: 20,
    factor: 1,
    shift: { at: 2, statements: batch },
  });
  const stats = windowStats(
    shifted.map((r) => r.metrics),
    mix,
  );
  const found = contamination({ reports: shifted, stats, reference });
  assert.deepEqual(
    found.map((c) => c.code),
    ['mix_shift'],
    JSON.stringify(found),
  );
  assert.match(found[0]!.message, /Jensen-Shannon distance 0\.\d\d, over 0\.25/);

  // The same mix: clean. Many statements with few calls each differ by sampling alone: clean too.
  const same = syntheticWindow({ startMs: 120_000, reports: 5, reportSeconds: 10, callsPerSecond: 20, factor: 1.3 });
  assert.deepEqual(
    contamination({
      reports: same,
      stats: windowStats(
        same.map((r) => r.metrics),
        mix,
      ),
      reference,
    }),
    [],
  );
  const many: Statement[] = Array.from({ length: 100 }, (_, i) => ({ id: String(i), share: 0.01, ms: 1 }));
  const a = callShares(
    syntheticWindow({ startMs: 0, reports: 2, reportSeconds: 10, callsPerSecond: 30, factor: 1, statements: many }).map((r) => r.metrics),
  );
  const jittered = many.map((s, i) => ({ ...s, share: i % 2 ? 0.013 : 0.007 }));
  const b = callShares(
    syntheticWindow({ startMs: 0, reports: 2, reportSeconds: 10, callsPerSecond: 30, factor: 1, statements: jittered }).map(
      (r) => r.metrics,
    ),
  );
  assert.ok(mixDistance(a, b) < CONTAMINATION.maxMixDistance, `sampling noise: ${mixDistance(a, b)}`);
  assert.equal(mixDistance(reference, reference), 0);
});

test('too few calls, a statistics reset, a reconnect, lost reports and a restart are contamination', () => {
  const base = syntheticWindow({ startMs: 0, reports: 4, reportSeconds: 10, callsPerSecond: 20, factor: 1 });
  const mix = queryMix(base.map((r) => r.metrics));
  const reference = callShares(base.map((r) => r.metrics));
  const codes = (reports: WindowReport[]) =>
    contamination({
      reports,
      stats: windowStats(
        reports.map((r) => r.metrics),
        mix,
      ),
      reference,
    }).map((c) => c.code);
  const window = () => syntheticWindow({ startMs: 100_000, reports: 4, reportSeconds: 10, callsPerSecond: 20, factor: 1 });

  assert.deepEqual(codes([]), ['no_reports']);
  assert.deepEqual(codes(syntheticWindow({ startMs: 0, reports: 2, reportSeconds: 1, callsPerSecond: 5, factor: 1 })), ['few_calls']);
  const reset = window();
  reset[2]!.metrics.evictions.statsReset = true;
  assert.deepEqual(codes(reset), ['stats_reset']);
  const restarted = window();
  restarted[1]!.metrics.interval.serverRestarted = true;
  assert.deepEqual(codes(restarted), ['server_restart']);
  const reconnected = window();
  reconnected[2] = { ...reconnected[2]!, leaseId: 'lease-2', seq: 0 };
  reconnected[3] = { ...reconnected[3]!, leaseId: 'lease-2', seq: 1 };
  assert.deepEqual(codes(reconnected), ['agent_reconnect']);
  const gap = window()
    .filter((_, i) => i !== 2)
    .map((r, i) => ({ ...r, seq: i }));
  assert.deepEqual(codes(gap), ['report_gap']);
  const other = syntheticWindow({
    startMs: 0,
    reports: 4,
    reportSeconds: 10,
    callsPerSecond: 20,
    factor: 1,
    statements: [{ id: '500', share: 1, ms: 1 }],
  });
  assert.deepEqual(codes(other), ['low_coverage', 'mix_shift']);
  // The first baseline window has no reference: only what the window itself shows.
  assert.deepEqual(
    contamination({
      reports: other,
      stats: windowStats(
        other.map((r) => r.metrics),
        {},
      ),
      reference: null,
    }),
    [],
  );
});

test('the baseline between windows, the drift and the noise', () => {
  const b: BaselinePoint[] = [
    { at: 0, runtimeMs: 10 },
    { at: 3_600_000, runtimeMs: 12.1 },
    { at: 7_200_000, runtimeMs: 14.641 },
  ];
  assert.equal(baselineAt(b, -5)!.logRuntime, Math.log(10));
  assert.ok(Math.abs(baselineAt(b, 1_800_000)!.logRuntime - Math.log(11)) < 1e-3, 'geometric between neighbours');
  assert.deepEqual(baselineAt(b, 1_800_000)!.weights, [0.5, 0.5]);
  assert.equal(baselineAt(b, 9e9)!.logRuntime, Math.log(14.641));
  assert.equal(baselineAt([], 0), null);
  const d = drift(b)!;
  assert.ok(Math.abs(d.perHour - 0.21) < 1e-9 && Math.abs(d.total - 0.4641) < 1e-9, JSON.stringify(d));
  assert.ok(Math.abs(windowNoise(b)! - Math.log(1.21) / Math.SQRT2) < 1e-9, 'steady growth counts as noise between neighbours');
  assert.equal(windowNoise(b.slice(0, 2)), null, 'two windows are too few');
  const judged = judge({ at: 1_800_000, runtimeMs: 8.8 }, b, 0.1)!;
  assert.ok(Math.abs(judged.objective - 0.8) < 1e-3);
  assert.ok(Math.abs(judged.sd! - 0.1 * Math.sqrt(1.5)) < 1e-12, "the trial's noise and half of each neighbour's");
  assert.equal(judge({ at: 0, runtimeMs: 8 }, b, null)!.sd, null);
});

test('the paired t interval, the round order and the stopping rule', () => {
  assert.deepEqual(roundOrder(1), ['baseline', 'candidate']);
  assert.deepEqual(roundOrder(2), ['candidate', 'baseline']);
  assert.equal(pairedInterval([Math.log(0.8)], 0.95), null, 'one round has no spread');
  const i = pairedInterval([Math.log(0.7), Math.log(0.8), Math.log(0.9)], 0.95)!;
  const mean = (Math.log(0.7) + Math.log(0.8) + Math.log(0.9)) / 3;
  const sd = Math.sqrt([0.7, 0.8, 0.9].reduce((s, x) => s + (Math.log(x) - mean) ** 2, 0) / 2);
  assert.ok(Math.abs(Math.log(i.high) - mean - 4.302652729 * (sd / Math.sqrt(3))) < 1e-6, 't(0.975, 2 dof) = 4.3027');
  assert.ok(Math.abs(i.estimate - Math.exp(mean)) < 1e-12);
  const round = (candidate: number, baseline = 10): RoundFigures => ({
    baseline: { runtimeMs: baseline, throughput: 100 },
    candidate: { runtimeMs: candidate, throughput: 100 },
  });
  const clear = [round(5), round(5.1), round(4.9)];
  assert.equal(verdict(clear.slice(0, 2), SETTINGS, NOISE).decision, 'continue', 'not before the minimum rounds');
  assert.equal(verdict(clear, SETTINGS, NOISE).decision, 'recommend');
  assert.deepEqual(
    [verdict(clear, SETTINGS, null).decision, verdict(clear, SETTINGS, null).runtime],
    ['continue', null],
    'no interval before the noise of one window is measured',
  );
  assert.equal(
    verdict([...clear, ...clear, ...clear], SETTINGS, null).why,
    'the rounds ran out (the noise of one window is not measured yet)',
  );
  assert.equal(
    verdict([round(10.5), round(10.4), round(10.6)], SETTINGS, NOISE).decision,
    'no_significant_improvement',
    'the minimum effect is out of reach',
  );
  assert.equal(verdict([round(6), round(10), round(7.5)], SETTINGS, NOISE).decision, 'continue', 'too wide but promising: another round');
  // Too wide, and its trend leaves the rounds left little chance: a futility stop.
  const hopeless = verdict([round(8), round(11), round(9.5)], SETTINGS, NOISE);
  assert.equal(hopeless.decision, 'no_significant_improvement');
  assert.match(
    hopeless.why,
    /^at the trend of its rounds, the 5 rounds left would clear a gain of 5 % with a chance of \d+\.\d %, under 10 %$/,
  );
  assert.equal(verdict([round(8), round(11), round(9.5)], SETTINGS, NOISE, { futility: false }).decision, 'continue');
  assert.equal(
    verdict(
      Array.from({ length: 8 }, (_, k) => round(k % 2 ? 8 : 11)),
      SETTINGS,
      NOISE,
    ).decision,
    'no_significant_improvement',
    'the rounds ran out',
  );
  assert.equal(
    verdict([round(9.6), round(9.6), round(9.6)], SETTINGS, NOISE).decision,
    'no_significant_improvement',
    '4 % is under the minimum effect of 5 %',
  );
  const slower = clear.map((r) => ({ baseline: r.baseline, candidate: { ...r.candidate, throughput: 60 } }));
  assert.deepEqual(
    [verdict(slower, SETTINGS, NOISE).decision, verdict(slower, SETTINGS, NOISE).why],
    ['no_significant_improvement', 'its throughput fell by more than 20 % over the whole interval'],
  );
  assert.equal(verdict(clear, SETTINGS, NOISE).why, 'the whole runtime interval is a gain of at least 5 %');
  // Three rounds that agree by chance do not make an interval narrower than the windows' noise allows.
  const lucky = [round(5), round(5.001), round(4.999)];
  const narrow = verdict(lucky, SETTINGS, NOISE).runtime!;
  const floored = verdict(lucky, SETTINGS, 0.1).runtime!;
  assert.ok(narrow.high / narrow.low < 1.01, 'the rounds alone: a sliver');
  // The normal mixture's boundary at n = 3 with s = √2 σ and ρ tightest at 3 rounds: V = 3 s².
  const s2 = 2 * 0.1 ** 2;
  const rho = mixtureRho(Math.SQRT2 * 0.1, 3, 0.05);
  assert.ok(Math.abs(rho / (3 * s2) - 0.122) < 0.001, `ρ ≈ 0.122 n s²: ${rho / (3 * s2)}`);
  const boundary = Math.sqrt((3 * s2 + rho) * Math.log((3 * s2 + rho) / (rho * 0.05 ** 2))) / 3;
  assert.ok(Math.abs(Math.log(floored.high / floored.estimate) - boundary) < 1e-9, 'floored at √2 σ');
  assert.ok(
    boundary < (4.302652729 * (Math.SQRT2 * 0.1)) / Math.sqrt(3),
    "at 3 rounds narrower than the t interval's 2 degrees of freedom",
  );
  assert.match(
    describeVerdict(verdict(clear, SETTINGS, NOISE), 0.95),
    /^runtime −50 % \(95 % CI −5\d % to −4\d %\), throughput \(statements\/s\) ±0\.0 % \(95 % CI −0\.\d % to \+0\.\d %\), 3 A\/B rounds$/,
  );
});

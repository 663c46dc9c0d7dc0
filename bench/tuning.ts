// bench/tuning: does our tuner find the headroom a workload has, as well as the alternatives, in
// few iterations, at little cost to the database's users? In one run, against throwaway
// clusters and the same load for each, with the same budget:
//   defaults   the configuration the cluster starts with
//   pgtune     pgtune's published formulas (src/optimizer/pgtune.ts), for the knobs of the mode
//   random     random search (every knob at once: an offline method, never used on a live database)
//   tuner      our live search: diagnoses from the baseline's statistics, pgtune, then a trust region
//   oracle     the best configuration a long search found (bench/oracles/<workload>.json, made
//              with --oracle), when there is one
// on the lab workloads with headroom (src/lab/workloads.ts) and a control where nothing matters.
// Each configuration is applied through the agent's own apply path (catalog checks, journal,
// read-back). Every figure printed is verified: the final configurations are re-measured in
// interleaved rounds against the defaults (each round in a rotating order), and each gain is the
// paired interval of those rounds (src/measure/verify.ts). Ratios only; nothing here asserts a speed.
//
//   node bench/tuning.ts            full run (about 20 minutes a workload on 2 cores)
//   node bench/tuning.ts --short    CI's short mode: tiny budget, proves the harness end to end
//   --workload NAME                 one workload (work-mem, jit, index-join, read-heavy, tpcc-like, write-heavy, tpcb-like, select-1;
//                                   also trade-off, which is not in the full run: it is judged by its statements)
//   --oracle                        also run the long search and write its best to bench/oracles/
//   --window S, --warmup S          each measurement's window and warm-up (default 15 s and 4 s)
//   --rounds N                      interleaved verification rounds (default 4; more narrow the
//                                   intervals where the windows vary, at one window per contender)
//   --open-loop SHARE               drive the load at SHARE (0-1] of the defaults' throughput
//                                   (pgbench --rate) instead of closed-loop; latency is the figure
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { applyChange, restore, type ApplyContext } from '../src/agent/applying/apply.ts';
import { buildMetricsReport, createCollector, diffSnapshots } from '../src/agent/collect/index.ts';
import { loadConfig } from '../src/agent/config/load.ts';
import { connectDb, type Db } from '../src/agent/database/db.ts';
import { Journal } from '../src/agent/applying/journal.ts';
import { createLogger } from '../src/agent/base/log.ts';
import { readSettings } from '../src/agent/database/settings.ts';
import { localGrantsSql } from '../src/agent/targets/local/permissions.ts';
import { createLocalTarget } from '../src/agent/targets/local/target.ts';
import { startCluster, type Cluster } from '../src/lab/cluster.ts';
import { pgbench, type PgbenchResult } from '../src/lab/pgbench.ts';
import { workloadByName, type Workload } from '../src/lab/workloads.ts';
import { queryMix, windowStats, type QueryMix, type WindowStats } from '../src/measure/objective.ts';
import { fixedVerdict, pairedInterval, type Interval, type RoundFigures } from '../src/measure/verify.ts';
import {
  best,
  createSpace,
  pgtune,
  randomSuggest,
  recommend,
  signalsOf,
  suggest,
  type Config,
  type History,
  type Observation,
  type SearchSpace,
  type Suggestion,
  type WorkloadSignals,
} from '../src/optimizer/index.ts';
import { clipNumber } from '../src/optimizer/space.ts';
import type { MetricsReport } from '../src/protocol/report.ts';
import { configDiff } from '../src/service/tuning/space.ts';
import { TARGETS } from '../src/agent/targets/registry.ts';

const FLAGS = {
  short: { type: 'boolean' },
  workload: { type: 'string' },
  oracle: { type: 'boolean' },
  window: { type: 'string' },
  warmup: { type: 'string' },
  rounds: { type: 'string' },
  'open-loop': { type: 'string' },
} as const;

/** A bad flag: its message, no stack, exit status 2. */
function usage(message: string): never {
  console.error(`bench/tuning: ${message}`);
  process.exit(2);
}

const { values: flags } = (() => {
  try {
    return parseArgs({ options: FLAGS });
  } catch (error) {
    return usage((error as Error).message);
  }
})();
const SHORT = flags.short === true;
/** A whole number of seconds from a flag, or a clear error naming it. */
function seconds(flag: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (!/^[1-9]\d*$/.test(value)) usage(`--${flag} ${value}: expected a whole number of seconds, at least 1`);
  return Number(value);
}
/** Open loop: transactions arrive at this share of the defaults' closed-loop throughput
 * (`pgbench --rate`), as production load does; the users' latency is then the figure to watch. */
const OPEN_LOOP = (() => {
  const value = flags['open-loop'];
  if (value === undefined) return null;
  const share = Number(value);
  if (!(share > 0 && share <= 1)) usage(`--open-loop ${value}: expected a share of the defaults' throughput, above 0 and at most 1`);
  return share;
})();
const DEFAULT_PLAN = SHORT
  ? { warmupSeconds: 1, windowSeconds: 3, noiseWindows: 2, budget: 3, oracleBudget: 4, rounds: 2, workloads: ['work-mem', 'select-1'] }
  : {
      warmupSeconds: 4,
      windowSeconds: 15,
      noiseWindows: 4,
      budget: 15,
      oracleBudget: 60,
      rounds: 4,
      workloads: ['work-mem', 'jit', 'index-join', 'read-heavy', 'tpcc-like', 'write-heavy', 'tpcb-like', 'select-1'],
    };
/** The session's rule for a recommendation: the whole interval clears a 5 % gain. */
const VERIFY = { minRounds: 2, maxRounds: 50, minEffect: 0.05, confidence: 0.95 };
/** Verification rounds, within what the session's rule accepts. */
const ROUNDS = (() => {
  const value = flags.rounds;
  if (value === undefined) return undefined;
  const rounds = /^\d+$/.test(value) ? Number(value) : NaN;
  if (!(rounds >= VERIFY.minRounds && rounds <= VERIFY.maxRounds))
    usage(`--rounds ${value}: expected a whole number of rounds from ${VERIFY.minRounds} to ${VERIFY.maxRounds}`);
  return rounds;
})();
/** Shorter windows suit a workload whose windows vary little (the cv the run prints first). */
const PLAN = {
  ...DEFAULT_PLAN,
  windowSeconds: seconds('window', flags.window) ?? DEFAULT_PLAN.windowSeconds,
  warmupSeconds: seconds('warmup', flags.warmup) ?? DEFAULT_PLAN.warmupSeconds,
  rounds: ROUNDS ?? DEFAULT_PLAN.rounds,
};
/** A baseline window after this many trials, as the tuning session does: each trial is judged
 * against the baseline measured nearest before it. */
const BASELINE_EVERY = 3;
const SEED = 20261125;
const ORACLES = join(import.meta.dirname, 'oracles');

interface Measured {
  stats: WindowStats;
  pgbench: PgbenchResult;
  reports: MetricsReport[];
}

interface Harness {
  cluster: Cluster;
  db: Db;
  ctx: ApplyContext;
  workload: Workload;
  space: SearchSpace;
  script: string;
  /** CPUs for the server and for the load generator, when pinned. */
  pin: { server: string; load: string } | null;
  mix: QueryMix | null;
  /** Transactions per second over all clients when the load is open-loop. */
  rate: number | null;
  /** Each window starts right after a checkpoint. */
  aligned: boolean;
  /** pg_prewarm loads the tables after each restart (restart mode, where the server has it). */
  prewarm: boolean;
  /** The sd of a trial's log objective (its window against one baseline window), from the
   * defaults' windows, as the session measures it: the model's noise and `recommend`'s. */
  noise: number | null;
}

const fmt = (x: number | null | undefined, digits = 3) => (x === null || x === undefined || !Number.isFinite(x) ? '—' : x.toFixed(digits));
const mean = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0) / xs.length;
/** Coefficient of variation of window-to-window figures. */
const cv = (xs: readonly number[]) => {
  const m = mean(xs);
  return xs.length < 2 || m === 0 ? NaN : Math.sqrt(xs.reduce((s, x) => s + (x - m) ** 2, 0) / (xs.length - 1)) / m;
};
const percent = (ratio: number) => `${ratio <= 1 ? '−' : '+'}${fmt(Math.abs(ratio - 1) * 100, 0)} %`;
const describeInterval = (i: Interval | null) => (i ? `${percent(i.estimate)} (95 % CI ${percent(i.low)} to ${percent(i.high)})` : '—');

/** The postmaster's pid, from its pid file. */
function postmasterPid(cluster: Cluster): string {
  return readFileSync(join(cluster.dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]!.trim();
}

const CPUS = availableParallelism();

/** Pins the server's processes (the postmaster, so every backend forked from now on, and its
 * background processes) to `cpus`, or frees them. */
function pinServer(cluster: Cluster, cpus: string | null): void {
  const pid = postmasterPid(cluster);
  const children = execFileSync('ps', ['--ppid', pid, '-o', 'pid='])
    .toString()
    .split('\n')
    .map((s) => s.trim())
    .filter(Boolean);
  for (const p of [pid, ...children]) {
    try {
      execFileSync('taskset', ['-p', '-c', cpus ?? `0-${CPUS - 1}`, p], { stdio: 'ignore' });
    } catch {
      // A backend that ended meanwhile.
    }
  }
}

/**
 * After a restart, reads the workload's tables and indexes into the buffer cache (pg_prewarm), so
 * that each window measures the steady state a running database is in, not the minutes after a
 * restart. Without it a large shared_buffers is measured while it fills: read-heavy's 600 MB at
 * 9,000 lookups a second take over a minute to load by chance reads, longer than warm-up and
 * window together, and the diagnosis' 5.89 GB measured 11 % slower than the defaults in a
 * slow hour, 32 % faster in a quicker one. A pool smaller than the data keeps what was read last,
 * and the warm-up turns it over to the workload's own.
 */
async function prewarm(h: Harness): Promise<void> {
  if (!h.prewarm) return;
  await h.cluster.sql(
    `SELECT sum(pg_prewarm(c.oid)) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = 'public' AND c.relkind IN ('r', 'i', 'm')`,
  );
}

/**
 * Warm up, then measure one window: pgbench's own figures and the agent's statistics. In restart
 * mode every measurement starts from a restart, the defaults' too: a configuration that needed
 * one would otherwise be measured on cold buffers against a baseline measured on warm ones.
 */
async function measure(h: Harness): Promise<Measured> {
  if (h.workload.mode === 'restart') {
    await h.cluster.restart();
    await prewarm(h);
  }
  if (h.aligned) await h.cluster.sql('CHECKPOINT');
  pinServer(h.cluster, h.pin?.server ?? null);
  const run = (seconds: number) =>
    pgbench(
      h.cluster,
      [
        '-n',
        '-f',
        h.script,
        ...Object.entries(h.workload.variables ?? {}).flatMap(([name, value]) => ['-D', `${name}=${value}`]),
        '-T',
        String(seconds),
        '-c',
        String(h.workload.clients),
        '-j',
        String(Math.min(h.workload.clients, 2)),
        ...(h.rate === null ? [] : ['--rate', h.rate.toFixed(2)]),
      ],
      h.pin ? { cpus: h.pin.load } : {},
    );
  await run(PLAN.warmupSeconds);
  const collector = createCollector(h.db, { includeQueries: false });
  const before = await collector.collect();
  const result = await run(PLAN.windowSeconds);
  const report = buildMetricsReport(diffSnapshots(before, await collector.collect()), { includeQueries: false, topN: 500 });
  h.mix ??= queryMix([report]);
  return { stats: windowStats([report], h.mix), pgbench: result, reports: [report] };
}

/** Applies `config` through the agent's own path; null when the agent refuses or fails it. */
async function applyConfig(h: Harness, config: Config): Promise<string | null> {
  await restore(h.ctx, 'baseline', 'next configuration');
  if (Object.keys(config).length === 0) return null;
  const outcome = await applyChange(h.ctx, config, { accept: true });
  return outcome.status === 'applied' ? null : outcome.errors.join('; ');
}

const runtimeOf = (m: Measured) => m.stats.weightedRuntimeMs ?? NaN;

/** Windows of the defaults, to measure the noise; pinned and unpinned alternate when asked. */
/** A way to measure: where the server and the load generator run, and whether each window
 * starts right after a checkpoint. */
interface Way {
  label: string;
  pin: Harness['pin'];
  aligned: boolean;
}

/** Windows of the defaults in each way, interleaved, to measure the noise of each. */
async function noise(h: Harness, ways: readonly Way[]): Promise<Map<Way, Measured[]>> {
  await applyConfig(h, {});
  const windows = new Map<Way, Measured[]>(ways.map((w) => [w, []]));
  for (let i = 0; i < PLAN.noiseWindows; i++) {
    for (const way of i % 2 === 0 ? ways : [...ways].reverse()) {
      [h.pin, h.aligned] = [way.pin, way.aligned];
      windows.get(way)!.push(await measure(h));
    }
  }
  return windows;
}

interface SearchResult {
  history: Observation[];
  bestSoFar: number[];
  suggestions: Suggestion[];
  /** Σ over trials of how much slower than the baseline each ran (a failed trial counts 1). */
  cost: number;
}

/** A search with a given suggestion function, each trial judged against the baseline window
 * measured nearest before it; prints one line per trial. */
async function search(h: Harness, label: string, budget: number, next: (history: History, i: number) => Suggestion): Promise<SearchResult> {
  const history: Observation[] = [];
  const bestSoFar: number[] = [];
  const suggestions: Suggestion[] = [];
  let baseline = NaN;
  let cost = 0;
  for (let i = 0; i < budget; i++) {
    if (i % BASELINE_EVERY === 0) {
      await applyConfig(h, {});
      baseline = runtimeOf(await measure(h));
    }
    const suggestion = next(history, i);
    suggestions.push(suggestion);
    const refused = await applyConfig(h, suggestion.config);
    const m = refused ? null : await measure(h);
    const objective = m ? runtimeOf(m) / baseline : null;
    const ok = objective !== null && Number.isFinite(objective) && objective > 0;
    history.push(
      ok
        ? { config: suggestion.config, objective, status: 'ok', kind: suggestion.kind, ...(h.noise !== null && { noise: h.noise }) }
        : { config: suggestion.config, objective: null, status: 'failed', kind: suggestion.kind },
    );
    cost += ok ? Math.max(0, objective - 1) : 1;
    bestSoFar.push(best({ space: h.space, history })?.objective ?? 1);
    console.log(
      `  ${label.padEnd(6)} #${String(i + 1).padStart(2)}  objective ${fmt(objective)}  tps ${fmt(m?.pgbench.tps, 0).padStart(6)}  best-so-far ${fmt(bestSoFar.at(-1))}  ${suggestion.kind}: ${suggestion.reason.slice(0, 110)}`,
    );
  }
  return { history, bestSoFar, suggestions, cost };
}

function oraclePath(workload: Workload): string {
  return join(ORACLES, `${workload.name}.json`);
}

/** What --oracle writes: the best configuration a long search found, in pg_settings units. */
const OracleFile = z.object({ config: z.record(z.string(), z.union([z.number(), z.string()])) });

/** The cached oracle's configuration, or null when there is none; a file that is no oracle is
 * refused before anything starts. */
function readOracle(workload: Workload): Config | null {
  const file = oraclePath(workload);
  if (!existsSync(file)) return null;
  try {
    return OracleFile.parse(JSON.parse(readFileSync(file, 'utf8'))).config;
  } catch (error) {
    const why = error instanceof z.ZodError ? z.prettifyError(error) : (error as Error).message;
    return usage(`${file} is no oracle file (${why}): delete it, or write it again with --oracle`);
  }
}

/** An oracle's configuration fitted into today's space: a catalog whose bounds narrowed since
 * the oracle was found (commit_delay at most 1 ms since 2026-11-25) would have the agent refuse
 * it whole. Prints what it had to move. */
function fitOracle(space: SearchSpace, oracle: Readonly<Config>): Config {
  const config: Config = {};
  const moved: string[] = [];
  for (const dim of space.dimensions) {
    const value = oracle[dim.name];
    if (value === undefined) continue;
    const fitted = dim.kind === 'numeric' && typeof value === 'number' ? clipNumber(dim, value) : value;
    if (fitted !== value) moved.push(`${dim.name} ${value}→${fitted}`);
    config[dim.name] = fitted;
  }
  const dropped = Object.keys(oracle).filter((name) => !space.dimensions.some((d) => d.name === name));
  if (moved.length > 0 || dropped.length > 0)
    console.log(`  oracle fitted into today's bounds: ${[...moved, ...dropped.map((name) => `${name} left out`)].join(', ')}`);
  return config;
}

interface Verified {
  runtime: Interval | null;
  throughput: Interval | null;
  /** pgbench's latency average (with --rate, measured from each transaction's scheduled start). */
  latency: Interval | null;
  recommended: boolean;
  /** Each round's runtime against the defaults' in the same round: how far the rounds agree. */
  ratios: number[];
}

/** The final configurations against the defaults in interleaved rounds (rotating order). */
async function verifyFinals(h: Harness, finals: ReadonlyArray<[string, Config]>): Promise<Map<string, Verified>> {
  const rounds = new Map<string, RoundFigures[]>(finals.map(([name]) => [name, []]));
  const latencies = new Map<string, number[]>(finals.map(([name]) => [name, []]));
  const figures = (m: Measured) => ({ runtimeMs: runtimeOf(m), throughput: m.pgbench.tps });
  for (let r = 0; r < PLAN.rounds; r++) {
    const order: Array<[string, Config]> = [['defaults', {}], ...finals];
    const rotated = [...order.slice(r % order.length), ...order.slice(0, r % order.length)];
    const measured = new Map<string, Measured>();
    for (const [name, config] of rotated) {
      const refused = await applyConfig(h, config);
      if (refused) console.log(`  ${name}: refused by the agent (${refused})`);
      else measured.set(name, await measure(h));
    }
    const defaults = measured.get('defaults');
    for (const [name] of finals) {
      const m = measured.get(name);
      if (defaults && m) {
        rounds.get(name)!.push({ baseline: figures(defaults), candidate: figures(m) });
        latencies.get(name)!.push(Math.log(m.pgbench.latencyMs / defaults.pgbench.latencyMs));
      }
    }
  }
  await applyConfig(h, {});
  return new Map(
    finals.map(([name]) => {
      const r = rounds.get(name)!;
      const v = fixedVerdict(r, VERIFY);
      return [
        name,
        {
          runtime: v.runtime,
          throughput: pairedInterval(
            r.map((x) => Math.log(x.candidate.throughput / x.baseline.throughput)),
            VERIFY.confidence,
          ),
          latency: pairedInterval(latencies.get(name)!, VERIFY.confidence),
          recommended: v.decision === 'recommend',
          ratios: r.map((x) => x.candidate.runtimeMs / x.baseline.runtimeMs),
        },
      ];
    }),
  );
}

/** The first iteration whose best-so-far reaches `share` of `gain` (a runtime reduction), or null. */
function iterationsTo(bestSoFar: readonly number[], gain: number, share: number): number | null {
  if (!(gain > 0)) return null;
  const index = bestSoFar.findIndex((b) => 1 - b >= share * gain);
  return index < 0 ? null : index + 1;
}

async function runWorkload(workload: Workload, cachedOracle: Config | null): Promise<void> {
  let oracleConfig = cachedOracle;
  console.log(
    `\n== ${workload.name}, ${workload.mode}: ${workload.clients} clients, budget ${PLAN.budget} trials × (${PLAN.warmupSeconds} s warm-up + ${PLAN.windowSeconds} s window)`,
  );
  console.log(`   ${workload.description}`);
  const cluster = await startCluster({ durable: true });
  const dir = mkdtempSync(join(tmpdir(), 'tuner-bench-'));
  running = { cluster, dir };
  console.log(`  throwaway cluster in ${cluster.dataDir}`);
  let db: Db | undefined;
  try {
    for (const sql of localGrantsSql('agent_user')
      .split('\n')
      .filter((l) => l.startsWith('GRANT')))
      await cluster.sql(sql);
    await workload.setup(cluster);
    const script = join(dir, `${workload.name}.sql`);
    writeFileSync(script, workload.script);
    db = await connectDb(cluster.agentUrl);
    const env = {
      AGENT_POSTGRESQL_CONNECTION_URL: cluster.agentUrl,
      AGENT_POSTGRESQL_ALLOW_RESTART: String(workload.mode === 'restart'),
      AGENT_LOCAL_RESTART_COMMAND: cluster.restartCommand,
    };
    const { config } = loadConfig({ cwd: dir, env, target: 'local', needsService: false });
    const target = createLocalTarget({ db, config });
    const ctx: ApplyContext = {
      db,
      config,
      target,
      journal: Journal.open(dir, target.identity),
      log: createLogger({ write: () => undefined }),
    };
    const machine = (await target.machine()).machine;
    const space = createSpace({
      target: 'local',
      capabilities: TARGETS.capabilitiesOf('local'),
      mode: workload.mode,
      machine,
      settings: await readSettings(db),
    });
    const h: Harness = {
      cluster,
      db,
      ctx,
      workload,
      space,
      script,
      pin: null,
      mix: null,
      rate: null,
      aligned: false,
      prewarm: false,
      noise: null,
    };
    if (workload.mode === 'restart') {
      try {
        await cluster.sql('CREATE EXTENSION pg_prewarm');
        h.prewarm = true;
        console.log('  each restart is followed by pg_prewarm of the tables and indexes: windows measure a warm cache');
      } catch (error) {
        console.log(`  no pg_prewarm (${(error as Error).message}): each window after a restart starts from a cold cache`);
      }
    }

    // Noise: the defaults' windows measured in each way, interleaved: the server and the load
    // generator on the same cores, pinned apart, and, for a workload that writes, each window
    // right after a checkpoint (the same phase of the checkpoint cycle in every window).
    // The quietest way measures everything after.
    const pinned = CPUS >= 2 ? { server: `0-${CPUS - 2}`, load: String(CPUS - 1) } : null;
    const ways: Way[] = [
      { label: 'unpinned', pin: null, aligned: false },
      ...(pinned ? [{ label: `server on CPU ${pinned.server}, load on CPU ${pinned.load}`, pin: pinned, aligned: false }] : []),
      ...(workload.writes ? [{ label: 'unpinned, each window after a checkpoint', pin: null, aligned: true }] : []),
    ];
    const windows = await noise(h, ways);
    const cvOf = (way: Way) => cv((windows.get(way) ?? []).map(runtimeOf));
    const tpsCvOf = (way: Way) => cv((windows.get(way) ?? []).map((m) => m.pgbench.tps));
    console.log(
      `  noise, window to window (cv of runtime / tps over ${PLAN.noiseWindows} windows each): ${ways.map((w) => `${w.label} ${fmt(cvOf(w), 3)} / ${fmt(tpsCvOf(w), 3)}`).join('; ')}`,
    );
    const quietest = ways.reduce((a, b) => (cvOf(b) < cvOf(a) ? b : a));
    [h.pin, h.aligned] = [quietest.pin, quietest.aligned];
    // A trial's objective is its window over a baseline window: two windows' noise.
    h.noise = Number.isFinite(cvOf(quietest)) ? Math.SQRT2 * cvOf(quietest) : null;
    console.log(`  measuring ${quietest.label} from here on (the lowest cv of runtime)`);
    const chosen = windows.get(quietest) ?? [];
    const baseline = chosen[0]!;
    if (OPEN_LOOP !== null) {
      h.rate = OPEN_LOOP * mean(chosen.map((m) => m.pgbench.tps));
      console.log(`  open loop from here on: ${fmt(h.rate, 1)} transactions/s, ${fmt(OPEN_LOOP * 100, 0)} % of the defaults' throughput`);
    }
    const signals: WorkloadSignals = signalsOf(baseline.reports);
    console.log(
      `  defaults: weighted runtime ${fmt(runtimeOf(baseline))} ms, tps ${fmt(baseline.pgbench.tps, 0)}; temp ${fmt(signals.tempBytes / 2 ** 20, 0)} MB, checkpoints requested ${signals.checkpointsRequested}, hit ratio ${fmt(signals.blksHit / Math.max(1, signals.blksHit + signals.blksRead), 3)}`,
    );

    const random = await search(h, 'random', PLAN.budget, (history, i) => randomSuggest({ space, history, seed: SEED + i }));
    const tuner = await search(h, 'tuner', PLAN.budget, (history, i) => suggest({ space, history, seed: SEED, iteration: i, signals }));

    if (flags.oracle) {
      // The long search: the tuner's own, from the best of everything measured above.
      const long = await search(h, 'oracle', PLAN.oracleBudget, (history, i) =>
        suggest({ space, history: [...tuner.history, ...random.history, ...history], seed: SEED + 1, iteration: i, signals }),
      );
      const found = best({ space, history: [...tuner.history, ...random.history, ...long.history] });
      if (found) {
        mkdirSync(ORACLES, { recursive: true });
        writeFileSync(
          oraclePath(workload),
          `${JSON.stringify({ workload: workload.name, mode: workload.mode, objective: found.objective, iterations: PLAN.oracleBudget, config: found.config }, null, 2)}\n`,
        );
        console.log(`  oracle written to ${oraclePath(workload)} (objective ${fmt(found.objective)})`);
        oracleConfig = found.config;
      }
    }

    const dims = new Set(space.dimensions.map((d) => d.name));
    const recommended = pgtune({
      memoryBytes: machine.memoryBytes,
      vcpus: machine.vcpus,
      maxConnections: Number(space.settings['max_connections']?.setting),
    });
    const finals: Array<[string, Config]> = [
      ['pgtune', Object.fromEntries(Object.entries(recommended).filter(([name, v]) => dims.has(name) && v !== undefined))],
      // What the session would verify: the fewest changes the windows cannot tell from the best.
      ['random', recommend({ space, history: random.history })?.config ?? {}],
      ['tuner', recommend({ space, history: tuner.history })?.config ?? {}],
    ];
    for (const [name, history] of [
      ['random', random.history],
      ['tuner', tuner.history],
    ] as const) {
      const [top, chosen] = [best({ space, history }), recommend({ space, history })];
      if (top && chosen && top.lastIndex !== chosen.lastIndex)
        console.log(
          `  ${name}: recommends its trial #${chosen.lastIndex + 1} (objective ${fmt(chosen.objective)}, ${configDiff(space, chosen.config).length} knobs changed) over its best, #${top.lastIndex + 1} (${fmt(top.objective)}, ${configDiff(space, top.config).length} knobs): within the windows' noise (${fmt(h.noise)})`,
        );
    }
    const oracle = oracleConfig && fitOracle(space, oracleConfig);
    if (oracle) finals.push(['oracle', oracle]);
    const verified = await verifyFinals(h, finals);

    console.log(`  verified against the defaults in ${PLAN.rounds} interleaved rounds (runtime: lower is better; tps: higher is better):`);
    const gainOf = (name: string) => {
      const r = verified.get(name)?.runtime;
      return r ? 1 - r.estimate : NaN;
    };
    const oracleGain = oracle ? gainOf('oracle') : NaN;
    for (const [name] of finals) {
      const v = verified.get(name)!;
      const speedup = v.runtime ? 1 / v.runtime.estimate : NaN;
      const share =
        Number.isFinite(oracleGain) && oracleGain > 0 ? `, ${fmt((100 * gainOf(name)) / oracleGain, 0)} % of the oracle's gain` : '';
      console.log(
        `    ${name.padEnd(8)} runtime ${describeInterval(v.runtime)} = ${fmt(speedup, 2)}× faster; ${h.rate === null ? `tps ${describeInterval(v.throughput)}` : `latency ${describeInterval(v.latency)}`}; ${v.recommended ? 'recommended' : 'not recommended'} by the session's rule${share}`,
      );
    }
    console.log(
      `    runtime against the defaults, round by round: ${finals
        .map(
          ([name]) =>
            `${name} ${verified
              .get(name)!
              .ratios.map((x) => fmt(x, 2))
              .join(' ')}`,
        )
        .join('; ')}`,
    );
    for (const [name, config] of finals) {
      const changes = configDiff(space, config).map((c) => `${c.name} ${c.baseline}→${c.value}`);
      console.log(`    ${name.padEnd(8)} changes: ${changes.join(', ') || 'none'}`);
    }
    console.log(`  users' cost of the search (Σ slowdown over trials): random ${fmt(random.cost, 2)}, tuner ${fmt(tuner.cost, 2)}`);
    const goal = Number.isFinite(oracleGain) ? oracleGain : Math.max(gainOf('tuner'), gainOf('random'), gainOf('pgtune'));
    console.log(
      `  iteration reaching 90 % of ${Number.isFinite(oracleGain) ? "the oracle's" : 'the best verified'} gain (${fmt(goal * 100, 0)} %): tuner ${iterationsTo(tuner.bestSoFar, goal, 0.9) ?? '—'}, random ${iterationsTo(random.bestSoFar, goal, 0.9) ?? '—'}`,
    );
    /** Whether the tuner's verified gain is at least `other`'s: "yes", "tie" when the estimates
     * differ but the intervals overlap (the rounds cannot tell them apart), else "no". */
    const atLeast = (other: string) => {
      const [t, o] = [verified.get('tuner')?.runtime, verified.get(other)?.runtime];
      if (!t || !o) return 'unknown';
      return t.estimate <= o.estimate ? 'yes' : t.low <= o.high ? 'tie (within the intervals)' : 'no';
    };
    const speedup = 1 / (1 - gainOf('tuner'));
    console.log(
      `  goals: tuner ≥ pgtune ${atLeast('pgtune')}; ≥ random ${atLeast('random')}; ≥ 1.3× the defaults ${speedup >= 1.3 ? 'yes' : 'no'} (${fmt(speedup, 2)}×); tuner recommends ${verified.get('tuner')?.recommended ? 'its best' : 'nothing'}`,
    );
  } finally {
    await db?.close().catch(() => undefined);
    // After a signal, the handler below removes them.
    if (signalled.stopping === null) {
      running = null;
      await cluster.destroy();
      rmSync(dir, { recursive: true, force: true });
    }
  }
}

/** The cluster being measured: Ctrl+C or a SIGTERM removes it rather than leave a server running. */
let running: { cluster: Cluster; dir: string } | null = null;
/** Set by the first SIGINT or SIGTERM: the removal under way, then exit status 130. */
const signalled: { stopping: Promise<never> | null } = { stopping: null };
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    const left = running;
    console.error(`bench/tuning: ${signal}: stopping${left ? ` and removing ${left.cluster.dataDir}` : ''}`);
    signalled.stopping ??= (async () => {
      if (left) {
        await left.cluster.destroy().catch(() => undefined);
        rmSync(left.dir, { recursive: true, force: true });
      }
      return process.exit(130);
    })();
  });
}

const workloads = (flags.workload ? [flags.workload] : PLAN.workloads).map((name) => {
  try {
    return workloadByName(name);
  } catch (error) {
    return usage(`--workload: ${(error as Error).message}`);
  }
});
const oracles = new Map(workloads.map((workload) => [workload, readOracle(workload)]));
for (const workload of workloads) {
  try {
    await runWorkload(workload, oracles.get(workload) ?? null);
  } catch (error) {
    // A query cut short by the signal's shutdown is no failure of the benchmark.
    if (signalled.stopping) await signalled.stopping;
    throw error;
  }
}

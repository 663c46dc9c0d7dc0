// bench/sessions: how many windows does a REAL tuning session need to its first verified gain, and
// to its end? Unlike bench/tuning and bench/calibration, which run loops of their own, each session
// here is the product's: a throwaway cluster under a lab workload, the tuning service on embedded
// storage and the real `tuner-agent --local` (src/lab/stack.ts, as `npm run demo`), one fresh stack
// per session so that no session starts from another's kept configuration. Issue #30's goals:
//   - windows to the first verified gain (a kept step, or a final verification that recommends)
//     on work-mem, jit and index-join: at most 8;
//   - windows to the end on select-1 (nothing to gain) at the default trial count: at most 20;
//   - false claims over select-1 sessions (a session that kept anything): none;
//   - coverage: after a work-mem session that kept a gain, the defaults and the kept configuration
//     are re-measured apart from the session, in interleaved A/B rounds (ALTER SYSTEM on the
//     throwaway cluster, under the stack's own load with pg_stat_statements read around each
//     window, as the session measures); the share of sessions whose verified interval contains the
//     re-measured runtime ratio: at least 90 %.
// The sessions take the product's defaults (10 trials, 3-5 A/B rounds, 5 % minimum effect at 95 %)
// except the windows: fixed and short (windowMinSeconds = windowSeconds = --window), since short
// windows are what make the benchmark affordable; a window counts the same whatever its length,
// but short windows are noisier, so verifications need bigger wins than at the default 5-10 min.
// "Windows" counts measured windows: the first baseline and every row in state ok, failed or
// contaminated (cancelled trials never measured anything).
//
//   node bench/sessions.ts                          (npm run bench:sessions) one session each of
//                                                   work-mem, jit, index-join and select-1
//   --workload NAME[,NAME…]  --sessions N (each)    --window S (12)  --warmup S (3)
//   --rounds R (the coverage re-measurement's rounds, 4)  --seed S (session n's seed is S + n; 4000)
//   --until-first-gain       stop each session once a step is kept (the coverage runs: the
//                            re-measurement needs only the first verified gain, in a third of the time)
//   --short (CI: one tiny select-1 session)
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { buildMetricsReport, createCollector, diffSnapshots } from '../src/agent/collect/index.ts';
import { connectDb, type Db } from '../src/agent/database/db.ts';
import { startStack, type Stack } from '../src/lab/stack.ts';
import { until } from '../src/lab/until.ts';
import { workloadByName, type Workload } from '../src/lab/workloads.ts';
import { queryMix, windowStats, type QueryMix } from '../src/measure/objective.ts';
import { pairedInterval, roundOrder, type Interval } from '../src/measure/verify.ts';
import type { MetricsReport } from '../src/protocol/report.ts';
import { SESSION_DEFAULTS } from '../src/service/tuning/params.ts';
import { benchArgs } from './args.ts';

const { flags, usage, whole } = benchArgs('bench/sessions', {
  short: { type: 'boolean' },
  workload: { type: 'string' },
  sessions: { type: 'string' },
  window: { type: 'string' },
  warmup: { type: 'string' },
  rounds: { type: 'string' },
  seed: { type: 'string' },
  'until-first-gain': { type: 'boolean' },
});
const SHORT = flags.short === true;
const WORKLOADS: Workload[] = (flags.workload ?? (SHORT ? 'select-1' : 'work-mem,jit,index-join,select-1')).split(',').map((name) => {
  try {
    return workloadByName(name.trim());
  } catch (error) {
    return usage(`--workload: ${(error as Error).message}`);
  }
});
const PLAN = {
  sessions: whole('sessions', flags.sessions, 1, 1),
  windowSeconds: whole('window', flags.window, SHORT ? 3 : 12, 2),
  warmupSeconds: whole('warmup', flags.warmup, SHORT ? 1 : 3, 0),
  /** The short mode's session is tiny; otherwise the product's defaults. */
  iterations: SHORT ? 1 : SESSION_DEFAULTS.iterations,
  abRoundsMin: SESSION_DEFAULTS.abRoundsMin,
  abRoundsMax: SHORT ? SESSION_DEFAULTS.abRoundsMin : SESSION_DEFAULTS.abRoundsMax,
  remeasureRounds: whole('rounds', flags.rounds, SHORT ? 3 : 4, 2),
  /** Session n's optimizer seed is seed + n: a run is replayable, and another --seed repeats it with other suggestions. */
  seed: whole('seed', flags.seed, 4000, 0),
  untilFirstGain: flags['until-first-gain'] === true,
};
/** Issue #30's goals, in windows. */
const GOALS = { firstGain: 8, selectEnd: 20, coverage: 0.9 };

interface StepView {
  n: number;
  iteration: number;
  config: Record<string, number | string>;
  rounds: number;
  runtime: Interval | null;
  outcome: string;
  note: string | null;
  keptAfter: number | null;
  summary: string | null;
}
interface SessionView {
  id: string;
  state: string;
  message: string | null;
  windowNowSeconds: number | null;
  best: { config: Record<string, number | string>; runtime?: Interval | null } | null;
  verification: { decision: string; rounds: number; runtime: Interval | null; summary: string | null; note: string | null } | null;
  steps: StepView[];
  noise?: number | null;
}
interface IterationView {
  ordinal: number;
  kind: string;
  phase: 'search' | 'verify';
  round: number | null;
  state: string;
  objective: number | null;
  failure: string | null;
}

/** What one session came to. */
interface SessionResult {
  workload: string;
  state: string;
  /** Windows to the first verified gain, null when there was none. */
  toGain: number | null;
  /** What verified it: "step 1" or "final", with its interval (runtime over the known-good's). */
  gain: { what: string; interval: Interval | null } | null;
  toEnd: number;
  message: string | null;
  kept: boolean;
  wallSeconds: number;
  /** The work-mem re-measurement: the claimed interval (over the defaults) and what was found. */
  coverage: { claimed: Interval; runtime: Interval; covered: boolean } | null;
}

/** Closes the stack of the session running, on SIGINT or SIGTERM: no cluster left behind. */
let cleanupCurrent: (() => Promise<void>) | null = null;
for (const signal of ['SIGINT', 'SIGTERM'] as const)
  process.once(signal, () => void (cleanupCurrent?.() ?? Promise.resolve()).finally(() => process.exit(130)));

const MEASURED = new Set(['ok', 'failed', 'contaminated']);
const ENDED = new Set(['done', 'stopped', 'reverted', 'failed']);
/** A step whose verification decided 'recommend' (what became of it after does not matter here). */
const VERIFIED_STEP = new Set(['kept', 'awaiting_approval', 'applying', 'not_kept']);

const fmt = (x: number | null | undefined, digits = 3) => (x === null || x === undefined || !Number.isFinite(x) ? '—' : x.toFixed(digits));
const interval = (x: Interval | null | undefined) => (x ? `${fmt(x.estimate)} (${fmt(x.low)}–${fmt(x.high)})` : '—');
const say = (line: string) => process.stdout.write(`${line}\n`);
const median = (xs: number[]) => {
  if (xs.length === 0) return null;
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

/**
 * The verifications' windows: each verification's A/B rounds are a run of consecutive verify rows
 * (steps in order, then the final one), so the k-th run is the k-th verification. Returns the last
 * ordinal of each run.
 */
function verificationEnds(rows: readonly IterationView[]): number[] {
  const ends: number[] = [];
  let previous: IterationView | null = null;
  for (const row of [...rows].sort((a, b) => a.ordinal - b.ordinal)) {
    if (row.phase === 'verify') {
      if (previous?.phase === 'verify') ends[ends.length - 1] = row.ordinal;
      else ends.push(row.ordinal);
    }
    previous = row;
  }
  return ends;
}

/** The windows measured up to and including ordinal `last`: the first baseline and the rows. */
const windowsUpTo = (rows: readonly IterationView[], last: number) =>
  1 + rows.filter((r) => r.ordinal <= last && MEASURED.has(r.state)).length;

function firstGain(session: SessionView, rows: readonly IterationView[]): Pick<SessionResult, 'toGain' | 'gain'> {
  const ends = verificationEnds(rows);
  const steps = [...session.steps].sort((a, b) => a.n - b.n);
  const step = steps.find((s) => VERIFIED_STEP.has(s.outcome));
  if (step) {
    const index = steps.indexOf(step);
    const last = step.keptAfter ?? ends[index] ?? Math.max(...rows.map((r) => r.ordinal));
    return { toGain: windowsUpTo(rows, last), gain: { what: `step ${step.n}`, interval: step.runtime } };
  }
  if (session.verification?.decision === 'recommend') {
    const last = ends.at(-1) ?? Math.max(...rows.map((r) => r.ordinal));
    return { toGain: windowsUpTo(rows, last), gain: { what: 'final', interval: session.verification.runtime } };
  }
  return { toGain: null, gain: null };
}

/** The kept configuration's runtime over the first baseline's, as the session claims it: the
 * best's chained interval, else the kept steps' intervals multiplied (steps.ts chainedInterval). */
function claimedOverDefaults(session: SessionView): { config: Record<string, number | string>; claimed: Interval } | null {
  if (session.best?.runtime) return { config: session.best.config, claimed: session.best.runtime };
  const kept = session.steps.filter((s) => s.outcome === 'kept');
  if (kept.length === 0 || kept.some((s) => s.runtime === null)) return null;
  const claimed = kept.reduce<Interval>(
    (p, s) => ({ estimate: p.estimate * s.runtime!.estimate, low: p.low * s.runtime!.low, high: p.high * s.runtime!.high }),
    { estimate: 1, low: 1, high: 1 },
  );
  return { config: kept.at(-1)!.config, claimed };
}

const NAME = /^[a-z_]+$/;
const quote = (value: string) => `'${value.replaceAll("'", "''")}'`;

/** The kept configuration (`on`) or the defaults: ALTER SYSTEM on the throwaway cluster, whose
 * defaults are its own postgresql.conf (the agent is idle once the session has ended). */
async function setConfig(stack: Stack, config: Record<string, number | string>, on: boolean): Promise<void> {
  for (const [name, value] of Object.entries(config)) {
    if (!NAME.test(name)) throw new Error(`unexpected parameter name ${name}`);
    await stack.cluster.sql(on ? `ALTER SYSTEM SET ${name} = ${quote(String(value))}` : `ALTER SYSTEM RESET ${name}`);
  }
  await stack.cluster.sql('SELECT pg_reload_conf()');
}

/** The values of `names` in pg_settings' units (the agent's configurations use the same). */
async function settingsOf(stack: Stack, names: readonly string[]): Promise<Record<string, string>> {
  const rows = await stack.cluster.sql<{ name: string; setting: string }>('SELECT name, setting FROM pg_settings WHERE name = ANY($1)', [
    names,
  ]);
  return Object.fromEntries(rows.map((r) => [r.name, r.setting]));
}

const same = (a: string, b: string) => a === b || (a.trim() !== '' && b.trim() !== '' && Number(a) === Number(b));

/** The knobs of `config` not at what the role wants: the kept values, or the defaults as they were
 * before the session. */
async function offBy(
  stack: Stack,
  config: Record<string, number | string>,
  defaults: Record<string, string>,
  on: boolean,
): Promise<string[]> {
  const now = await settingsOf(stack, Object.keys(config));
  return Object.keys(config).filter((name) => {
    const want = on ? String(config[name]) : defaults[name];
    return want !== undefined && now[name] !== undefined && !same(now[name], want);
  });
}

/**
 * Sets a role's configuration and waits until the server has it. Right after a session ends the
 * agent may still be returning to its known-good configuration (the first run's second work-mem
 * session measured its first "defaults" window on the kept configuration: the agent's revert came
 * after our RESET), so it is set again until it holds. Returns the knobs that never showed the value
 * wanted (a spelling pg_settings does not share), which the caller then ignores.
 */
async function ensureConfig(
  stack: Stack,
  config: Record<string, number | string>,
  defaults: Record<string, string>,
  on: boolean,
): Promise<string[]> {
  for (let attempt = 1; ; attempt++) {
    await setConfig(stack, config, on);
    await sleep(500);
    const off = await offBy(stack, config, defaults, on);
    if (off.length === 0) return [];
    if (attempt === 5) {
      // Not a change back, then, but a value the server spells otherwise: say so and go on.
      say(`   warning: ${off.join(', ')} not at the ${on ? 'kept value' : 'default'} as pg_settings shows it; measured as they are`);
      return off;
    }
    await sleep(2000);
  }
}

/**
 * The defaults against the kept configuration, apart from the session: interleaved A/B rounds
 * (roundOrder) after it ended, under the stack's own load as the session measured it (the same
 * pgbench, its connections kept), each window pg_stat_statements read around it after a warm-up.
 * The runtime ratio (the session's own objective, on the first window's mix) as a paired interval.
 * The first run of this benchmark started a new pgbench for every window instead: new connections
 * in every window, a workload other than the one the session measured (docs/benchmarks.md).
 */
async function remeasure(
  stack: Stack,
  db: Db,
  config: Record<string, number | string>,
  defaults: Record<string, string>,
): Promise<{ runtime: Interval }> {
  let mix: QueryMix | null = null;
  const runtimes: number[] = [];
  for (let r = 1; r <= PLAN.remeasureRounds; r++) {
    const figures: Partial<Record<'baseline' | 'candidate', number>> = {};
    for (const role of roundOrder(r)) {
      let measured: MetricsReport | null = null;
      // A window during which the configuration changed (the agent, see ensureConfig) is measured again.
      while (measured === null) {
        const stuck = await ensureConfig(stack, config, defaults, role === 'candidate');
        await sleep(PLAN.warmupSeconds * 1000);
        const collector = createCollector(db, { includeQueries: false });
        const before = await collector.collect();
        await sleep(PLAN.windowSeconds * 1000);
        const report = buildMetricsReport(diffSnapshots(before, await collector.collect()), { includeQueries: false, topN: 500 });
        const off = (await offBy(stack, config, defaults, role === 'candidate')).filter((name) => !stuck.includes(name));
        if (off.length === 0) measured = report;
        else say(`   re-measure round ${r}: ${off.join(', ')} changed during the ${role}'s window; measuring it again`);
      }
      mix ??= queryMix([measured]);
      const runtimeMs = windowStats([measured], mix).weightedRuntimeMs;
      if (runtimeMs === null) throw new Error('a re-measurement window saw none of the first window’s statements');
      figures[role] = runtimeMs;
    }
    const { baseline, candidate } = figures as Required<typeof figures>;
    runtimes.push(Math.log(candidate / baseline));
    say(`   re-measure round ${r}: runtime ${fmt(candidate / baseline)} × defaults`);
  }
  return { runtime: pairedInterval(runtimes, 0.95)! };
}

/** One session on a fresh stack: its windows printed as they end, its figures returned. */
async function runSession(workload: Workload, n: number): Promise<SessionResult> {
  const work = mkdtempSync(join(tmpdir(), 'tuner-bench-sessions-'));
  let stack: Stack | undefined;
  let db: Db | undefined;
  let cleaned = false;
  const cleanup = async () => {
    if (cleaned) return;
    cleaned = true;
    await db?.close();
    await stack?.close();
    rmSync(work, { recursive: true, force: true });
  };
  cleanupCurrent = cleanup;
  try {
    say(`== ${workload.name}, session ${n}: setting up a throwaway cluster, the service and the agent`);
    stack = await startStack({ workload, work, clients: workload.clients, reportSeconds: 1 });
    const { person, databaseId } = stack;
    // The defaults, for the coverage re-measurement: every knob the session may change, before it starts.
    const defaults = await settingsOf(
      stack,
      (await stack.cluster.sql<{ name: string }>('SELECT name FROM pg_settings')).map((r) => r.name),
    );
    const started = Date.now();
    const { session: created } = await person.call<{ session: SessionView }>(
      'POST',
      `/api/manage/databases/${databaseId}/tuning-sessions`,
      {
        mode: workload.mode,
        iterations: PLAN.iterations,
        windowSeconds: PLAN.windowSeconds,
        windowMinSeconds: PLAN.windowSeconds,
        warmupSeconds: PLAN.warmupSeconds,
        abRoundsMin: PLAN.abRoundsMin,
        abRoundsMax: PLAN.abRoundsMax,
        requireApproval: false,
        seed: PLAN.seed + n,
      },
    );
    const path = `/api/manage/databases/${databaseId}/tuning-sessions/${created.id}`;
    const printed = new Set<number>();
    let lastMessage: string | null = null;
    let stopAsked = false;
    // At most: the baseline, the trials, a baseline after every 3, a verification per trial (each
    // a step) and the final one; each window with its warm-up and the report that closes it.
    const maxWindows = 1 + PLAN.iterations * (2 + 2 * PLAN.abRoundsMax) + 2 * PLAN.abRoundsMax;
    const { session, iterations } = await until(
      `the ${workload.name} session to end`,
      async () => {
        const now = await person.call<{ session: SessionView; iterations: IterationView[] }>('GET', path);
        if (now.session.message !== lastMessage && now.session.message) say(`   message: ${now.session.message}`);
        lastMessage = now.session.message;
        for (const it of now.iterations) {
          if (printed.has(it.ordinal) || !['ok', 'failed', 'cancelled', 'contaminated'].includes(it.state)) continue;
          printed.add(it.ordinal);
          const what = it.phase === 'verify' ? `A/B ${it.round ?? '?'} ${it.kind}` : it.kind;
          say(
            `   #${String(it.ordinal).padStart(2)} ${what.padEnd(20)} ${it.state.padEnd(12)} ${fmt(it.objective)}${it.failure ? `  ${it.failure}` : ''}`,
          );
        }
        if (
          PLAN.untilFirstGain &&
          !stopAsked &&
          !ENDED.has(now.session.state) &&
          now.session.steps.some((step) => step.outcome === 'kept')
        ) {
          say('   a step is kept: the session is stopped there (--until-first-gain)');
          stopAsked = true;
          await person.call('POST', `${path}/stop`);
          return null;
        }
        // Waiting for a person despite requireApproval false: a statement regressed (the 'approve' rule).
        if (now.session.state === 'awaiting_approval') {
          say(`   the session waits for approval (${now.session.message ?? ''}); stopped`);
          await person.call('POST', `${path}/stop`);
          return null;
        }
        return ENDED.has(now.session.state) ? now : null;
      },
      maxWindows * (PLAN.windowSeconds + PLAN.warmupSeconds + 20) * 1000,
      1000,
    );
    const wallSeconds = (Date.now() - started) / 1000;
    const toEnd = 1 + iterations.filter((it) => MEASURED.has(it.state)).length;
    const kept =
      session.steps.some((s) => s.outcome === 'kept') || (session.state === 'done' && session.verification?.decision === 'recommend');
    for (const step of session.steps)
      say(`   step ${step.n} (trial #${step.iteration}): ${step.outcome}; ${step.summary ?? step.note ?? ''}`);
    if (session.verification)
      say(
        `   final verification: ${session.verification.decision} after ${session.verification.rounds} rounds; ${session.verification.summary ?? session.verification.note ?? ''}`,
      );
    say(`   noise of one window: ${fmt(session.noise)}; windows ${session.windowNowSeconds ?? PLAN.windowSeconds} s`);
    const result: SessionResult = {
      workload: workload.name,
      state: session.state,
      ...firstGain(session, iterations),
      toEnd,
      message: session.message,
      kept,
      wallSeconds,
      coverage: null,
    };
    const claim = workload.name === 'work-mem' && kept ? claimedOverDefaults(session) : null;
    if (claim) {
      say(`   re-measuring the defaults against the kept configuration (${JSON.stringify(claim.config)}), ${PLAN.remeasureRounds} rounds`);
      db = await connectDb(stack.cluster.agentUrl);
      const found = await remeasure(stack, db, claim.config, defaults);
      const covered = claim.claimed.low <= found.runtime.estimate && found.runtime.estimate <= claim.claimed.high;
      result.coverage = { claimed: claim.claimed, runtime: found.runtime, covered };
    }
    return result;
  } finally {
    await cleanup();
    cleanupCurrent = null;
  }
}

function printResult(r: SessionResult): void {
  say(
    `-- ${r.workload}: ${r.state}; first verified gain after ${r.toGain ?? '—'} windows${r.gain ? ` (${r.gain.what}, runtime ${interval(r.gain.interval)})` : ''}; ` +
      `${r.toEnd} windows to the end; ${(r.wallSeconds / 60).toFixed(1)} min; ${r.kept ? 'kept a configuration' : 'kept nothing'}`,
  );
  say(`   end message: ${r.message ?? '—'}`);
  if (r.coverage)
    say(
      `   coverage: claimed ${interval(r.coverage.claimed)} over the defaults; re-measured runtime ${interval(r.coverage.runtime)}: ` +
        (r.coverage.covered ? 'covered' : 'NOT covered'),
    );
}

function printSummary(results: readonly SessionResult[]): void {
  say('');
  say(
    `== summary: ${PLAN.windowSeconds} s windows (fixed), ${PLAN.warmupSeconds} s warm-up, ${PLAN.iterations} trials, ${PLAN.abRoundsMin}–${PLAN.abRoundsMax} A/B rounds` +
      (PLAN.untilFirstGain ? '; sessions stopped at their first kept step (windows to the end count to there)' : ''),
  );
  say('workload     sessions  with a gain  median windows to it  median (max) windows to end  false claims  coverage  median min');
  for (const name of [...new Set(results.map((r) => r.workload))]) {
    const rs = results.filter((r) => r.workload === name);
    const gains = rs.filter((r) => r.toGain !== null).map((r) => r.toGain!);
    const ends = rs.map((r) => r.toEnd);
    const checked = rs.filter((r) => r.coverage);
    const falseClaims = name === 'select-1' ? String(rs.filter((r) => r.kept).length) : '—';
    say(
      `${name.padEnd(12)} ${String(rs.length).padStart(8)}  ${String(gains.length).padStart(11)}  ${fmt(median(gains), 1).padStart(20)}  ` +
        `${`${fmt(median(ends), 1)} (${Math.max(...ends)})`.padStart(27)}  ${falseClaims.padStart(12)}  ` +
        `${(checked.length ? `${checked.filter((r) => r.coverage!.covered).length}/${checked.length}` : '—').padStart(8)}  ${fmt(median(rs.map((r) => r.wallSeconds / 60)), 1).padStart(10)}`,
    );
  }
  say(
    `goals (#30): first verified gain ≤ ${GOALS.firstGain} windows on work-mem, jit, index-join; select-1 ends ≤ ${GOALS.selectEnd} windows with no false claim; work-mem coverage ≥ ${GOALS.coverage * 100} % over ≥ 20 sessions`,
  );
}

async function main(): Promise<void> {
  const results: SessionResult[] = [];
  for (const workload of WORKLOADS)
    for (let n = 1; n <= PLAN.sessions; n++) {
      const result = await runSession(workload, n);
      printResult(result);
      results.push(result);
    }
  printSummary(results);
}

await main();

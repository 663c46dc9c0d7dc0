// bench/calibration: are the sessions' verified intervals honest? Repeated short tuning sessions
// (the real service, the real tuner-agent, a throwaway cluster under a lab workload); after each,
// a separate interleaved re-measurement of the session's candidate against the baseline, apart
// from the session: A/B rounds in alternating order, each window read straight from
// pg_stat_statements. It prints
//   - coverage: the share of sessions whose claimed interval (runtime, at the session's 95 %)
//     contains the runtime ratio the re-measurement found (goal ≥ 90 %);
//   - claims: the sessions that recommended their candidate (on select-1, the null workload,
//     the goal is none).
// The re-measurement has noise of its own, so coverage measured this way is a little lower than
// the interval's true coverage of the candidate's real effect.
//
//   node bench/calibration.ts --workload work-mem --sessions 10      (npm run bench:calibration)
//   node bench/calibration.ts --workload select-1 --sessions 5
//   --window S (6), --trials N (2), --rounds R (re-measurement rounds, 6), --short (CI: 1 session)
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { buildMetricsReport, createCollector, diffSnapshots } from '../src/agent/collect/index.ts';
import { connectDb, type Db } from '../src/agent/database/db.ts';
import { startStack, type Stack } from '../src/lab/stack.ts';
import { until } from '../src/lab/until.ts';
import { workloadByName } from '../src/lab/workloads.ts';
import { queryMix, windowStats, type QueryMix } from '../src/measure/objective.ts';
import { pairedInterval, roundOrder, type Interval } from '../src/measure/verify.ts';

const { values: flags } = parseArgs({
  options: {
    short: { type: 'boolean' },
    workload: { type: 'string' },
    sessions: { type: 'string' },
    window: { type: 'string' },
    trials: { type: 'string' },
    rounds: { type: 'string' },
  },
});
const SHORT = flags.short === true;
const WORKLOAD = workloadByName(flags.workload ?? 'work-mem');
const PLAN = {
  sessions: Number(flags.sessions ?? (SHORT ? 1 : 10)),
  windowSeconds: Number(flags.window ?? (SHORT ? 4 : 6)),
  trials: Number(flags.trials ?? (SHORT ? 1 : 2)),
  remeasureRounds: Number(flags.rounds ?? (SHORT ? 3 : 6)),
  abRoundsMin: 3,
  abRoundsMax: SHORT ? 3 : 6,
  warmupSeconds: 1,
};

interface SessionView {
  id: string;
  state: string;
  message: string | null;
  confidencePercent: number;
  verification: {
    candidate: { config: Record<string, number | string> };
    rounds: number;
    runtime: Interval | null;
    decision: string;
    summary: string | null;
  } | null;
}

const fmt = (x: number | null | undefined, digits = 3) => (x === null || x === undefined || !Number.isFinite(x) ? '—' : x.toFixed(digits));
const quote = (value: string) => `'${value.replaceAll("'", "''")}'`;
const NAME = /^[a-z_]+$/;

/** Sets `config` with ALTER SYSTEM (the agent is idle between sessions), or resets those knobs. */
async function setConfig(stack: Stack, config: Record<string, number | string>, on: boolean): Promise<void> {
  for (const [name, value] of Object.entries(config)) {
    if (!NAME.test(name)) throw new Error(`unexpected parameter name ${name}`);
    await stack.cluster.sql(on ? `ALTER SYSTEM SET ${name} = ${quote(String(value))}` : `ALTER SYSTEM RESET ${name}`);
  }
  await stack.cluster.sql('SELECT pg_reload_conf()');
}

/** One window read straight from pg_stat_statements: the weighted runtime on `mix`. */
async function measureWindow(db: Db, mix: QueryMix | null): Promise<{ runtimeMs: number; mix: QueryMix }> {
  const collector = createCollector(db, { includeQueries: false });
  await sleep(PLAN.warmupSeconds * 1000);
  const before = await collector.collect();
  await sleep(PLAN.windowSeconds * 1000);
  const report = buildMetricsReport(diffSnapshots(before, await collector.collect()), { includeQueries: false, topN: 500 });
  const windowMix = mix ?? queryMix([report]);
  const runtime = windowStats([report], windowMix).weightedRuntimeMs;
  if (runtime === null) throw new Error('the re-measurement window saw none of the baseline statements');
  return { runtimeMs: runtime, mix: windowMix };
}

/** The candidate against the baseline in alternating A/B rounds: the runtime ratio and its interval. */
async function remeasure(stack: Stack, db: Db, config: Record<string, number | string>): Promise<Interval> {
  let mix: QueryMix | null = null;
  const logRatios: number[] = [];
  for (let r = 1; r <= PLAN.remeasureRounds; r++) {
    const runtime: Partial<Record<'baseline' | 'candidate', number>> = {};
    for (const role of roundOrder(r)) {
      await setConfig(stack, config, role === 'candidate');
      const w = await measureWindow(db, mix);
      mix ??= w.mix;
      runtime[role] = w.runtimeMs;
    }
    logRatios.push(Math.log(runtime.candidate! / runtime.baseline!));
  }
  await setConfig(stack, config, false);
  return pairedInterval(logRatios, 0.95)!;
}

async function main(): Promise<void> {
  const work = mkdtempSync(join(tmpdir(), 'tuner-calibration-'));
  let stack: Stack | undefined;
  let db: Db | undefined;
  const rows: Array<{ claimed: Interval | null; decision: string; remeasured: Interval | null }> = [];
  const started = Date.now();
  try {
    stack = await startStack({ workload: WORKLOAD, work, clients: 2, reportSeconds: 1, say: (line) => console.log(line) });
    db = await connectDb(stack.cluster.agentUrl);
    console.log(
      `== ${PLAN.sessions} sessions on ${WORKLOAD.name}: ${PLAN.trials} trials, ${PLAN.windowSeconds} s windows, ${PLAN.abRoundsMin}–${PLAN.abRoundsMax} A/B rounds; each re-measured in ${PLAN.remeasureRounds} rounds`,
    );
    console.log('  #  decision                     rounds  claimed runtime ratio (95 %)   re-measured ratio (95 %)       covered');
    for (let i = 1; i <= PLAN.sessions; i++) {
      const { person, databaseId } = stack;
      const { session: created } = await person.call<{ session: SessionView }>(
        'POST',
        `/api/manage/databases/${databaseId}/tuning-sessions`,
        {
          iterations: PLAN.trials,
          windowSeconds: PLAN.windowSeconds,
          warmupSeconds: PLAN.warmupSeconds,
          abRoundsMin: PLAN.abRoundsMin,
          abRoundsMax: PLAN.abRoundsMax,
          seed: 1000 + i,
        },
      );
      const path = `/api/manage/databases/${databaseId}/tuning-sessions/${created.id}`;
      const session = await until(
        `session ${i} to end`,
        async () => {
          const { session: now } = await person.call<{ session: SessionView }>('GET', path);
          return ['awaiting_approval', 'done', 'failed', 'stopped'].includes(now.state) ? now : null;
        },
        30 * 60_000,
        1000,
      );
      if (session.state === 'awaiting_approval') await person.call('POST', `${path}/stop`);
      // Whatever the session ended on, the database is on its known-good configuration again.
      await sleep(3000);
      const v = session.verification;
      const claimed = v?.runtime ?? null;
      const remeasured = v ? await remeasure(stack, db, v.candidate.config) : null;
      const covered = claimed && remeasured ? claimed.low <= remeasured.estimate && remeasured.estimate <= claimed.high : null;
      rows.push({ claimed, decision: v?.decision ?? session.state, remeasured });
      const interval = (x: Interval | null) => (x ? `${fmt(x.estimate)} (${fmt(x.low)}–${fmt(x.high)})` : '—');
      console.log(
        `  ${String(i).padStart(2)} ${(v?.decision ?? `${session.state}, no verification`).padEnd(28)} ${String(v?.rounds ?? '—').padStart(6)}  ${interval(claimed).padEnd(29)} ${interval(remeasured).padEnd(30)} ${covered === null ? '—' : covered ? 'yes' : 'NO'}`,
      );
      if (session.state === 'failed') console.log(`     failed: ${session.message ?? ''}`);
    }
  } finally {
    await db?.close();
    await stack?.close();
    rmSync(work, { recursive: true, force: true });
  }
  const withInterval = rows.filter((r) => r.claimed && r.remeasured);
  const covered = withInterval.filter((r) => r.claimed!.low <= r.remeasured!.estimate && r.remeasured!.estimate <= r.claimed!.high).length;
  const claims = rows.filter((r) => r.decision === 'recommend');
  const falseClaims = claims.filter((r) => r.remeasured && r.remeasured.low > 0.95);
  console.log(
    `coverage: ${covered} of ${withInterval.length} claimed intervals contain the re-measured ratio (${withInterval.length ? ((100 * covered) / withInterval.length).toFixed(0) : '—'} %, goal ≥ 90 %)`,
  );
  console.log(
    `claims: ${claims.length} of ${rows.length} sessions recommended their candidate; ${falseClaims.length} of them re-measured with a whole interval short of the 5 % minimum effect; ${((Date.now() - started) / 60_000).toFixed(1)} min`,
  );
}

await main();

// bench/plans: how many windows does the planner probe save a REAL tuning session (issue 44)?
// The same session, with the probe (planAware: the agent asks its planner before a trial goes
// live) and without (the session as before it), each on a fresh stack (src/lab/stack.ts: a
// throwaway cluster under load, the service on embedded storage, the real `tuner-agent --local`
// with postgresql.include_plans on), on two workloads (src/lab/plan-workloads.ts):
//   coupon-check  a hashed subplan only above about 40 MB of work_mem, where pgtune gives this
//                 machine about 30 MB: the whole space, the product's defaults but the windows;
//   select-only   SELECT 1 alone, a planner-parameter session (knobs random_page_cost,
//                 seq_page_cost, effective_cache_size): every candidate is plan-neutral;
//   coupon-hash-mem  the coupon check on 20,000 revoked coupons, hashed from a hash_mem_multiplier
//                 of about 5 at the default work_mem, a session tuning hash_mem_multiplier alone
//                 (no spill diagnosis applies to it: the threshold search alone moves the first trial).
// Printed per session: windows to the first verified gain and to the end; then, per workload, the
// ratio with/without. "Windows" counts measured windows as bench/sessions.ts does: the first
// baseline and every row in state ok, failed or contaminated (plan-neutral and refused trials
// measure nothing).
//
//   node bench/plans.ts   --workload NAME[,NAME…] (both)  --window S (8)  --warmup S (2)
//                         --iterations N (10)  --seed S (4400)
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { couponCheck, PLAN_WORKLOADS } from '../src/lab/plan-workloads.ts';
import { startStack, type Stack } from '../src/lab/stack.ts';
import { until } from '../src/lab/until.ts';
import type { Workload } from '../src/lab/workloads.ts';
import { SESSION_DEFAULTS } from '../src/service/tuning/params.ts';
import { benchArgs } from './args.ts';

const { flags, usage, whole } = benchArgs('bench/plans', {
  workload: { type: 'string' },
  window: { type: 'string' },
  warmup: { type: 'string' },
  iterations: { type: 'string' },
  seed: { type: 'string' },
});
/** Each case: its workload and what its session tunes. */
const CASES: Record<string, { workload: Workload; body: Record<string, unknown> }> = {
  'coupon-check': { workload: PLAN_WORKLOADS['coupon-check'], body: {} },
  'select-only': {
    workload: PLAN_WORKLOADS['select-only'],
    body: { knobs: ['random_page_cost', 'seq_page_cost', 'effective_cache_size'] },
  },
  'coupon-hash-mem': { workload: couponCheck(20_000), body: { knobs: ['hash_mem_multiplier'] } },
};
const NAMES = (flags.workload ?? 'coupon-check,select-only,coupon-hash-mem').split(',').map((n) => n.trim());
for (const name of NAMES) if (!(name in CASES)) usage(`--workload ${name}: expected one of ${Object.keys(CASES).join(', ')}`);
const PLAN = {
  windowSeconds: whole('window', flags.window, 8, 2),
  warmupSeconds: whole('warmup', flags.warmup, 2, 0),
  iterations: whole('iterations', flags.iterations, SESSION_DEFAULTS.iterations, 1),
  seed: whole('seed', flags.seed, 4400, 0),
};
interface Row {
  ordinal: number;
  kind: string;
  phase: 'search' | 'verify';
  round: number | null;
  state: string;
  config: Record<string, number | string>;
  objective: number | null;
  failure: string | null;
  plans: { verdict: string; note: string } | null;
}
interface SessionView {
  id: string;
  state: string;
  message: string | null;
  verification: { decision: string } | null;
  steps: Array<{ n: number; outcome: string; keptAfter: number | null }>;
}
interface Result {
  workload: string;
  planAware: boolean;
  state: string;
  toGain: number | null;
  toEnd: number;
  skipped: number;
  refused: number;
  firstTrial: string;
  minutes: number;
  message: string | null;
}

const MEASURED = new Set(['ok', 'failed', 'contaminated']);
const ENDED = new Set(['done', 'stopped', 'reverted', 'failed']);
const VERIFIED_STEP = new Set(['kept', 'awaiting_approval', 'applying', 'not_kept']);
const say = (line: string) => process.stdout.write(`${line}\n`);
const windowsUpTo = (rows: readonly Row[], last: number) => 1 + rows.filter((r) => r.ordinal <= last && MEASURED.has(r.state)).length;

/** Windows to the first verified gain: a step verified, else a final verification that recommends. */
function toFirstGain(session: SessionView, rows: readonly Row[]): number | null {
  const step = [...session.steps].sort((a, b) => a.n - b.n).find((s) => VERIFIED_STEP.has(s.outcome));
  const lastOf = (phaseRows: Row[]) => phaseRows.at(-1)?.ordinal ?? Math.max(...rows.map((r) => r.ordinal));
  if (step) {
    // The step's A/B rounds end where the search resumes: the first search row after its rounds.
    const verify = rows.filter((r) => r.phase === 'verify');
    return windowsUpTo(rows, step.keptAfter ?? lastOf(verify));
  }
  if (session.verification?.decision === 'recommend') return windowsUpTo(rows, lastOf(rows.filter((r) => r.phase === 'verify')));
  return null;
}

let cleanupCurrent: (() => Promise<void>) | null = null;
for (const signal of ['SIGINT', 'SIGTERM'] as const)
  process.once(signal, () => void (cleanupCurrent?.() ?? Promise.resolve()).finally(() => process.exit(130)));

async function runSession(name: string, planAware: boolean, seed: number): Promise<Result> {
  const { workload, body } = CASES[name]!;
  const work = mkdtempSync(join(tmpdir(), 'tuner-bench-plans-'));
  let stack: Stack | undefined;
  const cleanup = async () => {
    await stack?.close();
    rmSync(work, { recursive: true, force: true });
  };
  cleanupCurrent = cleanup;
  try {
    say(`== ${name}, ${planAware ? 'with' : 'without'} the planner probe`);
    stack = await startStack({ workload, work, clients: workload.clients, reportSeconds: 1, includePlans: true });
    const { person, databaseId } = stack;
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
        requireApproval: false,
        seed,
        planAware,
        ...body,
      },
    );
    const path = `/api/manage/databases/${databaseId}/tuning-sessions/${created.id}`;
    const printed = new Set<number>();
    const maxWindows = 1 + PLAN.iterations * (2 + 2 * SESSION_DEFAULTS.abRoundsMax) + 2 * SESSION_DEFAULTS.abRoundsMax;
    const { session, iterations } = await until(
      `the ${workload.name} session to end`,
      async () => {
        const now = await person.call<{ session: SessionView; iterations: Row[] }>('GET', path);
        for (const it of now.iterations) {
          if (printed.has(it.ordinal) || ['planning', 'applying', 'measuring'].includes(it.state)) continue;
          printed.add(it.ordinal);
          const what = it.phase === 'verify' ? `A/B ${it.round ?? '?'} ${it.kind}` : it.kind;
          const note = it.plans && it.phase === 'search' && it.kind !== 'baseline' ? `  [${it.plans.note.slice(0, 160)}]` : '';
          say(`   #${String(it.ordinal).padStart(2)} ${what.padEnd(20)} ${it.state.padEnd(12)} ${it.objective?.toFixed(3) ?? '—'}${note}`);
        }
        return ENDED.has(now.session.state) ? now : null;
      },
      maxWindows * (PLAN.windowSeconds + PLAN.warmupSeconds + 20) * 1000,
      1000,
    );
    const trials = iterations.filter((r) => r.phase === 'search' && r.kind !== 'baseline');
    const first = trials[0];
    return {
      workload: name,
      planAware,
      state: session.state,
      toGain: toFirstGain(session, iterations),
      toEnd: 1 + iterations.filter((r) => MEASURED.has(r.state)).length,
      skipped: trials.filter((r) => r.state === 'plan_neutral').length,
      refused: trials.filter((r) => r.state === 'refused').length,
      firstTrial: first ? `${first.kind} ${memoryOf(first.config)}` : '—',
      minutes: (Date.now() - started) / 60_000,
      message: session.message,
    };
  } finally {
    await cleanup();
    cleanupCurrent = null;
  }
}

/** The memory parameters a trial sets, for the summary's first-trial column. */
const memoryOf = (config: Record<string, number | string>) =>
  ['work_mem', 'hash_mem_multiplier']
    .filter((name) => config[name] !== undefined)
    .map((name) => `${name} ${String(config[name])}`)
    .join(', ') || 'no memory parameter';

const ratio = (a: number | null, b: number | null) => (a === null || b === null || b === 0 ? '—' : (a / b).toFixed(2));

async function main(): Promise<void> {
  const results: Result[] = [];
  for (const name of NAMES) {
    for (const planAware of [false, true]) {
      const r = await runSession(name, planAware, PLAN.seed);
      say(
        `-- ${r.workload} ${r.planAware ? 'with' : 'without'} the probe: ${r.state}; first verified gain after ${r.toGain ?? '—'} windows; ${r.toEnd} windows to the end; ` +
          `${r.skipped} plan-neutral, ${r.refused} refused; first trial: ${r.firstTrial}; ${r.minutes.toFixed(1)} min`,
      );
      say(`   end message: ${r.message ?? '—'}`);
      results.push(r);
    }
  }
  say('');
  say(`== summary: ${PLAN.windowSeconds} s windows (fixed), ${PLAN.warmupSeconds} s warm-up, ${PLAN.iterations} trials, seed ${PLAN.seed}`);
  say('workload       probe    windows to first gain  windows to end  plan-neutral  refused  first trial');
  for (const r of results)
    say(
      `${r.workload.padEnd(14)} ${(r.planAware ? 'with' : 'without').padEnd(8)} ${String(r.toGain ?? '—').padStart(21)}  ${String(r.toEnd).padStart(14)}  ${String(r.skipped).padStart(12)}  ${String(r.refused).padStart(7)}  ${r.firstTrial}`,
    );
  for (const name of NAMES) {
    const without = results.find((r) => r.workload === name && !r.planAware);
    const withProbe = results.find((r) => r.workload === name && r.planAware);
    if (!without || !withProbe) continue;
    say(
      `${name}: with/without, windows to the first verified gain ${ratio(withProbe.toGain, without.toGain)}, to the end ${ratio(withProbe.toEnd, without.toEnd)}`,
    );
  }
}

await main();

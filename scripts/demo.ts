// npm run demo: the whole product on one machine, with nothing to set up.
//   a throwaway PostgreSQL cluster under a pgbench load (a lab workload, src/lab/workloads.ts)
//   → the tuning service on embedded storage → the real `tuner-agent --local` process
//   → a short tuning session: one line per window (trials, baseline windows, A/B rounds), and a
//     line when a big win starts being verified as a step and when it is verified, kept or not
//   → its last line: the verified steps kept and the verified gain with their intervals, or "no
//     significant improvement"
//   → the dashboard stays up until Ctrl+C; the cluster and the data are removed at the end, and
//     at any point on Ctrl+C (SIGINT), SIGTERM (`kill`, `timeout`) or SIGHUP (a closed terminal).
// `--short` (CI): a tiny session, and it exits when done. `--workload select-1|work-mem|tpcb-like`.
import { mkdtempSync, rmSync } from 'node:fs';
import { constants, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { startStack, type Stack } from '../src/lab/stack.ts';
import { until } from '../src/lab/until.ts';
import { workloadByName } from '../src/lab/workloads.ts';
import { stepOutcomeWords } from '../src/service/tuning/steps.ts';
import type { SessionStep } from '../src/service/tuning/store.ts';

const { values: flags } = parseArgs({
  options: { short: { type: 'boolean' }, iterations: { type: 'string' }, window: { type: 'string' }, workload: { type: 'string' } },
});
const SHORT = flags.short === true;
const WORKLOAD = workloadByName(flags.workload ?? 'work-mem');
const PLAN = {
  iterations: Number(flags.iterations ?? (SHORT ? 2 : 8)),
  windowSeconds: Number(flags.window ?? (SHORT ? 4 : 30)),
  warmupSeconds: SHORT ? 1 : 5,
  reportSeconds: SHORT ? 1 : 5,
  abRoundsMin: 3,
  abRoundsMax: SHORT ? 3 : 6,
};

interface ChangeView {
  name: string;
  baseline: string;
  value: string;
}
interface IterationView {
  ordinal: number;
  kind: string;
  phase: 'search' | 'verify';
  round: number | null;
  state: string;
  objective: number | null;
  objectiveInterval: { low: number; high: number } | null;
  baselineRatio: number | null;
  bestSoFar: number | null;
  diff: ChangeView[];
  reason: string;
  failure: string | null;
}
interface StepView {
  n: number;
  iteration: number;
  outcome: SessionStep['outcome'];
  note: string | null;
  keptAfter: number | null;
  summary: string | null;
  diff: ChangeView[];
}
interface SessionView {
  id: string;
  state: string;
  message: string | null;
  best: { diff: ChangeView[] } | null;
  baseline: { stats: { tps: number; weightedRuntimeMs: number | null } | null };
  verification: {
    candidate: { iteration: number };
    decision: string;
    summary: string | null;
    note: string | null;
    purpose?: 'step' | 'final';
  } | null;
  steps: StepView[];
}

const say = (line: string) => process.stdout.write(`${line}\n`);

/** One window: a trial with its objective (and interval once the noise is measured), a baseline window with the drift, or half of an A/B round. */
function windowLine(it: IterationView, steps: readonly StepView[]): string {
  const what = it.phase === 'verify' ? `A/B ${it.round ?? '?'} ${it.kind}` : it.kind;
  if (it.state !== 'ok') return `${what.padEnd(13)} ${it.state}: ${it.failure ?? ''}`;
  if (it.kind === 'baseline') {
    // After a kept step the known-good is that step: its window's ratio is the step's gain as well as the drift.
    const step = steps.filter((s) => s.outcome === 'kept' && s.keptAfter !== null && s.keptAfter < it.ordinal).at(-1);
    const why = step ? `step ${step.n}, the known-good now: its gain and the drift` : 'the drift';
    return `${what.padEnd(13)} runtime ${it.baselineRatio?.toFixed(3) ?? '—'} × the first baseline window's (${why})`;
  }
  const interval = it.objectiveInterval ? ` (${it.objectiveInterval.low.toFixed(2)}–${it.objectiveInterval.high.toFixed(2)})` : '';
  const best = it.phase === 'search' ? `; best so far ${it.bestSoFar?.toFixed(3) ?? '—'}, not verified  [${changes(it.diff)}]` : '';
  // Why the optimizer chose it, as the dashboard shows it.
  const why = it.phase === 'search' ? `\n${''.padStart(4)}why: ${it.reason}` : '';
  return `${what.padEnd(13)} objective ${it.objective?.toFixed(3) ?? '—'}${interval} × baseline${best}${why}`;
}

/** A step as it happens: started (verifying), then verified and waiting, kept, or not. */
function stepLine(step: StepView, against: StepView | undefined): string {
  const what = `step ${step.n} (iteration ${step.iteration})`;
  if (step.outcome === 'verifying')
    return `== ${what}: a big win, verified now against ${against ? `step ${against.n}` : 'the baseline'} in A/B rounds  [${changes(step.diff)}]`;
  const figures = step.summary ? `: ${step.summary}` : '';
  const note = step.note && step.outcome !== 'kept' ? ` (${step.note})` : '';
  const then =
    step.outcome === 'kept'
      ? `; the known-good configuration from window ${(step.keptAfter ?? 0) + 1} on, the search goes on from it`
      : step.outcome === 'not_verified' || step.outcome === 'refused'
        ? '; the search goes on from the known-good configuration'
        : step.outcome === 'awaiting_approval'
          ? '; approve it on the dashboard to keep it'
          : '';
  return `== ${what} ${stepOutcomeWords[step.outcome]}${figures}${note}${then}`;
}

const keptSteps = (session: SessionView) => session.steps.filter((s) => s.outcome === 'kept');

/** The demo's last line: the verified steps kept and the verified figure, or the honest "no significant improvement". */
function resultLine(session: SessionView): string {
  if (session.state !== 'done') return `no result: the session ended ${session.state}`;
  const kept = keptSteps(session);
  const v = session.verification;
  const final = v && v.purpose !== 'step' ? v : null;
  if (kept.length === 0) {
    if (final?.decision === 'recommend') return `verified: ${final.summary ?? ''}; applied and kept as known-good`;
    return `no significant improvement${final?.summary ? `: ${final.summary}` : ''}; the database stays on its known-good configuration`;
  }
  const steps = `verified step${kept.length === 1 ? '' : 's'} kept: ${kept.map((s) => `step ${s.n} (iteration ${s.iteration}): ${s.summary ?? 'verified'}`).join('; ')}`;
  const last = kept.at(-1)!;
  if (final?.decision === 'recommend')
    return `${steps}; then verified against step ${last.n}: ${final.summary ?? ''}; applied and kept as known-good`;
  if (final)
    return `${steps}; then no significant improvement${final.summary ? `: ${final.summary}` : ''}; the database stays on step ${last.n}, its known-good configuration`;
  return `${steps}; the database stays on step ${last.n}, its known-good configuration`;
}
const changes = (diff: ChangeView[]) =>
  diff.length === 0 ? 'no change' : diff.map((c) => `${c.name} ${c.baseline}→${c.value}`).join(', ');

/** The first SIGINT, SIGTERM or SIGHUP stops the demo: whatever it is doing (starting the stack,
 * the session, the dashboard) ends, and the stack and the working directory are removed before
 * the process exits. Later ones wait for that removal rather than cut it short. */
const stop = new AbortController();
/** `by`: the signal that stopped the demo; `finished`: the session's result was printed, so that a
 * signal after it is the demo's ordinary end (status 0). */
const state: { by: NodeJS.Signals | null; finished: boolean } = { by: null, finished: false };
for (const name of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.on(name, () => {
    if (state.by) return;
    state.by = name;
    say(`== ${name}: stopping; removing the cluster, the service's data and the agent`);
    stop.abort(new Error(`stopped by ${name}`));
  });
}
// A closed terminal (SIGHUP) or a closed pipe makes writing fail: the removal must go on anyway.
process.stdout.on('error', () => undefined);

async function main(): Promise<void> {
  const work = mkdtempSync(join(tmpdir(), 'tuner-demo-'));
  say(`== working directory ${work} (removed at the end)`);
  let stack: Stack | undefined;
  try {
    stack = await startStack({ workload: WORKLOAD, work, clients: 2, reportSeconds: PLAN.reportSeconds, say, signal: stop.signal });
    const { person, databaseId, service, password } = stack;
    say(
      `== a tuning session: ${PLAN.iterations} trials × (${PLAN.warmupSeconds} s warm-up + ${PLAN.windowSeconds} s window), reload-only, then ${PLAN.abRoundsMin}–${PLAN.abRoundsMax} A/B rounds`,
    );
    const started = await person.call<{ session: SessionView }>('POST', `/api/manage/databases/${databaseId}/tuning-sessions`, {
      iterations: PLAN.iterations,
      windowSeconds: PLAN.windowSeconds,
      warmupSeconds: PLAN.warmupSeconds,
      abRoundsMin: PLAN.abRoundsMin,
      abRoundsMax: PLAN.abRoundsMax,
      requireApproval: false,
      seed: 7,
    });
    const sessionPath = `/api/manage/databases/${databaseId}/tuning-sessions/${started.session.id}`;
    /** Each window's state as last printed: a trip may be judged again (contaminated) after the baseline window that follows it. */
    const printed = new Map<number, string>();
    /** Each step's outcome as last printed. */
    const stepsShown = new Map<number, string>();
    let finalShown = false;
    let baselineShown = false;
    const final = await until(
      'the session to end',
      async () => {
        const { session, iterations } = await person.call<{ session: SessionView; iterations: IterationView[] }>('GET', sessionPath);
        const stats = session.baseline.stats;
        if (stats && !baselineShown) {
          baselineShown = true;
          say(`baseline: weighted query runtime ${stats.weightedRuntimeMs?.toFixed(3) ?? '—'} ms, ${stats.tps.toFixed(0)} transactions/s`);
        }
        for (const it of iterations) {
          if (printed.get(it.ordinal) === it.state || !['ok', 'failed', 'cancelled', 'contaminated'].includes(it.state)) continue;
          const again = printed.has(it.ordinal) ? ` (judged again: it was ${printed.get(it.ordinal)})` : '';
          printed.set(it.ordinal, it.state);
          say(`#${String(it.ordinal).padStart(2)} ${windowLine(it, session.steps)}${again}`);
        }
        for (const step of session.steps) {
          if (stepsShown.get(step.n) === step.outcome) continue;
          const against = session.steps.filter((s) => s.n < step.n && s.outcome === 'kept').at(-1);
          // Polled once a second: a step may pass 'verifying' between two looks; its start is told anyway.
          if (!stepsShown.has(step.n) && step.outcome !== 'verifying') say(stepLine({ ...step, outcome: 'verifying' }, against));
          stepsShown.set(step.n, step.outcome);
          say(stepLine(step, against));
        }
        if (session.verification?.purpose === 'final' && !finalShown) {
          // The A/B lines that follow are the search's end, not a step's.
          finalShown = true;
          const against = session.steps.filter((s) => s.outcome === 'kept').at(-1);
          say(
            `== the search's end: its recommendation (iteration ${session.verification.candidate.iteration}) verified against ${against ? `step ${against.n}` : 'the baseline'} in A/B rounds`,
          );
        }
        return ['done', 'stopped', 'reverted', 'failed'].includes(session.state) ? session : null;
      },
      // A hang's bound: every trial may start a step (its A/B rounds and a baseline window after it), then the final rounds.
      (PLAN.iterations * (2 + 2 * PLAN.abRoundsMax) + 2 * PLAN.abRoundsMax + 4) * (PLAN.windowSeconds + PLAN.warmupSeconds + 30) * 1000,
      1000,
      stop.signal,
    );

    say(`== result: session ${final.state}${final.message ? ` (${final.message})` : ''}`);
    if (final.best) say(`configuration kept: ${changes(final.best.diff)}`);
    say(resultLine(final));
    state.finished = true;
    if (SHORT) return;
    say(`the dashboard stays up at ${service.url}/ (admin / ${password}); Ctrl+C ends the demo and removes everything`);
    await new Promise((resolve) => stop.signal.addEventListener('abort', resolve, { once: true }));
  } catch (err) {
    // Stopped by a signal: what was under way failed with it, and is no failure of the demo.
    if (!stop.signal.aborted) throw err;
  } finally {
    try {
      await stack?.close();
    } finally {
      // Retried: a service stopped while it started may still be writing its storage there.
      rmSync(work, { recursive: true, force: true, maxRetries: 5 });
    }
  }
}

await main();
// Stopped by a signal before its result, the status says which (128 + its number), as if the
// signal had ended the process.
if (state.by && !state.finished) process.exit(128 + constants.signals[state.by]);

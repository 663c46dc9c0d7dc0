// npm run demo: the whole product on one machine, with nothing to set up.
//   a throwaway PostgreSQL cluster under a pgbench load (a lab workload, src/lab/workloads.ts)
//   → the tuning service on embedded storage → the real `tuner-agent --local` process
//   → a short tuning session: one line per window (trials, baseline windows, A/B rounds)
//   → its last line: the verified gain with its interval, or "no significant improvement"
//   → the dashboard stays up until Ctrl+C; the cluster and the data are removed at the end.
// `--short` (CI): a tiny session, and it exits when done. `--workload select-1|work-mem|tpcb-like`.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { startStack, type Stack } from '../src/lab/stack.ts';
import { until } from '../src/lab/until.ts';
import { workloadByName } from '../src/lab/workloads.ts';

const { values: flags } = parseArgs({
  options: { short: { type: 'boolean' }, iterations: { type: 'string' }, window: { type: 'string' }, workload: { type: 'string' } },
});
const SHORT = flags.short === true;
const WORKLOAD = workloadByName(flags.workload ?? 'work-mem');
const PLAN = {
  iterations: Number(flags.iterations ?? (SHORT ? 1 : 8)),
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
interface SessionView {
  id: string;
  state: string;
  message: string | null;
  best: { diff: ChangeView[] } | null;
  baseline: { stats: { tps: number; weightedRuntimeMs: number | null } | null };
  verification: { decision: string; summary: string | null; note: string | null } | null;
}

const say = (line: string) => process.stdout.write(`${line}\n`);

/** One window: a trial with its objective (and interval once the noise is measured), a baseline window with the drift, or half of an A/B round. */
function windowLine(it: IterationView): string {
  const what = it.phase === 'verify' ? `A/B ${it.round ?? '?'} ${it.kind}` : it.kind;
  if (it.state !== 'ok') return `${what.padEnd(13)} ${it.state}: ${it.failure ?? ''}`;
  if (it.kind === 'baseline')
    return `${what.padEnd(13)} runtime ${it.baselineRatio?.toFixed(3) ?? '—'} × the first baseline window's (the drift)`;
  const interval = it.objectiveInterval ? ` (${it.objectiveInterval.low.toFixed(2)}–${it.objectiveInterval.high.toFixed(2)})` : '';
  const best = it.phase === 'search' ? `; best so far ${it.bestSoFar?.toFixed(3) ?? '—'}, not verified  [${changes(it.diff)}]` : '';
  // Why the optimizer chose it, as the dashboard shows it.
  const why = it.phase === 'search' ? `\n${''.padStart(4)}why: ${it.reason}` : '';
  return `${what.padEnd(13)} objective ${it.objective?.toFixed(3) ?? '—'}${interval} × baseline${best}${why}`;
}

/** The demo's last line: the verified figure, or the honest "no significant improvement". */
function resultLine(session: SessionView): string {
  const v = session.verification;
  if (session.state === 'done' && v?.decision === 'recommend') return `verified: ${v.summary ?? ''}; applied and kept as known-good`;
  if (session.state === 'done')
    return `no significant improvement${v?.summary ? `: ${v.summary}` : ''}; the database stays on its known-good configuration`;
  return `no result: the session ended ${session.state}`;
}
const changes = (diff: ChangeView[]) =>
  diff.length === 0 ? 'no change' : diff.map((c) => `${c.name} ${c.baseline}→${c.value}`).join(', ');

async function main(): Promise<void> {
  const work = mkdtempSync(join(tmpdir(), 'tuner-demo-'));
  let stack: Stack | undefined;
  let cleaned = false;
  const cleanup = async () => {
    if (cleaned) return;
    cleaned = true;
    await stack?.close();
    rmSync(work, { recursive: true, force: true });
  };
  process.once('SIGINT', () => void cleanup().then(() => process.exit(0)));

  try {
    stack = await startStack({ workload: WORKLOAD, work, clients: 2, reportSeconds: PLAN.reportSeconds, say });
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
    const printed = new Set<number>();
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
          if (printed.has(it.ordinal) || !['ok', 'failed', 'cancelled', 'contaminated'].includes(it.state)) continue;
          printed.add(it.ordinal);
          say(`#${String(it.ordinal).padStart(2)} ${windowLine(it)}`);
        }
        return ['done', 'stopped', 'reverted', 'failed'].includes(session.state) ? session : null;
      },
      (PLAN.iterations + 2 * PLAN.abRoundsMax + 4) * (PLAN.windowSeconds + PLAN.warmupSeconds + 30) * 1000,
      1000,
    );

    say(`== result: session ${final.state}${final.message ? ` (${final.message})` : ''}`);
    if (final.best) say(`configuration kept: ${changes(final.best.diff)}`);
    say(resultLine(final));
    if (SHORT) return;
    say(`the dashboard stays up at ${service.url}/ (admin / ${password}); Ctrl+C ends the demo and removes everything`);
    await new Promise(() => undefined);
  } finally {
    await cleanup();
  }
}

await main();

// End to end: the trade-off workload (src/lab/workloads.ts) through the real tuner-agent
// (--local), the real service on PGlite storage and a throwaway cluster under pgbench. pgtune's
// step (random_page_cost 1.1, the first trial: no diagnosis fires on this workload) makes the
// region reports a nested loop of index lookups, about 2.5 times faster, and the range report an
// index scan with a heap fetch per order, 2-3 times slower. The mix is faster, so the session
// verifies the configuration; the range report's regression must be named in its message, listed
// with `regression` in the verification's statements, and the configuration must not be kept
// without a person's approval although the session does not require approval (issue #30, "no
// hidden regressions"). No speed is asserted: only what the session concludes and does.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Cluster } from '../src/lab/cluster.ts';
import { STATEMENT_MIN_SHARE } from '../src/measure/verify.ts';
import { WORKLOADS } from '../src/lab/workloads.ts';
import { startE2eLab, type E2eLab } from './helpers/e2e-lab.ts';
import type { PersonClient } from './helpers/service.ts';
import { until } from './helpers/until.ts';
import { getTuningSession, startTuningSession, type SessionJson } from './sessions-agent.ts';

interface StatementJson {
  key: string;
  share: number;
  ratio: { estimate: number; low: number; high: number } | null;
  rounds: number;
  regression: boolean;
}
/** The session as the API shows it, with each step's per-statement changes. */
type TradeOffSession = Omit<SessionJson, 'steps'> & { steps: Array<SessionJson['steps'][number] & { statements: StatementJson[] }> };

const workload = WORKLOADS['trade-off'];

describe('a configuration with a built-in trade-off (real tuner-agent, throwaway cluster, PGlite storage)', () => {
  let e2e: E2eLab;
  let cluster: Cluster;
  let person: PersonClient;
  let databaseId: string;
  const began = Date.now();

  before(async () => {
    e2e = await startE2eLab('e2e-tradeoff', { workloads: [workload] });
    ({ cluster, person, databaseId } = e2e);
    console.log(`setup: ${((Date.now() - began) / 1000).toFixed(1)} s`);
  });
  after(() => e2e?.close());

  test(
    'the range report that random_page_cost 1.1 makes slower is named, and the configuration waits for approval',
    { timeout: 360_000 },
    async (t) => {
      await e2e.runLoad(workload, workload.clients);

      // requireApproval false, statementRegressions left at its default ('approve'): without the
      // regression, a verified configuration would be applied and kept at once.
      const started = await startTuningSession(person, databaseId, {
        iterations: 2,
        windowSeconds: 10,
        warmupSeconds: 2,
        seed: 20261126,
        abRoundsMin: 3,
        abRoundsMax: 8,
        requireApproval: false,
      });
      const session = await until(
        'the session to verify its configuration',
        async () => {
          const { session: now } = await getTuningSession(person, databaseId, started.id);
          return ['awaiting_approval', 'applying_best', 'done', 'failed', 'stopped'].includes(now.state) ? (now as TradeOffSession) : null;
        },
        240_000,
        500,
      );
      const { iterations } = await getTuningSession(person, databaseId, started.id);
      console.log(`${session.state}: ${session.message ?? ''}`);
      for (const it of iterations)
        console.log(
          `  #${it.ordinal} ${it.phase} ${it.kind}${it.round ? ` ${it.round}` : ''} ${it.state} objective ${it.objective?.toFixed(3) ?? '–'} ${it.failure ?? ''}`,
        );

      // The mix's gain (about 0.7) against the noise of 10-second windows on a shared machine:
      // when the rounds cannot verify it, nothing is recommended at all, so there is no
      // regression to name. Nothing was kept; the test says so and is skipped rather than failed
      // on the machine's noise (e2e-session's work-mem session verifies a 5× gain every time).
      if (session.state === 'done' && /^no significant improvement/.test(session.message ?? '')) {
        assert.ok(!session.steps.some((step) => step.outcome === 'kept'), 'nothing kept');
        return t.skip(`the mix's gain was not verified on this machine this time: ${session.message ?? ''}`);
      }
      assert.equal(session.state, 'awaiting_approval', `${session.message ?? ''}\n${e2e.agent.output().slice(-3000)}`);

      // What was verified: pgtune's step, with its random_page_cost.
      const first = iterations.find((it) => it.phase === 'search' && it.kind !== 'baseline');
      assert.equal(first?.kind, 'heuristic', 'no diagnosis fires on this workload: the first trial is pgtune’s');
      const candidate = session.best!.config;
      assert.ok(Number(candidate['random_page_cost']) <= 1.5, `random_page_cost ${candidate['random_page_cost']}`);

      // The range report, and no other statement, is the regression: by its queryid.
      const [range] = await cluster.sql<{ queryid: string }>(
        "SELECT queryid::text FROM pg_stat_statements WHERE query LIKE 'SELECT customer, count(*), max(amount) FROM lab_orders%' AND toplevel",
      );
      assert.ok(range, 'the range report is in pg_stat_statements');
      const step = session.steps.find((s) => s.outcome === 'awaiting_approval');
      const statements: StatementJson[] = step ? step.statements : (session.verification?.statements ?? []);
      for (const c of statements)
        console.log(
          `  statement ${c.key}: ${(100 * c.share).toFixed(0)} % of the baseline's time, ×${c.ratio?.estimate.toFixed(2) ?? '–'} (${c.ratio?.low.toFixed(2) ?? '–'} to ${c.ratio?.high.toFixed(2) ?? '–'})${c.regression ? ' REGRESSION' : ''}`,
        );
      console.log(`  window noise ${session.noise ?? '–'}`);
      // Proven at the verification's confidence, or measured ×1.25 or slower when the rounds ran
      // out (verify.ts unsureRegressions): either way named, and not kept silently.
      const regressions = statements.filter((c) => c.regression || (c.ratio?.estimate ?? 0) >= 1.25);
      assert.deepEqual(
        regressions.map((c) => c.key.split(':')[2]),
        [range.queryid],
        `the range report's regression alone: ${JSON.stringify(statements)}`,
      );
      const [regression] = regressions;
      // The workload gives it 13-15 % of the time (docs/benchmarks.md); the session estimates its
      // share from one short baseline window, on a shared machine, so only the check's own floor
      // is asserted here.
      assert.ok(
        regression!.share >= STATEMENT_MIN_SHARE,
        `the range report carries ${(100 * regression!.share).toFixed(1)} % of the baseline's time`,
      );
      const faster = statements.find((c) => c.key.split(':')[2] !== range.queryid);
      assert.ok(faster?.ratio && faster.ratio.estimate < 1, `the region report is faster: ${JSON.stringify(faster)}`);

      // Named in the message (and the step's note), with its figures.
      const named = new RegExp(
        `but it (?:makes|may make) a statement slower by 25 % or more(?: \\(measured so, not proven[^)]*\\))?: statement ${regression!.key} \\(\\d+ % of the baseline's time\\) ×\\d+\\.\\d\\d \\(95 % CI ×\\d+\\.\\d\\d to ×\\d+\\.\\d\\d\\)`,
      );
      assert.match(session.message ?? '', named);
      assert.match(session.message ?? '', /approve it to apply and keep it/);
      if (step) assert.match(step.note ?? '', /slower by 25 % or more(?: \([^)]*\))?: statement /);

      // Nothing kept silently: no apply with keep, and the database back on its known-good settings.
      const commands = (
        await person.get<{ commands: Array<{ command: { kind: string; keep?: boolean } }> }>(
          `/api/manage/databases/${databaseId}/commands?limit=100`,
        )
      ).body.commands;
      assert.ok(!commands.some((c) => c.command.kind === 'apply' && c.command.keep), 'no configuration kept');
      await until(
        'the database back on random_page_cost 4',
        async () =>
          (await cluster.sql<{ setting: string }>("SELECT setting FROM pg_settings WHERE name = 'random_page_cost'"))[0]?.setting === '4',
        30_000,
      );
      console.log(`whole test: ${((Date.now() - began) / 1000).toFixed(1)} s`);
    },
  );
});

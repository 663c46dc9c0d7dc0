// A trial that wrecks query runtime, for the guardrail tests: planner costs that turn an index
// lookup on a range into a full scan of a 400,000-row table.
import assert from 'node:assert/strict';
import pg from 'pg';
import { applyChange, restore, type ApplyContext } from '../../src/agent/applying/apply.ts';
import { baselineMixFrom, buildMetricsReport, createCollector, diffSnapshots } from '../../src/agent/collect/index.ts';
import { loadConfig } from '../../src/agent/config/load.ts';
import type { Db } from '../../src/agent/database/db.ts';
import { createGuard, knownGoodFigures } from '../../src/agent/applying/guardrails.ts';
import { Journal } from '../../src/agent/applying/journal.ts';
import { createLogger } from '../../src/agent/base/log.ts';
import { createLocalTarget } from '../../src/agent/targets/local/target.ts';
import type { Cluster } from '../../src/lab/cluster.ts';
import { until } from './until.ts';

export const WRECKING_TRIAL = { random_page_cost: 10, seq_page_cost: 0.1 } as const;

/** Creates the table `g` the workload reads. */
export async function createWreckableTable(cluster: Cluster): Promise<void> {
  await cluster.sql(
    `CREATE TABLE g AS SELECT i AS id, (random() * 1000000)::int AS x, repeat('x', 100) AS pad FROM generate_series(1, 400000) AS i`,
  );
  await cluster.sql('CREATE INDEX ON g (x)');
  await cluster.sql('ANALYZE g');
}

/** A range width whose plan is an index or bitmap scan by default and a full scan under the trial. */
export async function rangeThatFlips(client: pg.Client): Promise<number> {
  const plan = async (k: number) =>
    (await client.query<{ 'QUERY PLAN': string }>(`EXPLAIN SELECT count(*) FROM g WHERE x BETWEEN 1000 AND ${1000 + k}`)).rows
      .map((r) => r['QUERY PLAN'])
      .join('\n');
  const trial = Object.entries(WRECKING_TRIAL)
    .map(([name, value]) => `SET ${name} = ${value}`)
    .join('; ');
  for (const k of [1000, 2000, 4000, 8000, 16000]) {
    await client.query('RESET random_page_cost; RESET seq_page_cost');
    const byDefault = await plan(k);
    await client.query(trial);
    const underTrial = await plan(k);
    await client.query('RESET random_page_cost; RESET seq_page_cost');
    if (!byDefault.includes('Seq Scan') && underTrial.includes('Seq Scan')) return k;
  }
  throw new Error('no range width flips the plan; the test data no longer fits its purpose');
}

export interface RangeWorkload {
  /** Queries completed so far. */
  readonly calls: number;
  stop(): Promise<void>;
}

/** Runs range counts on `g` in a loop until stop() is called; each one picks a plan afresh. */
export async function startRangeWorkload(cluster: Cluster): Promise<RangeWorkload> {
  const client = new pg.Client({ connectionString: cluster.adminUrl });
  // A connection lost while the test tears down is reported by the running query (below), not as
  // an unhandled 'error' event after the test has ended.
  client.on('error', () => undefined);
  await client.connect();
  const k = await rangeThatFlips(client);
  let stopping = false;
  let calls = 0;
  const running = (async () => {
    for (let i = 0; !stopping; i++) {
      const from = (i * 7919) % 900000;
      await client.query(`SELECT count(*) FROM g WHERE x BETWEEN ${from} AND ${from + k}`);
      calls++;
    }
    await client.end();
  })();
  return {
    get calls() {
      return calls;
    },
    stop: async () => {
      stopping = true;
      await running;
    },
  };
}

/** Waits until the guardrails have reverted the trial (`reverted`), for as long as the workload
 * gives them something to judge: the guard needs a window of enough calls, and on a loaded machine
 * those take as long as they take. Fails once the workload ran `calls` more queries without it. */
export async function untilRevertedWithin(workload: RangeWorkload, calls: number, reverted: () => Promise<boolean>): Promise<void> {
  const from = workload.calls;
  await until(
    'the agent to revert the trial by itself',
    async () => {
      if (await reverted()) return true;
      if (workload.calls - from > calls)
        throw new Error(`the trial was not reverted while the workload ran ${workload.calls - from} queries under it`);
      return false;
    },
    10 * 60_000,
  );
}

/**
 * The guardrails alone, on `cluster` as the agent's `db`: known-good figures from a window of the
 * running `workload`, the wrecking trial applied, the guard ticking until it sees the breach,
 * and the revert to known-good read back from pg_settings. `dir` holds the journal.
 */
export async function guardRevertsWreckingTrial(cluster: Cluster, db: Db, dir: string, workload: RangeWorkload): Promise<void> {
  const { config } = loadConfig({
    cwd: dir,
    env: { AGENT_POSTGRESQL_CONNECTION_URL: cluster.agentUrl },
    target: 'local',
    needsService: false,
  });
  const lines: string[] = [];
  const ctx: ApplyContext = {
    db,
    config,
    target: createLocalTarget({ db, config }),
    journal: Journal.open(dir, 'guard-test'),
    log: createLogger({ write: (l) => lines.push(l) }),
  };

  // Known-good figures from a window under the configuration the agent found.
  const collector = createCollector(db, { includeQueries: false });
  const first = await collector.collect();
  await new Promise((r) => setTimeout(r, 2000));
  const baselineDelta = diffSnapshots(first, await collector.collect());
  const mix = baselineMixFrom(baselineDelta);
  const figures = knownGoodFigures(buildMetricsReport(baselineDelta, { includeQueries: false, baselineMix: mix }));
  assert.ok(figures.callsPerSecond > 10, `the workload runs (${figures.callsPerSecond} calls/s)`);

  const outcome = await applyChange(ctx, WRECKING_TRIAL, { accept: false });
  assert.equal(outcome.status, 'applied', lines.join('\n'));
  const guard = createGuard(db, figures, mix);
  await guard.tick([]);
  let breaches: string[] = [];
  // On a loaded machine a full scan may take long enough that a 1 s tick holds too few calls to
  // judge; the guard's window then grows until it holds enough, for as long as the workload runs.
  const callsBefore = workload.calls;
  while (breaches.length === 0 && workload.calls - callsBefore <= 100) {
    await new Promise((r) => setTimeout(r, 1000));
    breaches = await guard.tick([]);
  }
  assert.match(breaches.join('\n'), /query runtime .* is \d+\.\d× the known-good/);
  const reverted = await restore(ctx, 'knownGood', `guardrail: ${breaches.join('; ')}`);
  assert.equal(reverted?.status, 'applied');
  const rows = await cluster.sql<{ name: string; setting: string }>(
    `SELECT name, setting FROM pg_settings WHERE name IN ('random_page_cost', 'seq_page_cost') ORDER BY name`,
  );
  assert.deepEqual(rows, [
    { name: 'random_page_cost', setting: '4' },
    { name: 'seq_page_cost', setting: '1' },
  ]);
  assert.equal(ctx.journal.needsRecovery(), false);
}

// End to end, always on (issue 31): the real tuner-agent (--local) on a throwaway cluster, the
// real service on PGlite storage, and the dashboard in headless Chromium; no session unless the
// test starts one.
//   advice      the lab's work-mem workload (a NOT IN report whose subquery spills at the default
//               4 MB) runs; the advice, in the API and on the dashboard, names work_mem with its
//               evidence (temporary bytes, as pg_stat_statements counts them) and the statement
//               behind it; a session started from it tries that diagnosis first, with the agent
//               applying it, and a stop puts the database back on its baseline.
//   throughput  pgbench runs `SELECT 1` while the agent reports every 2 s: the throughput the
//               dashboard shows (statements/s), averaged over the reports that fall inside
//               pgbench's run, is within 10 % of pgbench's own tps. A ratio of two measurements
//               of one thing, not a speed.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import type { Browser, Page } from 'playwright-core';
import type { Cluster } from '../src/lab/cluster.ts';
import { PAGE_BYTES } from '../src/knobs/index.ts';
import { findPgbench } from '../src/lab/pgbench.ts';
import { WORKLOADS } from '../src/lab/workloads.ts';
import { startE2eLab, type E2eLab } from './helpers/e2e-lab.ts';
import type { MetricsReport } from '../src/protocol/report.ts';
import { AdviceViewSchema, type AdviceView } from '../src/service/advice/views.ts';
import { formatNumber } from '../src/service/web/format.ts';
import { SCREENSHOTS, launchChromium, logInOnPage, openWatchedPage, skipWithoutChromium } from './helpers/browser.ts';
import type { PersonClient } from './helpers/service.ts';
import { timeoutFor, until } from './helpers/until.ts';
import { getTuningSession, isTrialJson, startTuningSession } from './sessions-agent.ts';

const run = promisify(execFile);
const WORK_MEM_DEFAULT_KB = 4096;

interface LatestReport {
  id: string;
  seq: number;
  receivedAt: string;
  metrics: MetricsReport | null;
}

describe('always on, end to end (real tuner-agent, throwaway cluster, PGlite storage, Chromium)', { skip: skipWithoutChromium }, () => {
  let e2e: E2eLab;
  let cluster: Cluster;
  let person: PersonClient;
  let databaseId: string;
  let browser: Browser | undefined;
  let page: Page;
  let problems: string[] = [];
  const began = Date.now();

  const workMem = async () =>
    (await cluster.sql<{ setting: string }>(`SELECT setting FROM pg_settings WHERE name = 'work_mem'`))[0]!.setting;
  const settings = async () =>
    new Map(
      (await cluster.sql<{ name: string; setting: string }>('SELECT name, setting FROM pg_settings')).map((r) => [r.name, r.setting]),
    );
  const latestReport = async () =>
    (await person.get<{ report: LatestReport | null }>(`/api/manage/databases/${databaseId}/reports/latest`)).body.report;
  const setReportInterval = (seconds: number) => e2e.setReportInterval(seconds);

  before(async () => {
    // With the statements' texts, so that the advice shows the statement behind it.
    e2e = await startE2eLab('e2e-advice', { workloads: [WORKLOADS['work-mem']], includeQueries: true });
    ({ cluster, person, databaseId } = e2e);
    browser = await launchChromium();
    ({ page, problems } = await openWatchedPage(browser, { expectedStatuses: [] }));
    await logInOnPage(page, e2e.lab.service.url);
    console.log(`setup: ${((Date.now() - began) / 1000).toFixed(1)} s`);
  });

  after(async () => {
    await browser?.close();
    await e2e?.close();
    console.log(`whole file: ${((Date.now() - began) / 1000).toFixed(1)} s`);
  });

  test(
    'a spilling workload with no session: the advice names work_mem with its evidence, and a session from it tries it first',
    { timeout: timeoutFor([60_000, 90_000, 30_000], 60_000) },
    async () => {
      await e2e.runLoad(WORKLOADS['work-mem']);
      const { advice, item } = await until(
        'advice naming work_mem from the temporary files',
        async () => {
          const response = await person.get<AdviceView>(`/api/manage/databases/${databaseId}/advice`);
          assert.equal(response.status, 200, JSON.stringify(response.body));
          const found = response.body.items.find((i) => i.finding === 'temp-files');
          return found && { advice: AdviceViewSchema.parse(response.body), item: found };
        },
        60_000,
        500,
      );
      console.log(`advice: ${advice.message}; ${item.reason}`);

      // What it argues for: work_mem up from the default, and nothing applied from advice alone.
      const change = item.changes.find((c) => c.parameter === 'work_mem');
      assert.ok(change, JSON.stringify(item.changes));
      assert.equal(change.direction, 'raise');
      assert.equal(change.from, '4MB');
      assert.ok(Number(change.value) > WORK_MEM_DEFAULT_KB, `work_mem to ${change.value} kB`);
      assert.equal(await workMem(), String(WORK_MEM_DEFAULT_KB), 'nothing applied from advice alone');

      // Its evidence, against pg_stat_statements' own count: the NOT IN report spills the same
      // materialized subquery on every call.
      const [spiller] = await cluster.sql<{ queryid: string; calls: string; temp_blks_written: string }>(
        `SELECT queryid::text, calls::text, temp_blks_written::text FROM pg_stat_statements WHERE query LIKE '%NOT IN%' AND calls > 0`,
      );
      assert.ok(spiller && Number(spiller.temp_blks_written) > 0, 'the NOT IN report writes temporary files');
      const spillPerCall = (Number(spiller.temp_blks_written) * PAGE_BYTES) / Number(spiller.calls);
      const evidence = (name: string) => item.evidence.find((e) => e.name === name)?.value;
      assert.ok((evidence('temporary files written per minute') ?? 0) > 0, JSON.stringify(item.evidence));
      const largest = evidence('largest temporary bytes per call') ?? 0;
      assert.ok(
        Math.abs(largest - spillPerCall) <= 0.1 * spillPerCall,
        `largest temporary bytes per call ${largest} against pg_stat_statements' ${spillPerCall.toFixed(0)}`,
      );
      // The statement behind it: the report, with its text.
      const behind = item.statements[0];
      assert.ok(behind, 'a statement behind the advice');
      assert.equal(behind.queryId, spiller.queryid);
      assert.match(behind.text ?? '', /NOT IN \(SELECT key FROM lab_keys\)/);
      assert.equal(behind.figure.name, 'temporary bytes per call');

      // The dashboard shows the same.
      await page.goto(`${e2e.lab.service.url}/databases/${databaseId}`);
      const card = page.locator('#advice .advice-item[data-finding="temp-files"]');
      assert.equal(await card.count(), 1);
      assert.match((await card.locator('.advice-change').textContent()) ?? '', /work_mem\s+raise\s+4MB → \d+MB/);
      const text = (await card.textContent()) ?? '';
      assert.match(text, /temporary files written per minute/);
      assert.match(text, /NOT IN \(SELECT key FROM lab_keys\)/);
      assert.match(text, new RegExp(`queryid ${behind.queryId}`));
      assert.equal(await page.locator('#advice-start').count(), 1, 'the button that starts a session from it');
      await page.screenshot({ path: join(SCREENSHOTS, 'e2e-advice.png'), fullPage: true });

      // A session from the advice: its first trial is the diagnosis, and the agent applies it.
      const baseline = await settings();
      const started = await startTuningSession(person, databaseId, {
        fromAdvice: true,
        iterations: 2,
        windowSeconds: 4,
        warmupSeconds: 1,
        seed: 20261126,
      });
      assert.deepEqual(
        started.fromAdvice?.findings,
        advice.items.map((i) => i.finding),
      );
      let applied: string | undefined;
      const first = await until(
        'the first trial measured',
        async () => {
          const trialNow = async () => (await getTuningSession(person, databaseId, started.id)).iterations.find(isTrialJson);
          const trial = await trialNow();
          // While it is measured, the server runs with it. Read between two looks that both say
          // measuring: on a loaded machine the window may close, and the next window's command
          // put work_mem back, between one look and the read that follows it.
          if (trial?.state === 'measuring') {
            const value = await workMem();
            if ((await trialNow())?.state === 'measuring') applied = value;
          }
          return trial && ['ok', 'failed'].includes(trial.state) ? trial : null;
        },
        90_000,
        300,
      );
      console.log(`first trial: ${first.kind} ${first.state} ${JSON.stringify(first.config)}: ${first.reason}`);
      assert.equal(first.kind, 'diagnosis');
      assert.match(first.reason, /temporary files per minute.*work_mem/);
      assert.equal(first.config['work_mem'], change.value, 'the value the advice showed');
      assert.equal(applied, String(change.value), 'pg_settings while the trial was measured');

      const stopped = await person.post<{ session: { state: string; message: string } }>(
        `/api/manage/databases/${databaseId}/tuning-sessions/${started.id}/stop`,
      );
      assert.equal(stopped.status, 200, JSON.stringify(stopped.body));
      assert.equal(stopped.body.session.state, 'stopped');
      // Back on the baseline: every parameter the trial set (the diagnosis' work_mem, and what
      // the space clips to this machine's bounds) as pg_settings had it before the session.
      const changed = () => settings().then((now) => Object.keys(first.config).filter((name) => now.get(name) !== baseline.get(name)));
      await until('the database back on its baseline', async () => (await changed()).length === 0, 30_000).catch(async (error: Error) => {
        throw new Error(`${error.message}: ${(await changed()).join(', ')} differ`);
      });
      assert.equal(await workMem(), String(WORK_MEM_DEFAULT_KB));
      assert.deepEqual(problems, []);
    },
  );

  test("SELECT 1: the dashboard's throughput is within 10 % of pgbench's own tps", { timeout: 120_000 }, async (t) => {
    const pgbench = findPgbench(cluster);
    if (pgbench === undefined) return t.skip('no pgbench on this machine');
    await e2e.stopLoad();
    const REPORT_SECONDS = 2;
    const PGBENCH_SECONDS = 20;
    await setReportInterval(REPORT_SECONDS);
    // A report at the new interval, so that the agent has taken it.
    await until(
      `a report of about ${REPORT_SECONDS} s`,
      async () => {
        const seconds = (await latestReport())?.metrics?.interval.seconds ?? 0;
        return seconds > REPORT_SECONDS - 0.5 && seconds < REPORT_SECONDS + 0.5;
      },
      30_000,
      300,
    );

    const script = join(e2e.dir, 'select1.sql');
    writeFileSync(script, 'SELECT 1;\n');
    const startedAt = Date.now();
    const benchmark = run(pgbench, ['-n', '-f', script, '-c', '4', '-j', '2', '-T', String(PGBENCH_SECONDS), cluster.adminUrl], {
      maxBuffer: 1 << 20,
    });
    let finished = false;
    void benchmark.finally(() => (finished = true)).catch(() => undefined);

    // Each new report, as the dashboard shows it: the page is read only when it still shows the
    // report seen before it was loaded.
    const shown = new Map<string, { report: LatestReport; text: string }>();
    while (!finished) {
      const before = await latestReport();
      if (before?.metrics && !shown.has(before.id)) {
        await page.goto(`${e2e.lab.service.url}/databases/${databaseId}`);
        const text = ((await page.textContent('#metric-statements-per-second')) ?? '').trim();
        const afterwards = await latestReport();
        if (afterwards?.id === before.id) shown.set(before.id, { report: before, text });
      }
      await sleep(200);
    }
    const { stdout } = await benchmark;
    const endedAt = Date.now();
    const tps = Number(/^tps = ([\d.]+) \((?:without|excluding)/m.exec(stdout)?.[1]);
    assert.ok(tps > 0, `pgbench printed its tps:\n${stdout}`);

    // Reports wholly inside pgbench's run (a second's margin for its connections at the start).
    const inside = [...shown.values()].filter(({ report }) => {
      const interval = report.metrics!.interval;
      return Date.parse(interval.start) >= startedAt + 1000 && Date.parse(interval.end) <= endedAt - 200;
    });
    assert.ok(inside.length >= 3, `at least 3 reports inside pgbench's run: ${inside.length} of ${shown.size} read`);
    // Weighed by each report's length: statements over seconds.
    const seconds = inside.reduce((s, { report }) => s + report.metrics!.interval.seconds, 0);
    const statements = inside.reduce((s, { report, text }) => s + Number(text.replace(/,/g, '')) * report.metrics!.interval.seconds, 0);
    const ours = statements / seconds;
    const deviation = (ours - tps) / tps;
    // For comparison only: pg_stat_database's commits over the same reports, which lag under load.
    const commits = inside.reduce((s, { report }) => s + report.metrics!.derived.tps * report.metrics!.interval.seconds, 0) / seconds;
    console.log(
      `dashboard ${ours.toFixed(1)} statements/s over ${inside.length} reports (${seconds.toFixed(1)} s of pgbench's ${PGBENCH_SECONDS} s); ` +
        `pgbench tps ${tps.toFixed(1)}; ${(100 * deviation).toFixed(1)} %; shown: ${inside.map(({ text }) => text).join(', ')}; ` +
        `commits/s (pg_stat_database) ${commits.toFixed(1)}`,
    );
    assert.ok(Math.abs(deviation) <= 0.1, `the dashboard's ${ours.toFixed(1)} statements/s within 10 % of pgbench's ${tps.toFixed(1)} tps`);
    // And it is the reports' own figure, as the agent sent it.
    for (const { report, text } of inside)
      assert.equal(text, formatNumber(report.metrics!.derived.statementsPerSecond, 1), `the page shows report #${report.seq}'s figure`);
    assert.deepEqual(problems, []);
  });
});

// End to end as a user sets a session up by hand (issue #40): the real tuner-agent (--local) on the
// service's default report interval (60 s), nothing set by hand, and windows of 20 s, shorter than
// that interval. The agent's first report comes within seconds of its start (a session can start
// at once); while the session measures, in every state (the A/B verification too), the agent
// reports about six times a window; so a diagnosis on a workload that work_mem speeds up is
// verified and kept as a step. Before the fix every verification window went without reports
// ("no report covered the window") and the session failed.
// No speed is asserted: only what the session concludes and does.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { WORKLOADS } from '../src/lab/workloads.ts';
import { startE2eLab, type E2eLab } from './helpers/e2e-lab.ts';
import { getTuningSession, startTuningSession } from './sessions-agent.ts';
import { timeoutFor, until } from './helpers/until.ts';

const SESSION_MS = 600_000;

describe("a session with 20 s windows on the agent's default report interval (real tuner-agent, throwaway cluster)", () => {
  let e2e: E2eLab;

  before(async () => {
    e2e = await startE2eLab('e2e-field', { workloads: [WORKLOADS['work-mem']], reportIntervalSeconds: null });
  });
  after(() => e2e?.close());

  test(
    'the first report comes within seconds; the diagnosis is verified and kept as a step',
    { timeout: timeoutFor([20_000, 90_000, SESSION_MS]) },
    async () => {
      const { person, databaseId } = e2e;
      const startedAt = Date.now();
      await until(
        'the first report',
        async () => (await person.get<{ report: unknown }>(`/api/manage/databases/${databaseId}/reports/latest`)).body.report,
        20_000,
        250,
      );
      console.log(`first report ${((Date.now() - startedAt) / 1000).toFixed(1)} s after the lab was up`);
      const interval = await person.get<{ database: { reportIntervalSeconds: number; reportIntervalIsDefault: boolean } }>(
        `/api/manage/databases/${databaseId}`,
      );
      assert.deepEqual(
        [interval.body.database.reportIntervalSeconds, interval.body.database.reportIntervalIsDefault],
        [60, true],
        'the service default, untouched',
      );
      await e2e.runLoad(WORKLOADS['work-mem'], 2, 90_000);

      const started = await startTuningSession(person, databaseId, {
        iterations: 2,
        windowSeconds: 20,
        warmupSeconds: 2,
        seed: 20261128,
        requireApproval: false,
        abRoundsMin: 3,
        abRoundsMax: 5,
      });
      const ended = await until(
        'a step kept, or the session over',
        async () => {
          const { session } = await getTuningSession(person, databaseId, started.id);
          return session.steps.some((step) => step.outcome === 'kept') || ['done', 'failed', 'stopped'].includes(session.state)
            ? session
            : null;
        },
        SESSION_MS,
        1000,
      );
      const { iterations } = await getTuningSession(person, databaseId, started.id);
      for (const it of iterations)
        console.log(
          `  #${it.ordinal} ${it.phase} ${it.kind}${it.round ? ` ${it.round}` : ''} ${it.state} objective ${it.objective?.toFixed(3) ?? '–'} ${it.failure ?? ''}`,
        );
      console.log(`${ended.state}: ${ended.message ?? ''}`);
      assert.ok(
        !iterations.some((it) => /no report covered the window/.test(it.failure ?? '')),
        'every window had reports, the verification windows too',
      );
      assert.ok(
        ended.steps.some((step) => step.outcome === 'kept'),
        `a verified step kept: ${ended.state} ${ended.message ?? ''}\n${e2e.agent.output().slice(-3000)}`,
      );
      await person.post(`/api/manage/databases/${databaseId}/tuning-sessions/${started.id}/stop`);
    },
  );
});

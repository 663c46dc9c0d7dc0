// The session's measuring rules as plain functions: which reports measure a window (the agent's
// clock mapped onto the storage's, the warm-up and the window's end, restarts, a trial reverted
// under us), when a window is closed, and the constraints besides runtime.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { WindowStats } from '../src/measure/objective.ts';
import { constraintBreach, throughput } from '../src/service/tuning/constraints.ts';
import { EDGE_TOLERANCE_MS, selectWindow, serviceInterval, windowClosed, windowFrom } from '../src/service/tuning/window.ts';
import type { SessionReport } from '../src/service/tuning/store.ts';
import { sampleMetrics } from './helpers/service-reports.ts';

const T0 = Date.parse('2026-11-22T10:00:00Z');
/** The agent's clock runs 7 s ahead of the storage's. */
const SKEW_MS = 7_000;

/** A report of the agent's interval [startS, endS] (storage seconds after T0), received 40 ms after it was sent. */
function report(startS: number, endS: number, options: { restarted?: boolean; workMem?: string } = {}): SessionReport {
  const metrics = sampleMetrics({ topStatements: 3, withText: false });
  metrics.interval = {
    start: new Date(T0 + startS * 1000 + SKEW_MS).toISOString(),
    end: new Date(T0 + endS * 1000 + SKEW_MS).toISOString(),
    seconds: endS - startS,
    serverRestarted: options.restarted ?? false,
  };
  const sent = T0 + endS * 1000 + SKEW_MS + 20;
  return {
    id: endS,
    leaseId: 'lease-1',
    seq: endS,
    sentAt: new Date(sent),
    receivedAt: new Date(sent - SKEW_MS + 40),
    metrics,
    settings: [
      {
        name: 'work_mem',
        setting: options.workMem ?? '65536',
        unit: 'kB',
        context: 'user',
        source: 'configuration file',
        pendingRestart: false,
      },
    ],
    targetMetrics: [],
  };
}

test("a report's interval is mapped onto the storage's clock by its own send and receipt times", () => {
  const mapped = serviceInterval(report(10, 11))!;
  assert.ok(Math.abs(mapped.start - (T0 + 10_000)) <= 60, 'the 7 s skew is gone, the 40 ms delay remains');
  assert.ok(Math.abs(mapped.end - (T0 + 11_000)) <= 60);
});

test('a window counts the reports wholly inside it, with the trial in effect (a restart is for the contamination check)', () => {
  const window = windowFrom(new Date(T0 + 10_000), 4, 0);
  const reports = [
    report(8, 9), // in the warm-up
    report(9, 10.2), // mostly in the warm-up
    report(10.2, 11),
    report(11, 12, { restarted: true }),
    report(12, 13, { workMem: '4096' }), // the trial was reverted under the session
    report(13, 14.3), // reaches past the end by less than the tolerance
    report(14.3, 15.3), // past the end
  ];
  const selected = selectWindow(reports, window, { work_mem: '65536' });
  assert.deepEqual(
    selected.reports.map((r) => r.id),
    [11, 12, 14.3],
  );
  assert.equal(selected.mismatched, 1);
  assert.deepEqual(
    selectWindow(reports, window, null).reports.map((r) => r.id),
    [11, 12, 13, 14.3],
    'the baseline has no trial values to check',
  );
  assert.ok(EDGE_TOLERANCE_MS >= 300);
});

test('a window closes when a report reaches past its end, or a grace period after it', () => {
  const window = windowFrom(new Date(T0), 4, 0);
  const at = (s: number) => new Date(T0 + s * 1000);
  assert.equal(windowClosed([report(3, 4.5)], window, at(3.9), 30_000), false, 'not before its end');
  assert.equal(windowClosed([report(2, 3)], window, at(5), 30_000), false, 'the last report may still come');
  assert.equal(windowClosed([report(2, 3), report(3, 4.1)], window, at(5), 30_000), true);
  assert.equal(windowClosed([], window, at(34.1), 30_000), true, 'the agent went quiet');
});

const stats = (over: Partial<WindowStats> = {}): WindowStats => ({
  weightedRuntimeMs: 1,
  coverage: 1,
  avgRuntimeMs: 1,
  calls: 1000,
  seconds: 10,
  tps: 100,
  rollbackRate: 0,
  ...over,
});

test('constraints: throughput, rollbacks and memory against the baseline', () => {
  const baseline = stats();
  assert.equal(throughput(baseline), 100);
  assert.equal(constraintBreach(stats({ calls: 850 }), baseline, { window: null, baseline: null }), null, '15 % less is noise');
  assert.match(constraintBreach(stats({ calls: 750 }), baseline, { window: null, baseline: null }) ?? '', /^throughput fell by 25\.0 %/);
  assert.equal(constraintBreach(stats({ calls: 5 }), stats({ calls: 5 }), { window: null, baseline: null }), null);
  assert.match(
    constraintBreach(stats({ rollbackRate: 0.05 }), baseline, { window: null, baseline: null }) ?? '',
    /^rollbacks rose to 5\.0 %/,
  );
  assert.equal(constraintBreach(stats({ rollbackRate: 0.015 }), baseline, { window: null, baseline: null }), null);
  assert.match(constraintBreach(stats(), baseline, { window: 0.06, baseline: 0.4 }) ?? '', /^available memory fell to 6\.0 %/);
  assert.equal(constraintBreach(stats(), baseline, { window: 0.06, baseline: 0.07 }), null, 'a machine that was that tight already');
});

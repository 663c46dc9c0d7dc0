// The state baseline: the configuration as it is, measured for one window from the first report
// after the start, and measured again while the window cannot be trusted.
import { callShares, contamination } from '../../../measure/contamination.ts';
import { queryMix, windowStats } from '../../../measure/objective.ts';
import { signalsOf } from '../../../optimizer/index.ts';
import { lowestMemoryShare, serviceInterval, windowFrom } from '../window.ts';
import { ENGINE_LIMITS, type Turn, roundStats, updateSession, windowReports } from './turn.ts';
import { endTuningSession } from './end.ts';
import { closedWindow } from './windows.ts';

export async function measureBaseline(t: Turn): Promise<boolean> {
  const { session, tx, now } = t;
  const window = session.baselineWindow;
  if (!window) {
    // The window starts where the first report after the start ends: from that report's
    // answer on, the agent reports often enough to fill it.
    const [first] = await tx.reportsSince(session.createdAt, 1);
    if (!first) return false;
    const start = new Date(serviceInterval(first)?.end ?? first.receivedAt.getTime());
    await updateSession(t, {
      baselineWindow: windowFrom(start, session.windowSeconds, 0),
      message: `measuring the baseline for ${session.windowSeconds} s`,
    });
    return true;
  }
  const measured = await closedWindow(t, window, null);
  if (measured === 'open') return false;
  const metrics = measured.reports.map((r) => r.metrics);
  const mix = queryMix(metrics);
  const stats = windowStats(metrics, mix);
  const found = contamination({ reports: windowReports(measured.reports), stats, reference: null });
  if (found.length > 0) {
    const why = found.map((c) => c.message).join('; ');
    if (window.attempts + 1 >= ENGINE_LIMITS.windowAttempts) {
      await endTuningSession(t, 'failed', `the baseline could not be measured in ${ENGINE_LIMITS.windowAttempts} windows: ${why}`, null);
      return false;
    }
    await updateSession(t, {
      baselineWindow: windowFrom(now, session.windowSeconds, window.attempts + 1),
      message: `measuring the baseline again: ${why}`,
    });
    return false;
  }
  const baseline = {
    mix,
    shares: callShares(metrics),
    stats: roundStats(stats),
    reports: measured.reports.length,
    lowestMemoryShare: lowestMemoryShare(measured.reports),
    signals: signalsOf(metrics),
    measuredAt: now.toISOString(),
  };
  await updateSession(t, { state: 'iterating', baseline, message: null });
  return true;
}

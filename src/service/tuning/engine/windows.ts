// The windows every state measures: issuing a trial, a baseline or an A/B window, waiting for the
// agent's acknowledgement, measuring once the window closes, contaminated windows measured again.
import { randomUUID } from 'node:crypto';
import { contamination } from '../../../measure/contamination.ts';
import { windowStats, type WindowStats } from '../../../measure/objective.ts';
import type { Role } from '../../../measure/verify.ts';
import type { Suggestion } from '../../../optimizer/index.ts';
import type { Command } from '../../../protocol/v1.ts';
import type { SessionWindow, TuningIterationPatch, TuningIterationRecord, TuningSessionRecord } from '../store.ts';
import { TRIAL_EXPIRED_REASON, cancelledByService } from '../../databases/store.ts';
import { constraintBreach } from '../constraints.ts';
import { isTrial, type SessionJudgement } from '../history.ts';
import { ENVIRONMENT_TRIP, isEnvironmentBreach, isEnvironmentCause } from '../trips.ts';
import { chooseWindowSeconds, TARGET_WINDOW_NOISE, windowOf } from '../window-length.ts';
import { lowestMemoryShare, selectWindow, windowClosed, windowFrom, type MeasuredReport } from '../window.ts';
import {
  ENGINE_LIMITS,
  type Turn,
  graceMs,
  nextOrdinal,
  searchIteration,
  pct,
  roundStats,
  trialDeliverySeconds,
  updateSession,
  windowReports,
} from './turn.ts';
import { endTuningSession } from './end.ts';
import { awaitPlanning } from './planning.ts';

/** The window's reports once it is closed, or 'open'. */
export async function closedWindow(
  t: Turn,
  window: SessionWindow,
  expected: Record<string, string> | null,
): Promise<'open' | { reports: MeasuredReport[]; mismatched: number }> {
  if (t.now < window.end) return 'open';
  const reports = await t.tx.reportsSince(window.start, ENGINE_LIMITS.reportsPerWindow);
  if (!windowClosed(reports, window, t.now, graceMs(t.session))) return 'open';
  return selectWindow(reports, window, expected);
}

/**
 * Moves the window in flight, or condemns a measured trial a guardrail reverted since. Returns
 * null when nothing is in flight: the caller decides what to measure next.
 */
export async function moveWindowInFlight(t: Turn, iterations: readonly TuningIterationRecord[]): Promise<boolean | null> {
  const commandIds = [...new Set(iterations.map((it) => it.commandId))];
  const breaches = new Map((await t.tx.guardrailBreaches(commandIds)).map((b) => [b.commandId, b.message]));
  // A guardrail that reverted a trial after its window was measured still condemns it.
  let flipped = false;
  for (const it of iterations) {
    const breach = breaches.get(it.commandId);
    // A failover after the measurement leaves the measurement as it was.
    if (it.state === 'ok' && it.kind !== 'baseline' && breach !== undefined && !isEnvironmentBreach(breach)) {
      await t.tx.updateIteration(it.ordinal, { state: 'failed', failure: `after the measurement, ${guardrailFailure(breach)}` });
      flipped = true;
    }
  }
  if (flipped) return true;
  const current = iterations.find((it) => it.state === 'planning' || it.state === 'applying' || it.state === 'measuring');
  if (current?.state === 'planning') return awaitPlanning(t, current);
  if (current?.state === 'applying') return awaitAck(t, current);
  if (current) return measureWindow(t, iterations, current, breaches.get(current.commandId));
  return null;
}

export async function issueTrial(t: Turn, iterations: readonly TuningIterationRecord[], suggestion: Suggestion): Promise<boolean> {
  const command: Command = {
    id: randomUUID(),
    kind: 'apply',
    values: { ...suggestion.config },
    allowRestart: t.session.mode === 'restart',
    keep: false,
  };
  await t.tx.addIteration(
    { ...searchIteration(iterations, suggestion, command.id), deliverWithinSeconds: trialDeliverySeconds(t.session) },
    command,
    t.session.createdById,
  );
  t.commandIssued = true;
  return false;
}

/**
 * The last windows of the known-good configuration or of the candidate all failed or were
 * cancelled (a revert the agent keeps failing, say): asking again would loop. The reason, or null.
 */
function stuck(iterations: readonly TuningIterationRecord[], kind: 'baseline' | 'candidate'): string | null {
  const last = iterations.slice(-ENGINE_LIMITS.windowAttempts);
  if (
    last.length < ENGINE_LIMITS.windowAttempts ||
    !last.every((it) => it.kind === kind && (it.state === 'failed' || it.state === 'cancelled'))
  )
    return null;
  return `the last ${last.length} windows of the ${kind === 'baseline' ? 'known-good configuration' : 'candidate'} could not be measured (the last: ${last.at(-1)!.failure ?? 'no reason given'})`;
}

/**
 * A window of the baseline (role 'baseline') or of the candidate: when the configuration is on
 * the database already (the last window was of the same), measured at once with the same
 * command; otherwise a revert to known-good or a trial apply first.
 */
export async function issueWindow(
  t: Turn,
  iterations: readonly TuningIterationRecord[],
  role: Role,
  phase: 'search' | 'verify',
  round: number | null,
  config: Record<string, number | string>,
  reason: string,
): Promise<boolean> {
  const kind = role === 'baseline' ? 'baseline' : 'candidate';
  const why = stuck(iterations, kind);
  if (why) {
    await endTuningSession(t, 'failed', `${why}; the database returns to its known-good configuration`, 'known-good');
    return false;
  }
  const last = iterations.at(-1);
  const base = { ordinal: nextOrdinal(iterations), kind, phase, round, config: { ...config }, reason, predicted: null } as const;
  if (last && last.kind === kind && (last.state === 'ok' || last.state === 'contaminated') && last.effective) {
    const window = windowFrom(t.now, windowOf(t.session), 0);
    await t.tx.addIteration(
      { ...base, commandId: last.commandId, measuring: { sentAt: last.sentAt, ackedAt: last.ackedAt, effective: last.effective, window } },
      null,
      t.session.createdById,
    );
    return true;
  }
  const command: Command =
    role === 'baseline'
      ? { id: randomUUID(), kind: 'revert', to: 'known-good' }
      : { id: randomUUID(), kind: 'apply', values: { ...config }, allowRestart: t.session.mode === 'restart', keep: false };
  // A revert may arrive late: it only returns the database to what the agent found.
  const deadline = command.kind === 'apply' ? { deliverWithinSeconds: trialDeliverySeconds(t.session) } : {};
  await t.tx.addIteration({ ...base, commandId: command.id, ...deadline }, command, t.session.createdById);
  t.commandIssued = true;
  return false;
}

/** The guardrail's event message says "guardrail: …" already. */
const guardrailFailure = (message: string) => (/^guardrail\b/.test(message) ? message : `guardrail: ${message}`);

async function failIteration(t: Turn, it: TuningIterationRecord, failure: string, extra: TuningIterationPatch = {}): Promise<true> {
  await t.tx.updateIteration(it.ordinal, { ...extra, state: 'failed', failure, finished: true });
  return true;
}

/** Not the configuration's fault: left out of the history, and something else is measured. */
async function cancelIteration(t: Turn, it: TuningIterationRecord, failure: string): Promise<true> {
  await t.tx.updateIteration(it.ordinal, { state: 'cancelled', failure, finished: true });
  return true;
}

/** Waiting for the agent's acknowledgement of the window's command. */
async function awaitAck(t: Turn, it: TuningIterationRecord): Promise<boolean> {
  const command = await t.tx.command(it.commandId);
  if (!command) return failIteration(t, it, 'its command is gone from the storage');
  const sentAt = it.sentAt ?? (command.sentCount > 0 ? command.sentAt : null);
  // Cancelled by the service (past its deadline, or an API key revoked) before the agent acknowledged it.
  if (cancelledByService(command)) return cancelIteration(t, it, command.outcome?.errors.join('; ') || 'cancelled by the service');
  // Past its deadline and never handed over (the agent is quiet): no report will deliver it now.
  if (command.status === 'pending' && command.deliverBy !== null && t.now >= command.deliverBy) {
    await t.tx.cancelCommand(it.commandId, TRIAL_EXPIRED_REASON);
    return cancelIteration(t, it, TRIAL_EXPIRED_REASON);
  }
  if (command.status === 'done') {
    const outcome = command.outcome;
    if (outcome?.status !== 'applied') {
      const errors = outcome?.errors.join('; ') || 'no reason given';
      if (outcome?.status === 'failed' && isEnvironmentCause(errors)) {
        // A switchover or a member's restart during the apply: the configuration is tried again.
        await t.tx.updateIteration(it.ordinal, { state: 'contaminated', failure: `${ENVIRONMENT_TRIP} ${errors}`, sentAt, finished: true });
        return true;
      }
      return failIteration(t, it, `${outcome?.status ?? 'failed'} by the agent: ${errors}`, { sentAt, ackedAt: command.ackedAt });
    }
    const ackedAt = command.ackedAt ?? t.now;
    const start = new Date(ackedAt.getTime() + t.session.warmupSeconds * 1000);
    await t.tx.updateIteration(it.ordinal, {
      state: 'measuring',
      sentAt,
      ackedAt,
      effective: outcome.effective,
      window: windowFrom(start, windowOf(t.session), 0),
    });
    return true;
  }
  if (it.sentAt === null && sentAt !== null) await t.tx.updateIteration(it.ordinal, { sentAt });
  const timeout = ENGINE_LIMITS.ackTimeoutSeconds[t.session.mode];
  if (sentAt !== null && t.now.getTime() - sentAt.getTime() > timeout * 1000) {
    await t.tx.cancelCommand(it.commandId, `the tuning session gave up waiting for its acknowledgement after ${timeout} s`);
    return failIteration(t, it, `no acknowledgement within ${timeout} s of sending it to the agent`, { sentAt });
  }
  return false;
}

/** The baseline's figures nearest before `at`: what a window's constraints are judged against. */
function nearestBaselineStats(
  session: TuningSessionRecord,
  iterations: readonly TuningIterationRecord[],
  before: number,
): WindowStats | null {
  const earlier = iterations.filter((it) => it.kind === 'baseline' && it.state === 'ok' && it.stats && it.ordinal < before).at(-1);
  return earlier?.stats ?? session.baseline?.stats ?? null;
}

/** Warming up and measuring a window. */
async function measureWindow(
  t: Turn,
  iterations: readonly TuningIterationRecord[],
  it: TuningIterationRecord,
  breach: string | undefined,
): Promise<boolean> {
  if (breach !== undefined && it.kind !== 'baseline') {
    if (!isEnvironmentBreach(breach)) return failIteration(t, it, guardrailFailure(breach));
    // The environment ended the trial (a failover): not the configuration's failure.
    await t.tx.updateIteration(it.ordinal, { state: 'contaminated', failure: `${ENVIRONMENT_TRIP} ${breach}`, finished: true });
    return true;
  }
  const window = it.window;
  if (!window) return failIteration(t, it, 'no measurement window was set');
  const measured = await closedWindow(t, window, it.effective);
  if (measured === 'open') return false;
  if (measured.mismatched > 0) {
    // Not the configuration's fault as far as anyone can tell (an agent restart returns to
    // known-good): left out of the history, and something else is measured.
    await t.tx.updateIteration(it.ordinal, {
      state: 'cancelled',
      failure: `the configuration was not in effect for the whole window (${measured.mismatched} report(s) showed other values), without a guardrail event: the agent returned to known-good, e.g. after a restart`,
      finished: true,
    });
    return true;
  }
  const baseline = t.session.baseline;
  if (!baseline) return failIteration(t, it, 'the session has no baseline');
  const stats = windowStats(
    measured.reports.map((r) => r.metrics),
    baseline.mix,
  );
  const found = contamination({ reports: windowReports(measured.reports), stats, reference: baseline.shares ?? null });
  if (found.length > 0) return remeasure(t, iterations, it, window, found.map((c) => c.message).join('; '), stats, measured.reports.length);
  // Trials are judged window by window; the A/B rounds judge the candidate's throughput over all
  // rounds instead (src/measure/verify.ts); a baseline window is what the others are judged by.
  const reference = nearestBaselineStats(t.session, iterations, it.ordinal);
  const breached =
    !isTrial(it) || !reference
      ? null
      : constraintBreach(stats, reference, { window: lowestMemoryShare(measured.reports), baseline: baseline.lowestMemoryShare });
  await t.tx.updateIteration(it.ordinal, {
    state: breached ? 'failed' : 'ok',
    stats: roundStats(stats),
    reports: measured.reports.length,
    failure: breached,
    finished: true,
  });
  return true;
}

/** A contaminated window: marked so, and measured again in a new row (the configuration is still applied). */
async function remeasure(
  t: Turn,
  iterations: readonly TuningIterationRecord[],
  it: TuningIterationRecord,
  window: SessionWindow,
  why: string,
  stats: WindowStats,
  reports: number,
): Promise<boolean> {
  const attempts = window.attempts + 1;
  await t.tx.updateIteration(it.ordinal, {
    state: 'contaminated',
    stats: roundStats(stats),
    reports,
    failure: `contaminated: ${why}`,
    finished: true,
  });
  if (attempts >= ENGINE_LIMITS.windowAttempts) {
    await endTuningSession(
      t,
      'failed',
      `iteration ${it.ordinal} could not be measured cleanly in ${ENGINE_LIMITS.windowAttempts} windows in a row (the last: ${why}); the database returns to its known-good configuration`,
      'known-good',
    );
    return false;
  }
  const start = new Date(t.now.getTime() + t.session.warmupSeconds * 1000);
  await t.tx.addIteration(
    {
      ordinal: nextOrdinal(iterations),
      kind: it.kind,
      phase: it.phase,
      round: it.round,
      config: it.config,
      reason: `iteration ${it.ordinal} measured again: its window was contaminated (${why})`,
      predicted: it.predicted,
      commandId: it.commandId,
      measuring: {
        sentAt: it.sentAt,
        ackedAt: it.ackedAt,
        effective: it.effective,
        window: windowFrom(start, windowOf(t.session), attempts),
      },
    },
    null,
    t.session.createdById,
  );
  return true;
}

/**
 * Once the noise of one window is measured, the session's windows take the length that noise
 * needs (window-length.ts), once; true when it chose. Sessions with fixed windows never do.
 */
export async function chooseWindow(t: Turn, judgement: SessionJudgement): Promise<boolean> {
  const { session } = t;
  if (session.windowNowSeconds !== null || session.windowMinSeconds >= session.windowSeconds || judgement.noise === null) return false;
  const chosen = chooseWindowSeconds(judgement.noise, session.windowSeconds, { min: session.windowMinSeconds, max: session.windowSeconds });
  await updateSession(t, {
    windowNowSeconds: chosen,
    message: `the noise of one ${session.windowSeconds} s window is ${pct(judgement.noise)}: ${chosen === session.windowSeconds ? `windows stay ${chosen} s` : `windows of ${chosen} s from now on (about ${pct(TARGET_WINDOW_NOISE)} each${chosen === session.windowMinSeconds ? `, at the shortest allowed` : ''})`}`,
  });
  return true;
}

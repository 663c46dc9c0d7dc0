// The tuning session's state machine. Every step reads what happened (reports, acks, guardrail
// events: all in storage) and moves the session on, inside the transaction that holds its row
// lock; nothing lives in memory, so a session goes on after a restart, on any replica.
//
//   baseline            measure the configuration as it is for one window (it starts with the
//                       first report after the session's start: the agent reports faster from then)
//   iterating           per iteration: suggest → apply as a trial (keep=false) → ack → warm up →
//                       measure one window → ok (objective) or failed; until the planned number
//   awaiting_approval   the best configuration waits for a person; the database is back on known-good
//   applying_best       the best configuration is applied with keep=true
//   done | stopped | reverted | failed
import { randomUUID } from 'node:crypto';
import { queryMix, relativeObjective, windowStats, type WindowStats } from '../../measure/objective.ts';
import { suggest, type SearchSpace, type Suggestion } from '../../optimizer/index.ts';
import type { Command } from '../../protocol/v1.ts';
import type {
  SessionBest,
  SessionWindow,
  TuningIterationPatch,
  TuningIterationRecord,
  TuningSessionPatch,
  TuningSessionRecord,
  TuningSessionTx,
} from '../storage/storage.ts';
import { constraintBreach, isMeasurable, whyUnmeasurable } from './constraints.ts';
import { historyOf, sessionBest } from './history.ts';
import { sessionReportInterval } from './params.ts';
import { buildSpace } from './space.ts';
import { lowestMemoryShare, selectWindow, serviceInterval, windowClosed, windowFrom, type MeasuredReport } from './window.ts';

export const ENGINE_LIMITS = {
  /** A window with nothing to measure starts again; after this many, the session fails. */
  windowAttempts: 3,
  /** An apply not acknowledged this long after it was first sent fails its iteration. Cloud
   * targets wait for parameter groups and reboots, hence the generous figures. */
  ackTimeoutSeconds: { 'reload-only': 10 * 60, restart: 45 * 60 } as const,
  /** A window that ended this long ago is measured with the reports it has (the agent went quiet). */
  minGraceSeconds: 30,
  reportsPerWindow: 5000,
  /** Re-measurements of a best measured once, past the planned iterations, before it is recommended. */
  confirmations: 2,
  /** Transitions per call: each waits for something new after a few. */
  stepsPerCall: 12,
} as const;

interface Step {
  tx: TuningSessionTx;
  session: TuningSessionRecord;
  now: Date;
  /** A command was queued for the agent: the caller may hand it over at once. */
  commandIssued: boolean;
}

export interface AdvanceResult {
  session: TuningSessionRecord;
  commandIssued: boolean;
}

/** Moves the session as far as what has happened allows. */
export async function advanceSession(tx: TuningSessionTx, session: TuningSessionRecord, now: Date): Promise<AdvanceResult> {
  const step: Step = { tx, session, now, commandIssued: false };
  for (let i = 0; i < ENGINE_LIMITS.stepsPerCall; i++) {
    if (!(await stepOnce(step))) break;
  }
  return { session: step.session, commandIssued: step.commandIssued };
}

function stepOnce(s: Step): Promise<boolean> {
  switch (s.session.state) {
    case 'baseline':
      return baselineStep(s);
    case 'iterating':
      return iterationStep(s);
    case 'applying_best':
      return finalApplyStep(s);
    default:
      return Promise.resolve(false);
  }
}

async function updateSession(s: Step, patch: TuningSessionPatch): Promise<void> {
  s.session = await s.tx.updateSession(patch);
}

const graceMs = (session: TuningSessionRecord) => Math.max(ENGINE_LIMITS.minGraceSeconds, 3 * sessionReportInterval(session.windowSeconds)) * 1000;
const fmt = (x: number) => x.toFixed(3);

// ---- baseline ----

async function baselineStep(s: Step): Promise<boolean> {
  const { session, tx, now } = s;
  const window = session.baselineWindow;
  if (!window) {
    // The window starts where the first report after the start ends: from that report's
    // answer on, the agent reports often enough to fill it.
    const [first] = await tx.reportsSince(session.createdAt, 1);
    if (!first) return false;
    const start = new Date(serviceInterval(first)?.end ?? first.receivedAt.getTime());
    await updateSession(s, { baselineWindow: windowFrom(start, session.windowSeconds, 0), message: `measuring the baseline for ${session.windowSeconds} s` });
    return true;
  }
  const measured = await closedWindow(s, window, null);
  if (measured === 'open') return false;
  const metrics = measured.reports.map((r) => r.metrics);
  const mix = queryMix(metrics);
  const stats = windowStats(metrics, mix);
  if (!isMeasurable(stats)) {
    const why = whyUnmeasurable(stats, measured.reports.length);
    if (window.attempts + 1 >= ENGINE_LIMITS.windowAttempts) {
      await endSession(s, 'failed', `the baseline could not be measured in ${ENGINE_LIMITS.windowAttempts} windows: ${why}`, null);
      return false;
    }
    await updateSession(s, { baselineWindow: windowFrom(now, session.windowSeconds, window.attempts + 1), message: `measuring the baseline again: ${why}` });
    return false;
  }
  const baseline = { mix, stats, reports: measured.reports.length, lowestMemoryShare: lowestMemoryShare(measured.reports), measuredAt: now.toISOString() };
  await updateSession(s, { state: 'iterating', baseline, message: null });
  return true;
}

/** The window's reports once it is closed, or 'open'. */
async function closedWindow(s: Step, window: SessionWindow, expected: Record<string, string> | null): Promise<'open' | { reports: MeasuredReport[]; mismatched: number }> {
  if (s.now < window.end) return 'open';
  const reports = await s.tx.reportsSince(window.start, ENGINE_LIMITS.reportsPerWindow);
  if (!windowClosed(reports, window, s.now, graceMs(s.session))) return 'open';
  return selectWindow(reports, window, expected);
}

// ---- iterations ----

async function iterationStep(s: Step): Promise<boolean> {
  const iterations = await s.tx.iterations();
  const breaches = new Map((await s.tx.guardrailBreaches(iterations.map((it) => it.commandId))).map((b) => [b.commandId, b.message]));

  // A guardrail that reverted a trial after its window was measured still condemns it.
  let flipped = false;
  for (const it of iterations) {
    const breach = breaches.get(it.commandId);
    if (it.state === 'ok' && breach !== undefined) {
      await s.tx.updateIteration(it.ordinal, { state: 'failed', failure: `after the measurement, ${guardrailFailure(breach)}` });
      flipped = true;
    }
  }
  if (flipped) return true;

  const current = iterations.find((it) => it.state === 'applying' || it.state === 'measuring');
  if (current?.state === 'applying') return applyingStep(s, current);
  if (current) return measuringStep(s, current, breaches.get(current.commandId));

  const finished = iterations.filter((it) => it.state === 'ok' || it.state === 'failed').length;
  const cancelled = iterations.length - finished;
  if (cancelled > s.session.iterations) {
    await endSession(s, 'failed', `${cancelled} trials were not in effect for their whole window (the agent kept returning to known-good): stopped`, 'known-good');
    return false;
  }
  if (finished >= s.session.iterations) {
    const confirm = await unconfirmedBest(s, iterations, finished - s.session.iterations);
    if (confirm) return issueTrial(s, iterations, confirm);
    await finish(s, iterations, null);
    return false;
  }
  return startIteration(s, iterations);
}

/**
 * A best that beat the baseline in one window only may have been luck: before it is recommended
 * it is measured again, in up to ENGINE_LIMITS.confirmations iterations past the planned number
 * (a second try covers a re-measured best that fell behind another best measured once).
 */
async function unconfirmedBest(s: Step, iterations: readonly TuningIterationRecord[], extra: number): Promise<Suggestion | null> {
  if (extra >= ENGINE_LIMITS.confirmations) return null;
  const space = await spaceOf(s);
  const best = space ? sessionBest(space, iterations) : null;
  if (!best || best.objective >= 1 || best.measurements >= 2) return null;
  return { kind: 'remeasure', config: { ...best.config }, reason: `the best (objective ${fmt(best.objective)}, iteration ${best.iteration}) was measured once: measured again before it is recommended` };
}

/** The session's search space; a space that cannot be rebuilt (a catalog changed under a stored
 * session, say) ends the session rather than failing every step. */
async function spaceOf(s: Step): Promise<SearchSpace | null> {
  try {
    return buildSpace(s.session.space);
  } catch (err) {
    await endSession(s, 'failed', `the search space cannot be rebuilt from what the agent reported at the start: ${(err as Error).message}`, 'known-good');
    return null;
  }
}

async function startIteration(s: Step, iterations: readonly TuningIterationRecord[]): Promise<boolean> {
  const { session } = s;
  const space = await spaceOf(s);
  if (!space) return false;
  let suggestion: Suggestion;
  try {
    suggestion = suggest({ space, history: historyOf(iterations), seed: session.seed, iteration: iterations.length });
  } catch (err) {
    await finish(s, iterations, `the optimizer has nothing more to try (${(err as Error).message})`);
    return false;
  }
  return issueTrial(s, iterations, suggestion);
}

async function issueTrial(s: Step, iterations: readonly TuningIterationRecord[], suggestion: Suggestion): Promise<boolean> {
  const { session } = s;
  const command: Command = { id: randomUUID(), kind: 'apply', values: { ...suggestion.config }, allowRestart: session.mode === 'restart', keep: false };
  await s.tx.addIteration(
    { ordinal: iterations.length + 1, kind: suggestion.kind, config: { ...suggestion.config }, reason: suggestion.reason, predicted: suggestion.predicted ?? null, commandId: command.id },
    command,
    session.createdById,
  );
  s.commandIssued = true;
  return false;
}

/** The agent's event message says "guardrail: …" already. */
const guardrailFailure = (message: string) => (/^guardrail\b/.test(message) ? message : `guardrail: ${message}`);

async function failIteration(s: Step, it: TuningIterationRecord, failure: string, extra: TuningIterationPatch = {}): Promise<true> {
  await s.tx.updateIteration(it.ordinal, { ...extra, state: 'failed', failure, finished: true });
  return true;
}

/** Waiting for the agent's acknowledgement of the trial. */
async function applyingStep(s: Step, it: TuningIterationRecord): Promise<boolean> {
  const command = await s.tx.command(it.commandId);
  if (!command) return failIteration(s, it, 'its command is gone from the storage');
  const sentAt = it.sentAt ?? (command.sentCount > 0 ? command.sentAt : null);
  if (command.status === 'done') {
    const outcome = command.outcome;
    if (outcome?.status !== 'applied') {
      const errors = outcome?.errors.join('; ') || 'no reason given';
      return failIteration(s, it, `${outcome?.status ?? 'failed'} by the agent: ${errors}`, { sentAt, ackedAt: command.ackedAt });
    }
    const ackedAt = command.ackedAt ?? s.now;
    const start = new Date(ackedAt.getTime() + s.session.warmupSeconds * 1000);
    await s.tx.updateIteration(it.ordinal, { state: 'measuring', sentAt, ackedAt, effective: outcome.effective, window: windowFrom(start, s.session.windowSeconds, 0) });
    return true;
  }
  if (it.sentAt === null && sentAt !== null) await s.tx.updateIteration(it.ordinal, { sentAt });
  const timeout = ENGINE_LIMITS.ackTimeoutSeconds[s.session.mode];
  if (sentAt !== null && s.now.getTime() - sentAt.getTime() > timeout * 1000) {
    await s.tx.cancelCommand(it.commandId, `the tuning session gave up waiting for its acknowledgement after ${timeout} s`);
    return failIteration(s, it, `no acknowledgement within ${timeout} s of sending it to the agent`, { sentAt });
  }
  return false;
}

/** Warming up and measuring the trial. */
async function measuringStep(s: Step, it: TuningIterationRecord, breach: string | undefined): Promise<boolean> {
  if (breach !== undefined) return failIteration(s, it, guardrailFailure(breach));
  const window = it.window;
  if (!window) return failIteration(s, it, 'no measurement window was set');
  const measured = await closedWindow(s, window, it.effective);
  if (measured === 'open') return false;
  if (measured.mismatched > 0) {
    // Not the configuration's fault as far as anyone can tell (an agent restart returns to
    // known-good): left out of the history, and something else is tried.
    await s.tx.updateIteration(it.ordinal, {
      state: 'cancelled',
      failure: `the trial was not in effect for the whole window (${measured.mismatched} report(s) showed other values), without a guardrail event: the agent returned to known-good, e.g. after a restart`,
      finished: true,
    });
    return true;
  }
  const baseline = s.session.baseline;
  if (!baseline) return failIteration(s, it, 'the session has no baseline');
  const stats = windowStats(measured.reports.map((r) => r.metrics), baseline.mix);
  if (!isMeasurable(stats)) {
    const why = whyUnmeasurable(stats, measured.reports.length);
    if (window.attempts + 1 >= ENGINE_LIMITS.windowAttempts) {
      await s.tx.updateIteration(it.ordinal, { state: 'cancelled', failure: `not measurable: ${why}`, finished: true });
      await endSession(s, 'failed', `iteration ${it.ordinal} could not be measured in ${ENGINE_LIMITS.windowAttempts} windows: ${why}`, 'known-good');
      return false;
    }
    await s.tx.updateIteration(it.ordinal, { window: windowFrom(s.now, s.session.windowSeconds, window.attempts + 1), failure: `measuring again: ${why}` });
    return false;
  }
  const objective = relativeObjective(stats, baseline.stats);
  const breached = constraintBreach(stats, baseline.stats, { window: lowestMemoryShare(measured.reports), baseline: baseline.lowestMemoryShare });
  await s.tx.updateIteration(it.ordinal, {
    state: breached || objective === null ? 'failed' : 'ok',
    objective,
    stats: roundStats(stats),
    reports: measured.reports.length,
    failure: breached ?? (objective === null ? 'no objective' : null),
    finished: true,
  });
  return true;
}

function roundStats(stats: WindowStats): WindowStats {
  const r = (x: number) => Number(x.toPrecision(6));
  return { ...stats, weightedRuntimeMs: stats.weightedRuntimeMs === null ? null : r(stats.weightedRuntimeMs), avgRuntimeMs: stats.avgRuntimeMs === null ? null : r(stats.avgRuntimeMs), coverage: r(stats.coverage), tps: r(stats.tps), rollbackRate: r(stats.rollbackRate) };
}

// ---- the end ----

/** After the last iteration: recommend the best configuration, if one beat the baseline. */
async function finish(s: Step, iterations: readonly TuningIterationRecord[], note: string | null): Promise<void> {
  const { session } = s;
  const space = await spaceOf(s);
  if (!space) return;
  const best = sessionBest(space, iterations);
  const prefix = note ? `${note}; ` : '';
  // The last trial may still be applied: whatever happens next starts from known-good.
  const trialMayBeApplied = iterations.length > 0;
  if (!best || best.objective >= 1) {
    const what = best ? `the best measured ${fmt(best.objective)} of the baseline's runtime` : 'no configuration was measured';
    await endSession(s, 'done', `${prefix}no configuration was faster than the baseline (${what}): the database stays on its known-good configuration`, trialMayBeApplied ? 'known-good' : null);
    return;
  }
  if (!session.requireApproval) {
    await applyBest(s, best, session.createdById, prefix);
    return;
  }
  if (trialMayBeApplied) await issueRevert(s, 'known-good', session.createdById);
  await updateSession(s, {
    state: 'awaiting_approval',
    best,
    message: `${prefix}the best configuration (iteration ${best.iteration}) ran the baseline's query mix in ${Math.round((1 - best.objective) * 100)} % less time (objective ${fmt(best.objective)}); approve it to apply and keep it. Meanwhile the database is on its known-good configuration`,
  });
}

/** Applies the best configuration and keeps it (it becomes the agent's known-good). */
export async function applyBest(s: Step, best: SessionBest, userId: string | null, prefix = ''): Promise<void> {
  const command: Command = { id: randomUUID(), kind: 'apply', values: { ...best.config }, allowRestart: s.session.mode === 'restart', keep: true };
  await s.tx.issueCommand(command, userId);
  s.commandIssued = true;
  await updateSession(s, { state: 'applying_best', best, finalCommandId: command.id, finalSentAt: null, message: `${prefix}applying the best configuration (iteration ${best.iteration}) to keep it` });
}

async function finalApplyStep(s: Step): Promise<boolean> {
  const { session } = s;
  const command = session.finalCommandId ? await s.tx.command(session.finalCommandId) : null;
  if (!command) {
    await endSession(s, 'failed', 'the command applying the best configuration is gone', null);
    return false;
  }
  if (command.status === 'done') {
    if (command.outcome?.status === 'applied') {
      await endSession(s, 'done', `the best configuration (iteration ${session.best?.iteration ?? '?'}) is applied and kept: it is the agent's known-good configuration now`, null);
    } else {
      const errors = command.outcome?.errors.join('; ') || 'no reason given';
      await endSession(s, 'failed', `the agent did not apply the best configuration (${command.outcome?.status ?? 'failed'}: ${errors}); the database stays on its known-good configuration`, null);
    }
    return false;
  }
  const sentAt = session.finalSentAt ?? (command.sentCount > 0 ? command.sentAt : null);
  if (session.finalSentAt === null && sentAt !== null) await updateSession(s, { finalSentAt: sentAt });
  const timeout = ENGINE_LIMITS.ackTimeoutSeconds[session.mode];
  if (sentAt !== null && s.now.getTime() - sentAt.getTime() > timeout * 1000) {
    await s.tx.cancelCommand(command.id, `the tuning session gave up waiting for its acknowledgement after ${timeout} s`);
    await endSession(s, 'failed', `the agent did not acknowledge the best configuration within ${timeout} s`, null);
  }
  return false;
}

// ---- ending, from the engine or from a person ----

async function issueRevert(s: Step, to: 'known-good' | 'baseline', userId: string | null): Promise<void> {
  await s.tx.issueCommand({ id: randomUUID(), kind: 'revert', to }, userId);
  s.commandIssued = true;
}

/** Cancels what is in flight: the current iteration and a command the agent has not received. */
async function abandonInFlight(s: Step, reason: string): Promise<void> {
  for (const it of await s.tx.iterations()) {
    if (it.state !== 'applying' && it.state !== 'measuring') continue;
    const command = await s.tx.command(it.commandId);
    if (command?.status === 'pending') await s.tx.cancelCommand(it.commandId, reason);
    await s.tx.updateIteration(it.ordinal, { state: 'cancelled', failure: reason, finished: true });
  }
  if (s.session.state === 'applying_best' && s.session.finalCommandId) {
    const command = await s.tx.command(s.session.finalCommandId);
    if (command?.status === 'pending') await s.tx.cancelCommand(command.id, reason);
  }
}

/** Ends the session in `state`, returning the database to `revertTo` first when given. */
export async function endSession(s: Step, state: 'done' | 'stopped' | 'reverted' | 'failed', message: string, revertTo: 'known-good' | 'baseline' | null, userId: string | null = s.session.createdById): Promise<void> {
  await abandonInFlight(s, `the tuning session ended (${state})`);
  if (revertTo) await issueRevert(s, revertTo, userId);
  await updateSession(s, { state, message, ended: true });
}

/** A Step for a person's action on a locked session. */
export function personStep(tx: TuningSessionTx, session: TuningSessionRecord, now: Date): Step {
  return { tx, session, now, commandIssued: false };
}

export type { Step };

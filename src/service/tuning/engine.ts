// The tuning session's state machine. Every step reads what happened (reports, acks, guardrail
// events: all in storage) and moves the session on, inside the transaction that holds its row
// lock; nothing lives in memory, so a session goes on after a restart, on any replica.
//
//   baseline            measure the configuration as it is for one window (it starts with the
//                       first report after the session's start: the agent reports faster from then)
//   iterating           per trial: suggest → apply as a trial (keep=false) → ack → warm up →
//                       measure one window → ok or failed; after every few measured trials, a
//                       window of the known-good configuration (a revert), so that each trial is
//                       judged against the baseline windows nearest in time; until the planned number,
//                       or until the model promises less than the minimum effect for a few steps
//                       (history.ts nothingLeft). After a guardrail trip the baseline is measured at
//                       once: a trip it shows the environment caused is contaminated (trips.ts)
//                       A trial far enough below the known-good that a short verification is
//                       likely to clear the minimum effect is verified at once (steps.ts): kept
//                       (or offered for approval), it is the known-good the search goes on from
//   verifying           a step, or the search's best at its end, against the known-good in A/B
//                       rounds (A B, B A, …) until its interval decides (src/measure/verify.ts)
//   awaiting_approval   the verified best waits for a person; the database is back on known-good
//   applying_best       the verified best is applied with keep=true (a step: then back to iterating)
//   done | stopped | reverted | failed
//
// Every window is an iteration row. A window that cannot be trusted (src/measure/contamination.ts)
// is marked contaminated and measured again in a new row; it never reaches the optimizer.
import { randomUUID } from 'node:crypto';
import { callShares, contamination, type WindowReport } from '../../measure/contamination.ts';
import { queryMix, timeShares, windowStats, type WindowStats } from '../../measure/objective.ts';
import {
  describeStatementChange,
  describeVerdict,
  roundOrder,
  statementChanges,
  STATEMENT_REGRESSION,
  unsureRegressions,
  verdict,
  type StatementChange,
  type RoundFigures,
  type Role,
  type Verdict,
  type VerifySettings,
} from '../../measure/verify.ts';
import { signalsOf, suggest, type SearchSpace, type Suggestion } from '../../optimizer/index.ts';
import type { Command } from '../../protocol/v1.ts';
import type {
  SessionBest,
  SessionStep,
  SessionVerification,
  SessionWindow,
  TuningIterationPatch,
  TuningIterationRecord,
  TuningSessionPatch,
  TuningSessionRecord,
  TuningSessionTx,
} from './store.ts';
import { TRIAL_EXPIRED_REASON, cancelledByService } from '../databases/store.ts';
import { constraintBreach, throughput } from './constraints.ts';
import { configKey } from '../../optimizer/index.ts';
import { historyOf, isTrial, judgeSession, nothingLeft, searchBest, searchRecommendation, type SessionJudgement } from './history.ts';
import { sessionReportInterval } from './params.ts';
import { ENVIRONMENT_TRIP, environmentTrips, isEnvironmentBreach, tripAwaitingBaseline, verificationTrip } from './trips.ts';
import { chooseWindowSeconds, smallestVerifiableGain, TARGET_WINDOW_NOISE, windowOf } from './window-length.ts';
import { chainAt, chainedInterval, currentEpoch, epochOf, keptSteps, pendingStep, stepNoise, worthVerifyingNow } from './steps.ts';
import { buildSpace } from './space.ts';
import { diagnosisSignals } from '../advice/seed.ts';
import { lowestMemoryShare, selectWindow, serviceInterval, windowClosed, windowFrom, type MeasuredReport } from './window.ts';

export const ENGINE_LIMITS = {
  /** A measurement whose window could not be trusted this many times in a row fails the session. */
  windowAttempts: 3,
  /** An apply not acknowledged this long after it was first sent fails its iteration. Cloud
   * targets wait for parameter groups and reboots, hence the generous figures. */
  ackTimeoutSeconds: { 'reload-only': 10 * 60, restart: 45 * 60 } as const,
  /** A window that ended this long ago is measured with the reports it has (the agent went quiet). */
  minGraceSeconds: 30,
  reportsPerWindow: 5000,
  /** A baseline window after this many measured trials. */
  baselineEvery: 3,
  /** Steps in a row the model promises less than the minimum effect before the search ends (history.ts nothingLeft). */
  exhaustedSteps: 3,
  /** Trips the environment caused (trips.ts) before the session gives up on the environment. */
  environmentTrips: 3,
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
    case 'verifying':
      return verifyStep(s);
    case 'applying_best':
      return finalApplyStep(s);
    default:
      return Promise.resolve(false);
  }
}

async function updateSession(s: Step, patch: TuningSessionPatch): Promise<void> {
  s.session = await s.tx.updateSession(patch);
}

const graceMs = (session: TuningSessionRecord) =>
  Math.max(ENGINE_LIMITS.minGraceSeconds, 3 * sessionReportInterval(windowOf(session))) * 1000;
/** A trial the agent has not received within the session's window (and at least three of the
 * session's report intervals) is cancelled, never delivered late: the moment it was chosen for,
 * between the baseline windows it is judged against, is gone. */
export const trialDeliverySeconds = (session: TuningSessionRecord) =>
  Math.max(windowOf(session), 3 * sessionReportInterval(windowOf(session)));
const fmt = (x: number) => x.toFixed(3);
const pct = (x: number) => `${Number((x * 100).toPrecision(2))} %`;
const windowReports = (reports: readonly MeasuredReport[]): WindowReport[] =>
  reports.map((r) => ({ leaseId: r.leaseId, seq: r.seq, metrics: r.metrics }));

export function verifySettings(session: TuningSessionRecord): VerifySettings {
  return {
    minRounds: session.abRoundsMin,
    maxRounds: session.abRoundsMax,
    minEffect: session.minEffectPercent / 100,
    confidence: session.confidencePercent / 100,
  };
}

// ---- the first baseline window ----

async function baselineStep(s: Step): Promise<boolean> {
  const { session, tx, now } = s;
  const window = session.baselineWindow;
  if (!window) {
    // The window starts where the first report after the start ends: from that report's
    // answer on, the agent reports often enough to fill it.
    const [first] = await tx.reportsSince(session.createdAt, 1);
    if (!first) return false;
    const start = new Date(serviceInterval(first)?.end ?? first.receivedAt.getTime());
    await updateSession(s, {
      baselineWindow: windowFrom(start, session.windowSeconds, 0),
      message: `measuring the baseline for ${session.windowSeconds} s`,
    });
    return true;
  }
  const measured = await closedWindow(s, window, null);
  if (measured === 'open') return false;
  const metrics = measured.reports.map((r) => r.metrics);
  const mix = queryMix(metrics);
  const stats = windowStats(metrics, mix);
  const found = contamination({ reports: windowReports(measured.reports), stats, reference: null });
  if (found.length > 0) {
    const why = found.map((c) => c.message).join('; ');
    if (window.attempts + 1 >= ENGINE_LIMITS.windowAttempts) {
      await endTuningSession(s, 'failed', `the baseline could not be measured in ${ENGINE_LIMITS.windowAttempts} windows: ${why}`, null);
      return false;
    }
    await updateSession(s, {
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
  await updateSession(s, { state: 'iterating', baseline, message: null });
  return true;
}

/** The window's reports once it is closed, or 'open'. */
async function closedWindow(
  s: Step,
  window: SessionWindow,
  expected: Record<string, string> | null,
): Promise<'open' | { reports: MeasuredReport[]; mismatched: number }> {
  if (s.now < window.end) return 'open';
  const reports = await s.tx.reportsSince(window.start, ENGINE_LIMITS.reportsPerWindow);
  if (!windowClosed(reports, window, s.now, graceMs(s.session))) return 'open';
  return selectWindow(reports, window, expected);
}

// ---- windows in flight: trials, baseline windows, A/B windows ----

/**
 * Moves the window in flight, or condemns a measured trial a guardrail reverted since. Returns
 * null when nothing is in flight: the caller decides what to measure next.
 */
async function inFlightStep(s: Step, iterations: readonly TuningIterationRecord[]): Promise<boolean | null> {
  const commandIds = [...new Set(iterations.map((it) => it.commandId))];
  const breaches = new Map((await s.tx.guardrailBreaches(commandIds)).map((b) => [b.commandId, b.message]));
  // A guardrail that reverted a trial after its window was measured still condemns it.
  let flipped = false;
  for (const it of iterations) {
    const breach = breaches.get(it.commandId);
    // A failover after the measurement leaves the measurement as it was.
    if (it.state === 'ok' && it.kind !== 'baseline' && breach !== undefined && !isEnvironmentBreach(breach)) {
      await s.tx.updateIteration(it.ordinal, { state: 'failed', failure: `after the measurement, ${guardrailFailure(breach)}` });
      flipped = true;
    }
  }
  if (flipped) return true;
  const current = iterations.find((it) => it.state === 'applying' || it.state === 'measuring');
  if (current?.state === 'applying') return applyingStep(s, current);
  if (current) return measuringStep(s, iterations, current, breaches.get(current.commandId));
  return null;
}

/** The session's search space; a space that cannot be rebuilt (a catalog changed under a stored
 * session, say) ends the session rather than failing every step. */
async function spaceOf(s: Step): Promise<SearchSpace | null> {
  try {
    return buildSpace(s.session.space);
  } catch (err) {
    await endTuningSession(
      s,
      'failed',
      `the search space cannot be rebuilt from what the agent reported at the start: ${(err as Error).message}`,
      'known-good',
    );
    return null;
  }
}

const nextOrdinal = (iterations: readonly TuningIterationRecord[]) => (iterations.at(-1)?.ordinal ?? 0) + 1;

async function issueTrial(s: Step, iterations: readonly TuningIterationRecord[], suggestion: Suggestion): Promise<boolean> {
  const command: Command = {
    id: randomUUID(),
    kind: 'apply',
    values: { ...suggestion.config },
    allowRestart: s.session.mode === 'restart',
    keep: false,
  };
  await s.tx.addIteration(
    {
      ordinal: nextOrdinal(iterations),
      kind: suggestion.kind,
      phase: 'search',
      round: null,
      config: { ...suggestion.config },
      reason: suggestion.reason,
      predicted: suggestion.predicted ?? null,
      commandId: command.id,
      deliverWithinSeconds: trialDeliverySeconds(s.session),
    },
    command,
    s.session.createdById,
  );
  s.commandIssued = true;
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
async function issueWindow(
  s: Step,
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
    await endTuningSession(s, 'failed', `${why}; the database returns to its known-good configuration`, 'known-good');
    return false;
  }
  const last = iterations.at(-1);
  const base = { ordinal: nextOrdinal(iterations), kind, phase, round, config: { ...config }, reason, predicted: null } as const;
  if (last && last.kind === kind && (last.state === 'ok' || last.state === 'contaminated') && last.effective) {
    const window = windowFrom(s.now, windowOf(s.session), 0);
    await s.tx.addIteration(
      { ...base, commandId: last.commandId, measuring: { sentAt: last.sentAt, ackedAt: last.ackedAt, effective: last.effective, window } },
      null,
      s.session.createdById,
    );
    return true;
  }
  const command: Command =
    role === 'baseline'
      ? { id: randomUUID(), kind: 'revert', to: 'known-good' }
      : { id: randomUUID(), kind: 'apply', values: { ...config }, allowRestart: s.session.mode === 'restart', keep: false };
  // A revert may arrive late: it only returns the database to what the agent found.
  const deadline = command.kind === 'apply' ? { deliverWithinSeconds: trialDeliverySeconds(s.session) } : {};
  await s.tx.addIteration({ ...base, commandId: command.id, ...deadline }, command, s.session.createdById);
  s.commandIssued = true;
  return false;
}

/** The guardrail's event message says "guardrail: …" already. */
const guardrailFailure = (message: string) => (/^guardrail\b/.test(message) ? message : `guardrail: ${message}`);

async function failIteration(s: Step, it: TuningIterationRecord, failure: string, extra: TuningIterationPatch = {}): Promise<true> {
  await s.tx.updateIteration(it.ordinal, { ...extra, state: 'failed', failure, finished: true });
  return true;
}

/** Not the configuration's fault: left out of the history, and something else is measured. */
async function cancelIteration(s: Step, it: TuningIterationRecord, failure: string): Promise<true> {
  await s.tx.updateIteration(it.ordinal, { state: 'cancelled', failure, finished: true });
  return true;
}

/** Waiting for the agent's acknowledgement of the window's command. */
async function applyingStep(s: Step, it: TuningIterationRecord): Promise<boolean> {
  const command = await s.tx.command(it.commandId);
  if (!command) return failIteration(s, it, 'its command is gone from the storage');
  const sentAt = it.sentAt ?? (command.sentCount > 0 ? command.sentAt : null);
  // Cancelled by the service (past its deadline, or an API key revoked) before the agent acknowledged it.
  if (cancelledByService(command)) return cancelIteration(s, it, command.outcome?.errors.join('; ') || 'cancelled by the service');
  // Past its deadline and never handed over (the agent is quiet): no report will deliver it now.
  if (command.status === 'pending' && command.deliverBy !== null && s.now >= command.deliverBy) {
    await s.tx.cancelCommand(it.commandId, TRIAL_EXPIRED_REASON);
    return cancelIteration(s, it, TRIAL_EXPIRED_REASON);
  }
  if (command.status === 'done') {
    const outcome = command.outcome;
    if (outcome?.status !== 'applied') {
      const errors = outcome?.errors.join('; ') || 'no reason given';
      return failIteration(s, it, `${outcome?.status ?? 'failed'} by the agent: ${errors}`, { sentAt, ackedAt: command.ackedAt });
    }
    const ackedAt = command.ackedAt ?? s.now;
    const start = new Date(ackedAt.getTime() + s.session.warmupSeconds * 1000);
    await s.tx.updateIteration(it.ordinal, {
      state: 'measuring',
      sentAt,
      ackedAt,
      effective: outcome.effective,
      window: windowFrom(start, windowOf(s.session), 0),
    });
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
async function measuringStep(
  s: Step,
  iterations: readonly TuningIterationRecord[],
  it: TuningIterationRecord,
  breach: string | undefined,
): Promise<boolean> {
  if (breach !== undefined && it.kind !== 'baseline') {
    if (!isEnvironmentBreach(breach)) return failIteration(s, it, guardrailFailure(breach));
    // The environment ended the trial (a failover): not the configuration's failure.
    await s.tx.updateIteration(it.ordinal, { state: 'contaminated', failure: `${ENVIRONMENT_TRIP} ${breach}`, finished: true });
    return true;
  }
  const window = it.window;
  if (!window) return failIteration(s, it, 'no measurement window was set');
  const measured = await closedWindow(s, window, it.effective);
  if (measured === 'open') return false;
  if (measured.mismatched > 0) {
    // Not the configuration's fault as far as anyone can tell (an agent restart returns to
    // known-good): left out of the history, and something else is measured.
    await s.tx.updateIteration(it.ordinal, {
      state: 'cancelled',
      failure: `the configuration was not in effect for the whole window (${measured.mismatched} report(s) showed other values), without a guardrail event: the agent returned to known-good, e.g. after a restart`,
      finished: true,
    });
    return true;
  }
  const baseline = s.session.baseline;
  if (!baseline) return failIteration(s, it, 'the session has no baseline');
  const stats = windowStats(
    measured.reports.map((r) => r.metrics),
    baseline.mix,
  );
  const found = contamination({ reports: windowReports(measured.reports), stats, reference: baseline.shares ?? null });
  if (found.length > 0) return remeasure(s, iterations, it, window, found.map((c) => c.message).join('; '), stats, measured.reports.length);
  // Trials are judged window by window; the A/B rounds judge the candidate's throughput over all
  // rounds instead (src/measure/verify.ts); a baseline window is what the others are judged by.
  const reference = nearestBaselineStats(s.session, iterations, it.ordinal);
  const breached =
    !isTrial(it) || !reference
      ? null
      : constraintBreach(stats, reference, { window: lowestMemoryShare(measured.reports), baseline: baseline.lowestMemoryShare });
  await s.tx.updateIteration(it.ordinal, {
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
  s: Step,
  iterations: readonly TuningIterationRecord[],
  it: TuningIterationRecord,
  window: SessionWindow,
  why: string,
  stats: WindowStats,
  reports: number,
): Promise<boolean> {
  const attempts = window.attempts + 1;
  await s.tx.updateIteration(it.ordinal, {
    state: 'contaminated',
    stats: roundStats(stats),
    reports,
    failure: `contaminated: ${why}`,
    finished: true,
  });
  if (attempts >= ENGINE_LIMITS.windowAttempts) {
    await endTuningSession(
      s,
      'failed',
      `iteration ${it.ordinal} could not be measured cleanly in ${ENGINE_LIMITS.windowAttempts} windows in a row (the last: ${why}); the database returns to its known-good configuration`,
      'known-good',
    );
    return false;
  }
  const start = new Date(s.now.getTime() + s.session.warmupSeconds * 1000);
  await s.tx.addIteration(
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
        window: windowFrom(start, windowOf(s.session), attempts),
      },
    },
    null,
    s.session.createdById,
  );
  return true;
}

function roundStats(stats: WindowStats): WindowStats {
  const r = (x: number) => Number(x.toPrecision(6));
  return {
    ...stats,
    weightedRuntimeMs: stats.weightedRuntimeMs === null ? null : r(stats.weightedRuntimeMs),
    avgRuntimeMs: stats.avgRuntimeMs === null ? null : r(stats.avgRuntimeMs),
    coverage: r(stats.coverage),
    tps: r(stats.tps),
    rollbackRate: r(stats.rollbackRate),
  };
}

// ---- the search ----

async function iterationStep(s: Step): Promise<boolean> {
  const iterations = await s.tx.iterations();
  const moved = await inFlightStep(s, iterations);
  if (moved !== null) return moved;

  // A trip the baseline window after it shows the environment caused is no failure (trips.ts).
  const environmental = environmentTrips(s.session, iterations);
  for (const trip of environmental) await s.tx.updateIteration(trip.ordinal, { state: 'contaminated', failure: trip.failure });
  if (environmental.length > 0) return true;

  const trials = iterations.filter(isTrial);
  const finished = trials.filter((it) => it.state === 'ok' || it.state === 'failed').length;
  const cancelled = trials.filter((it) => it.state === 'cancelled').length;
  if (cancelled > s.session.iterations) {
    await endTuningSession(
      s,
      'failed',
      `${cancelled} trials were cancelled (not received by the agent in time, or not in effect for their whole window: the agent kept returning to known-good): stopped`,
      'known-good',
    );
    return false;
  }
  const tripped = trials.filter((it) => it.failure?.startsWith(ENVIRONMENT_TRIP)).length;
  if (tripped > ENGINE_LIMITS.environmentTrips) {
    await endTuningSession(
      s,
      'failed',
      `${tripped} trials tripped a guardrail while the baseline was just as slow: the environment is too unsettled to tune in; stopped`,
      'known-good',
    );
    return false;
  }
  const trip = tripAwaitingBaseline(iterations);
  if (trip) {
    return issueWindow(
      s,
      iterations,
      'baseline',
      'search',
      null,
      {},
      `the baseline measured again after iteration ${trip.ordinal} failed (${trip.failure ?? 'no reason given'}): if it is just as slow, the environment caused it`,
    );
  }
  if (finished >= s.session.iterations) return startVerification(s, iterations, null);
  const epoch = currentEpoch(s.session);
  if (epoch > 0 && !iterations.some((it) => it.kind === 'baseline' && it.state === 'ok' && epochOf(s.session, it.ordinal) === epoch)) {
    return issueWindow(
      s,
      iterations,
      'baseline',
      'search',
      null,
      {},
      `the baseline measured again: step ${keptSteps(s.session).at(-1)!.n} is the known-good configuration now, and the trials after it are judged against it`,
    );
  }
  const judgement = judgeSession(s.session, iterations);
  if (await chooseWindow(s, judgement)) return true;
  const early = stepDue(s.session, iterations, judgement);
  if (early) return startStep(s, iterations, early);
  if (baselineDue(iterations)) {
    return issueWindow(
      s,
      iterations,
      'baseline',
      'search',
      null,
      {},
      `the baseline measured again after ${ENGINE_LIMITS.baselineEvery} trials: each trial is judged against the baseline windows nearest in time`,
    );
  }
  const space = await spaceOf(s);
  if (!space) return false;
  let suggestion: Suggestion;
  try {
    suggestion = suggest({
      space,
      history: historyOf(iterations, judgement),
      seed: s.session.seed,
      iteration: trials.length,
      ...(diagnosisSignals(s.session) && { signals: diagnosisSignals(s.session) }),
    });
  } catch (err) {
    return startVerification(s, iterations, `the optimizer has nothing more to try (${(err as Error).message})`);
  }
  // What a verification could prove at the measured noise: a promise under it cannot end in a verified gain.
  const minEffect = s.session.minEffectPercent / 100;
  const provable = smallestVerifiableGain(judgement.noise, verifySettings(s.session));
  const promised = nothingLeft(iterations, suggestion, Math.max(minEffect, provable), ENGINE_LIMITS.exhaustedSteps);
  if (promised) {
    const most = Math.max(...promised);
    const under =
      provable > minEffect
        ? `under the ${pct(provable)} that ${s.session.abRoundsMax} A/B rounds can verify at the measured noise of one window, ${pct(judgement.noise ?? 0)}`
        : `under the minimum effect of ${pct(minEffect)}`;
    return startVerification(
      s,
      iterations,
      `the search has nothing left to give: for ${promised.length} steps in a row the model allowed at most ${pct(most)} over the best so far (${under}), so it stopped after ${finished} of ${s.session.iterations} trials`,
    );
  }
  return issueTrial(s, iterations, suggestion);
}

/** Measured trials since the last baseline window (the first counts) reached the cadence. */
function baselineDue(iterations: readonly TuningIterationRecord[]): boolean {
  let since = 0;
  for (const it of iterations) {
    if (it.kind === 'baseline' && it.state === 'ok') since = 0;
    else if (isTrial(it) && it.state === 'ok') since++;
  }
  return since >= ENGINE_LIMITS.baselineEvery;
}

/**
 * The last measured trial, when it is a step worth verifying now (steps.ts worthVerifyingNow):
 * measured ok in the current epoch, not verified before, and no other step pending.
 */
function stepDue(
  session: TuningSessionRecord,
  iterations: readonly TuningIterationRecord[],
  judgement: SessionJudgement,
): TuningIterationRecord | null {
  if (!session.verifyEarly || pendingStep(session)) return null;
  const last = iterations.filter((it) => isTrial(it) && (it.state === 'ok' || it.state === 'failed')).at(-1);
  if (last?.state !== 'ok' || session.steps.some((step) => step.iteration === last.ordinal)) return null;
  const epoch = epochOf(session, last.ordinal);
  if (epoch !== currentEpoch(session)) return null;
  const objective = judgement.judged.get(last.ordinal)?.objective;
  if (objective === undefined) return null;
  const noise = stepNoise(judgement.noise, judgement.noiseDifferences, last.kind);
  return worthVerifyingNow(objective / chainAt(session, epoch), noise, verifySettings(session)) ? last : null;
}

/**
 * Once the noise of one window is measured, the session's windows take the length that noise
 * needs (window-length.ts), once; true when it chose. Sessions with fixed windows never do.
 */
async function chooseWindow(s: Step, judgement: SessionJudgement): Promise<boolean> {
  const { session } = s;
  if (session.windowNowSeconds !== null || session.windowMinSeconds >= session.windowSeconds || judgement.noise === null) return false;
  const chosen = chooseWindowSeconds(judgement.noise, session.windowSeconds, { min: session.windowMinSeconds, max: session.windowSeconds });
  await updateSession(s, {
    windowNowSeconds: chosen,
    message: `the noise of one ${session.windowSeconds} s window is ${pct(judgement.noise)}: ${chosen === session.windowSeconds ? `windows stay ${chosen} s` : `windows of ${chosen} s from now on (about ${pct(TARGET_WINDOW_NOISE)} each${chosen === session.windowMinSeconds ? `, at the shortest allowed` : ''})`}`,
  });
  return true;
}

/** The next verification's first round: rounds are numbered on across a session's verifications. */
const nextRound = (iterations: readonly TuningIterationRecord[]) =>
  Math.max(0, ...iterations.filter((it) => it.phase === 'verify').map((it) => it.round ?? 0)) + 1;

/** Verifies a trial as a step, now (steps.ts). */
async function startStep(s: Step, iterations: readonly TuningIterationRecord[], trial: TuningIterationRecord): Promise<boolean> {
  const judged = judgeSession(s.session, iterations).judged.get(trial.ordinal)!;
  const relative = judged.objective / chainAt(s.session, epochOf(s.session, trial.ordinal));
  const step: SessionStep = {
    n: s.session.steps.length + 1,
    iteration: trial.ordinal,
    config: { ...trial.config },
    rounds: 0,
    runtime: null,
    throughput: null,
    statements: [],
    outcome: 'verifying',
    note: null,
    keptAfter: null,
    at: s.now.toISOString(),
  };
  const verification: SessionVerification = {
    candidate: { iteration: trial.ordinal, config: { ...trial.config }, objective: judged.objective },
    rounds: 0,
    runtime: null,
    throughput: null,
    decision: 'continue',
    note: null,
    purpose: 'step',
    firstRound: nextRound(iterations),
  };
  await updateSession(s, {
    state: 'verifying',
    verification,
    steps: [...s.session.steps, step],
    message: `iteration ${trial.ordinal} measured at ${fmt(relative)} of the known-good configuration's runtime, enough for a short verification to clear the minimum effect: verifying it now as step ${step.n}, against the known-good in ${s.session.abRoundsMin} to ${s.session.abRoundsMax} A/B rounds`,
  });
  return true;
}

/** Updates the pending step (the last one) with `patch`. */
async function updateStep(s: Step, patch: Partial<SessionStep>): Promise<void> {
  const steps = s.session.steps.map((step, i) => (i === s.session.steps.length - 1 ? { ...step, ...patch } : step));
  await updateSession(s, { steps });
}

/** A step that will not be kept: noted, and the search goes on from the known-good it had. */
async function stepNotKept(
  s: Step,
  outcome: 'not_verified' | 'refused',
  note: string,
  v: Verdict,
  statements: readonly StatementChange[],
): Promise<boolean> {
  const step = pendingStep(s.session)!;
  await updateStep(s, { outcome, note, rounds: v.rounds, runtime: v.runtime, throughput: v.throughput, statements: [...statements] });
  await updateSession(s, {
    state: 'iterating',
    verification: { ...s.session.verification!, ...figures(v), decision: 'no_significant_improvement', note },
    message: `step ${step.n} (iteration ${step.iteration}) ${outcome === 'refused' ? 'is not recommended' : 'was not verified'}: ${note}; the search goes on`,
  });
  return true;
}

// ---- the verification ----

/** The kept steps in words, for the session's last message ("" without any). */
function keptWords(session: TuningSessionRecord): string {
  const kept = keptSteps(session);
  if (kept.length === 0) return '';
  const confidence = session.confidencePercent / 100;
  const each = kept.map((k) => `step ${k.n} (iteration ${k.iteration}): ${k.runtime ? describeVerdict({ ...k }, confidence) : 'verified'}`);
  return `${kept.length === 1 ? 'the verified step' : `${kept.length} verified steps`} kept (${each.join('; ')})`;
}

/** After the search: verify its recommendation, or end when no trial even measured below the known-good. */
async function startVerification(s: Step, iterations: readonly TuningIterationRecord[], note: string | null): Promise<boolean> {
  const space = await spaceOf(s);
  if (!space) return false;
  const judgement = judgeSession(s.session, iterations);
  // The rounds' windows are all of one length: chosen before them when the noise is known now.
  if (await chooseWindow(s, judgement)) return true;
  const best = searchBest(space, iterations, judgement);
  const prefix = note ? `${note}; ` : '';
  const kept = keptSteps(s.session);
  const knownGood = chainAt(s.session, kept.length);
  const lastKept = kept.at(-1);
  const candidate = best && (searchRecommendation(space, iterations, judgement) ?? best);
  if (!best || !candidate || best.objective >= knownGood || (lastKept && configKey(candidate.config) === configKey(lastKept.config))) {
    if (lastKept) {
      await endTuningSession(
        s,
        'done',
        `${prefix}${keptWords(s.session)}; no trial after step ${lastKept.n} measured below it, so the database stays on it: it is the agent's known-good configuration`,
        'known-good',
      );
      return false;
    }
    const what = best
      ? `no trial measured below the baseline's runtime (the best: objective ${fmt(best.objective)})`
      : 'no configuration was measured';
    await endTuningSession(
      s,
      'done',
      `${prefix}no significant improvement: ${what}; the database stays on its known-good configuration`,
      iterations.length > 0 ? 'known-good' : null,
    );
    return false;
  }
  const simpler =
    candidate.iteration === best.iteration
      ? ''
      : `; it changes fewer knobs than the best (iteration ${best.iteration}, objective ${fmt(best.objective)}), which the windows' noise cannot tell from it`;
  const verification: SessionVerification = {
    candidate,
    rounds: 0,
    runtime: null,
    throughput: null,
    decision: 'continue',
    note: null,
    purpose: 'final',
    firstRound: nextRound(iterations),
  };
  const against = lastKept ? `step ${lastKept.n}, the known-good configuration now,` : 'the baseline';
  await updateSession(s, {
    state: 'verifying',
    verification,
    message: `${prefix}verifying the search's recommendation (iteration ${candidate.iteration}, objective ${fmt(candidate.objective)} in the search, not verified${simpler}) against ${against} in ${s.session.abRoundsMin} to ${s.session.abRoundsMax} A/B rounds`,
  });
  return true;
}

/** The complete rounds of the verification starting at round `first`: a clean baseline and candidate window each. */
function roundsOf(iterations: readonly TuningIterationRecord[], first: number): RoundFigures[] {
  const rounds: RoundFigures[] = [];
  for (let r = first; ; r++) {
    // The last of each: a round measured again after a candidate's trip the environment caused
    // has a second baseline window, the one next to its candidate's.
    const of = (kind: 'baseline' | 'candidate') =>
      iterations.findLast(
        (it) => it.phase === 'verify' && it.round === r && it.kind === kind && it.state === 'ok' && it.stats?.weightedRuntimeMs,
      );
    const a = of('baseline');
    const b = of('candidate');
    if (!a?.stats || !b?.stats) return rounds;
    const figures = (stats: WindowStats) => ({
      runtimeMs: stats.weightedRuntimeMs!,
      throughput: throughput(stats),
      ...(stats.statementMs && { statementMs: stats.statementMs }),
    });
    rounds.push({ baseline: figures(a.stats), candidate: figures(b.stats) });
  }
}

async function verifyStep(s: Step): Promise<boolean> {
  const iterations = await s.tx.iterations();
  const moved = await inFlightStep(s, iterations);
  if (moved !== null) return moved;
  const verification = s.session.verification;
  if (!verification) {
    await endTuningSession(s, 'failed', 'the session is verifying without a candidate', 'known-good');
    return false;
  }
  const isStep = verification.purpose === 'step' && pendingStep(s.session) !== null;
  const first = verification.firstRound ?? 1;
  const settings = verifySettings(s.session);
  const rounds = roundsOf(iterations, first);
  const noise = judgeSession(s.session, iterations).noise;
  const v = verdict(rounds, settings, noise);
  const baseline = s.session.baseline;
  const shares = baseline?.stats.statementMs ? timeShares(baseline.mix, baseline.stats.statementMs) : {};
  const statements = statementChanges(rounds, shares, settings, noise);
  const failed = iterations.find(
    (it) => it.phase === 'verify' && (it.round ?? 0) >= first && it.kind === 'candidate' && it.state === 'failed',
  );
  if (failed) {
    const roundWords = `A/B round ${failed.round === null ? '?' : failed.round - first + 1}`;
    // A guardrail trip is judged by the baseline window after it, as a trial's is (trips.ts).
    const trip = verificationTrip(s.session, iterations, failed);
    if (trip.outcome === 'awaiting')
      return issueWindow(
        s,
        iterations,
        'baseline',
        'verify',
        failed.round,
        {},
        `${roundWords}: the baseline (known-good) measured after the candidate tripped a guardrail (${failed.failure ?? 'no reason given'}): if it is just as slow, the environment caused it`,
      );
    const environmental = iterations.filter(
      (it) => it.phase === 'verify' && (it.round ?? 0) >= first && it.failure?.startsWith(ENVIRONMENT_TRIP),
    ).length;
    if (trip.outcome === 'environment' && environmental < ENGINE_LIMITS.environmentTrips) {
      // The round is measured again: its candidate window, next to the baseline window just measured.
      await s.tx.updateIteration(failed.ordinal, { state: 'contaminated', failure: trip.failure });
      return true;
    }
    const note = `the candidate failed in ${roundWords}: ${failed.failure ?? 'no reason given'}${trip.outcome === 'environment' ? ` (the environment, as the baseline window after it showed, but ${environmental} candidate windows of this verification were already the environment's: too unsettled to verify in)` : ''}`;
    if (isStep) return stepNotKept(s, 'not_verified', note, v, statements);
    await updateSession(s, { verification: { ...verification, ...figures(v), decision: 'no_significant_improvement', note } });
    await endTuningSession(
      s,
      'done',
      `${keptWords(s.session) ? `${keptWords(s.session)}; then ` : ''}no significant improvement: ${note}; the database stays on its known-good configuration`,
      'known-good',
    );
    return false;
  }
  // A statement measured much slower whose interval cannot say so yet: more rounds, while there are.
  const unsure = v.decision === 'recommend' && v.rounds < settings.maxRounds ? unsureRegressions(statements) : [];
  const decision = unsure.length > 0 ? 'continue' : v.decision;
  if (v.rounds !== verification.rounds || decision !== verification.decision) {
    const note =
      unsure.length > 0
        ? `the runtime interval clears the minimum effect, but ${unsure.map((c) => `statement ${c.key}`).join(', ')} measured ×${STATEMENT_REGRESSION} or slower without its interval saying so: another round`
        : figures(v).note;
    await updateSession(s, { verification: { ...verification, ...figures(v), note, decision, statements } });
    if (isStep) await updateStep(s, { rounds: v.rounds, runtime: v.runtime, throughput: v.throughput, statements });
  }
  if (decision === 'recommend') return recommend(s, v, statements);
  if (v.decision === 'no_significant_improvement') {
    const words = `${describeVerdict(v, settings.confidence)}: ${v.why}`;
    if (isStep) return stepNotKept(s, 'not_verified', words, v, statements);
    const kept = keptWords(s.session);
    await endTuningSession(
      s,
      'done',
      kept
        ? `${kept}; the search's last recommendation against it: no significant improvement (${words}); the database stays on the last step`
        : `no significant improvement: ${words}; the database stays on its known-good configuration`,
      'known-good',
    );
    return false;
  }
  const round = first + rounds.length;
  const done = (kind: Role) =>
    iterations.some((it) => it.phase === 'verify' && it.round === round && it.kind === kind && it.state === 'ok');
  const role = roundOrder(round - first + 1).find((r) => !done(r))!;
  const what = isStep ? `step ${pendingStep(s.session)!.n}` : 'candidate';
  const reason = `A/B round ${round - first + 1}: the ${role === 'baseline' ? 'baseline (known-good)' : `${what} (iteration ${verification.candidate.iteration})`}`;
  return issueWindow(s, iterations, role, 'verify', round, role === 'baseline' ? {} : verification.candidate.config, reason);
}

const figures = (v: Verdict) => ({
  rounds: v.rounds,
  runtime: v.runtime,
  throughput: v.throughput,
  note: v.decision === 'continue' ? null : v.why,
});

/**
 * The verified best: kept at once, or after a person's approval (meanwhile on known-good). A
 * statement it makes slower (verify.ts statementChanges) is never kept silently: it is named, and
 * the configuration waits for a person's approval whatever the session's requireApproval says.
 */
async function recommend(s: Step, v: Verdict, statements: readonly StatementChange[]): Promise<boolean> {
  const { session } = s;
  const candidate = session.verification!.candidate;
  const step = session.verification!.purpose === 'step' ? pendingStep(session) : null;
  const chain = chainAt(session, currentEpoch(session));
  const best: SessionBest = {
    iteration: candidate.iteration,
    config: { ...candidate.config },
    objective: chain * v.runtime!.estimate,
    measurements: v.rounds,
    runtime: chainedInterval(session, v.runtime),
  };
  const confidence = session.confidencePercent / 100;
  const what = step ? `step ${step.n} (iteration ${best.iteration})` : `the best configuration (iteration ${best.iteration})`;
  const against = keptSteps(session).length > 0 ? ' against the last kept step' : '';
  const summary = `verified${against}: ${describeVerdict(v, confidence)}`;
  const regressions = statements.filter((c) => c.regression);
  const unsure = unsureRegressions(statements);
  if (!session.requireApproval && regressions.length === 0 && unsure.length === 0) {
    if (step) await updateStep(s, { outcome: 'applying' });
    await applyBest(s, best, session.createdById, `${what} is ${summary}; `);
    return false;
  }
  const slower = `it makes ${regressions.length === 1 ? 'a statement' : `${regressions.length} statements`} slower by ${Math.round((STATEMENT_REGRESSION - 1) * 100)} % or more: ${regressions.map((c) => describeStatementChange(c, confidence)).join('; ')}`;
  if (regressions.length > 0 && session.statementRegressions === 'refuse') {
    const note = `the configuration is ${summary}, but ${slower}`;
    if (step) return stepNotKept(s, 'refused', note, v, statements);
    await updateSession(s, { verification: { ...session.verification!, decision: 'no_significant_improvement', note } });
    const kept = keptWords(session);
    await endTuningSession(
      s,
      'done',
      `${kept ? `${kept}; then ` : ''}not recommended: ${note}; the database stays on its known-good configuration`,
      'known-good',
    );
    return false;
  }
  const maybe =
    unsure.length === 0
      ? ''
      : `it may make ${unsure.length === 1 ? 'a statement' : `${unsure.length} statements`} slower by ${Math.round((STATEMENT_REGRESSION - 1) * 100)} % or more (measured so, not proven at the verification's confidence after ${v.rounds} rounds): ${unsure.map((c) => describeStatementChange(c, confidence)).join('; ')}`;
  const concerns = [regressions.length === 0 ? '' : slower, maybe].filter(Boolean).join('; and ');
  const warning = concerns === '' ? '' : `; but ${concerns}`;
  await issueRevert(s, 'known-good', session.createdById);
  if (step) await updateStep(s, { outcome: 'awaiting_approval', note: concerns === '' ? null : concerns });
  const then = step ? '; the search goes on from it once it is kept' : '';
  await updateSession(s, {
    state: 'awaiting_approval',
    best,
    message: `${what} is ${summary}${warning}; approve it to apply and keep it${then}. Meanwhile the database is on its known-good configuration`,
  });
  return false;
}

// ---- the end ----

/** Applies the best configuration and keeps it (it becomes the agent's known-good). */
export async function applyBest(s: Step, best: SessionBest, userId: string | null, prefix = ''): Promise<void> {
  if (pendingStep(s.session)?.outcome === 'awaiting_approval') await updateStep(s, { outcome: 'applying' });
  const command: Command = {
    id: randomUUID(),
    kind: 'apply',
    values: { ...best.config },
    allowRestart: s.session.mode === 'restart',
    keep: true,
  };
  await s.tx.issueCommand(command, userId);
  s.commandIssued = true;
  await updateSession(s, {
    state: 'applying_best',
    best,
    finalCommandId: command.id,
    finalSentAt: null,
    message: `${prefix}applying the verified configuration (iteration ${best.iteration}) to keep it`,
  });
}

async function finalApplyStep(s: Step): Promise<boolean> {
  const { session } = s;
  const command = session.finalCommandId ? await s.tx.command(session.finalCommandId) : null;
  if (!command) {
    await endTuningSession(s, 'failed', 'the command applying the best configuration is gone', null);
    return false;
  }
  if (command.status === 'done') {
    if (command.outcome?.status === 'applied') {
      const step = pendingStep(session);
      if (step?.outcome === 'applying') return stepKept(s, step);
      const v = session.verification;
      const figures = v ? describeVerdict(v, session.confidencePercent / 100) : 'verified';
      const kept = keptWords(session);
      await endTuningSession(
        s,
        'done',
        `${kept ? `${kept}; then ` : ''}the verified configuration (iteration ${session.best?.iteration ?? '?'}; ${figures}${kept ? ' against the last step' : ''}) is applied and kept: it is the agent's known-good configuration now`,
        null,
      );
    } else {
      const errors = command.outcome?.errors.join('; ') || 'no reason given';
      await endTuningSession(
        s,
        'failed',
        `the agent did not apply the best configuration (${command.outcome?.status ?? 'failed'}: ${errors}); the database stays on its known-good configuration`,
        null,
      );
    }
    return false;
  }
  const sentAt = session.finalSentAt ?? (command.sentCount > 0 ? command.sentAt : null);
  if (session.finalSentAt === null && sentAt !== null) await updateSession(s, { finalSentAt: sentAt });
  const timeout = ENGINE_LIMITS.ackTimeoutSeconds[session.mode];
  if (sentAt !== null && s.now.getTime() - sentAt.getTime() > timeout * 1000) {
    await s.tx.cancelCommand(command.id, `the tuning session gave up waiting for its acknowledgement after ${timeout} s`);
    await endTuningSession(s, 'failed', `the agent did not acknowledge the best configuration within ${timeout} s`, null);
  }
  return false;
}

/** A step applied with keep=true: the known-good configuration now, and the search goes on from it. */
async function stepKept(s: Step, step: SessionStep): Promise<boolean> {
  const iterations = await s.tx.iterations();
  await updateStep(s, { outcome: 'kept', keptAfter: iterations.at(-1)?.ordinal ?? 0 });
  // finalCommandId stays the step's keep: what the session kept, should it end on this step.
  await updateSession(s, {
    state: 'iterating',
    message: `step ${step.n} (iteration ${step.iteration}) is kept: it is the agent's known-good configuration, and the search goes on from it`,
  });
  return true;
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
export async function endTuningSession(
  s: Step,
  state: 'done' | 'stopped' | 'reverted' | 'failed',
  message: string,
  revertTo: 'known-good' | 'baseline' | null,
  userId: string | null = s.session.createdById,
): Promise<void> {
  await abandonInFlight(s, `the tuning session ended (${state})`);
  const step = pendingStep(s.session);
  if (step)
    await updateStep(
      s,
      step.outcome === 'verifying'
        ? { outcome: 'not_verified', note: `the session ended (${state}) before its verification did` }
        : { outcome: 'not_kept', note: `the session ended (${state}) before it was kept` },
    );
  if (revertTo) await issueRevert(s, revertTo, userId);
  await updateSession(s, { state, message, ended: true });
}

/** A Step for a person's action on a locked session. */
export function personStep(tx: TuningSessionTx, session: TuningSessionRecord, now: Date): Step {
  return { tx, session, now, commandIssued: false };
}

export type { Step };

// One turn of the engine on a locked session (Turn: the transaction, the session, the clock, and
// whether a command was queued), the engine's limits, and what every state's module shares.
import type { WindowReport } from '../../../measure/contamination.ts';
import type { WindowStats } from '../../../measure/objective.ts';
import { describeVerdict, type VerifySettings } from '../../../measure/verify.ts';
import type { Suggestion } from '../../../optimizer/index.ts';
import type {
  NewTuningIteration,
  SessionStep,
  TuningIterationRecord,
  TuningSessionPatch,
  TuningSessionRecord,
  TuningSessionTx,
} from '../store.ts';
import { sessionReportInterval } from '../params.ts';
import { windowOf } from '../window-length.ts';
import { keptSteps } from '../steps.ts';
import type { MeasuredReport } from '../window.ts';

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

export interface Turn {
  tx: TuningSessionTx;
  session: TuningSessionRecord;
  now: Date;
  /** A command was queued for the agent: the caller may hand it over at once. */
  commandIssued: boolean;
}

export async function updateSession(t: Turn, patch: TuningSessionPatch): Promise<void> {
  t.session = await t.tx.updateSession(patch);
}

export const graceMs = (session: TuningSessionRecord) =>
  Math.max(ENGINE_LIMITS.minGraceSeconds, 3 * sessionReportInterval(windowOf(session))) * 1000;

/** A trial the agent has not received within the session's window (and at least three of the
 * session's report intervals) is cancelled, never delivered late: the moment it was chosen for,
 * between the baseline windows it is judged against, is gone. */
export const trialDeliverySeconds = (session: TuningSessionRecord) =>
  Math.max(windowOf(session), 3 * sessionReportInterval(windowOf(session)));

export const fmt = (x: number) => x.toFixed(3);

export const pct = (x: number) => `${Number((x * 100).toPrecision(2))} %`;

export const windowReports = (reports: readonly MeasuredReport[]): WindowReport[] =>
  reports.map((r) => ({ leaseId: r.leaseId, seq: r.seq, metrics: r.metrics }));

export function verifySettings(session: TuningSessionRecord): VerifySettings {
  return {
    minRounds: session.abRoundsMin,
    maxRounds: session.abRoundsMax,
    minEffect: session.minEffectPercent / 100,
    confidence: session.confidencePercent / 100,
  };
}

export const nextOrdinal = (iterations: readonly TuningIterationRecord[]) => (iterations.at(-1)?.ordinal ?? 0) + 1;

/** The search iteration that measures `suggestion`, carried out by command `commandId`. */
export const searchIteration = (
  iterations: readonly TuningIterationRecord[],
  suggestion: Suggestion,
  commandId: string,
): NewTuningIteration => ({
  ordinal: nextOrdinal(iterations),
  kind: suggestion.kind,
  phase: 'search',
  round: null,
  config: { ...suggestion.config },
  reason: suggestion.reason,
  predicted: suggestion.predicted ?? null,
  commandId,
});

/** The next verification's first round: rounds are numbered on across a session's verifications. */
export const nextRound = (iterations: readonly TuningIterationRecord[]) =>
  Math.max(0, ...iterations.filter((it) => it.phase === 'verify').map((it) => it.round ?? 0)) + 1;

export function roundStats(stats: WindowStats): WindowStats {
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

/** Updates the pending step (the last one) with `patch`. */
export async function updateStep(t: Turn, patch: Partial<SessionStep>): Promise<void> {
  const steps = t.session.steps.map((step, i) => (i === t.session.steps.length - 1 ? { ...step, ...patch } : step));
  await updateSession(t, { steps });
}

/** The kept steps in words, for the session's last message ("" without any). */
export function keptWords(session: TuningSessionRecord): string {
  const kept = keptSteps(session);
  if (kept.length === 0) return '';
  const confidence = session.confidencePercent / 100;
  const each = kept.map((k) => `step ${k.n} (iteration ${k.iteration}): ${k.runtime ? describeVerdict({ ...k }, confidence) : 'verified'}`);
  return `${kept.length === 1 ? 'the verified step' : `${kept.length} verified steps`} kept (${each.join('; ')})`;
}

/** A turn for a person's action on a locked session (stop, approve, revert). */
export function personTurn(tx: TuningSessionTx, session: TuningSessionRecord, now: Date): Turn {
  return { tx, session, now, commandIssued: false };
}

// The JSON shapes of tuning sessions in the people's API (documented in docs/service.md).
import type { WindowStats } from '../../measure/objective.ts';
import { describeVerdict } from '../../measure/verify.ts';
import type { SearchSpace } from '../../optimizer/index.ts';
import type { SessionWindow, TuningIterationRecord, TuningSessionRecord } from './store.ts';
import { throughput } from './constraints.ts';
import { bestSoFar, isTrial, judgeSession, type SessionJudgement } from './history.ts';
import { sessionReportInterval } from './params.ts';
import { windowOf } from './window-length.ts';
import { buildSpace, configDiff } from './space.ts';

const iso = (d: Date | null) => d?.toISOString() ?? null;

/** The session's space for its diffs; null when it cannot be rebuilt (then no diffs, not an error). */
function spaceOrNull(session: TuningSessionRecord): SearchSpace | null {
  try {
    return buildSpace(session.space);
  } catch {
    return null;
  }
}

/** Best so far by the optimizer's own rule, or the plain running minimum without a space. */
function bestSoFarOf(
  space: SearchSpace | null,
  iterations: readonly TuningIterationRecord[],
  judgement: SessionJudgement,
): Array<number | null> {
  if (space) return bestSoFar(space, iterations, judgement);
  let low: number | null = null;
  return iterations.map((it) => {
    const objective = isTrial(it) && it.state === 'ok' ? judgement.judged.get(it.ordinal)?.objective : undefined;
    return objective === undefined ? (isTrial(it) ? low : null) : (low = Math.min(low ?? Infinity, objective));
  });
}

const round4 = (x: number) => Number(x.toPrecision(4));

/** The session's verification for people: the figures, the verdict, and the sentence. */
function verificationView(session: TuningSessionRecord) {
  const v = session.verification;
  if (!v) return null;
  const confidence = session.confidencePercent / 100;
  return { ...v, summary: v.rounds > 0 ? describeVerdict(v, confidence) : null };
}
const windowView = (w: SessionWindow | null) => w && { start: w.start.toISOString(), end: w.end.toISOString(), attempts: w.attempts };
const statsView = (s: WindowStats | null) =>
  s && {
    weightedRuntimeMs: s.weightedRuntimeMs,
    avgRuntimeMs: s.avgRuntimeMs,
    coverage: s.coverage,
    calls: s.calls,
    seconds: s.seconds,
    throughput: Number(throughput(s).toPrecision(6)),
    tps: s.tps,
    rollbackRate: s.rollbackRate,
  };

export function tuningSessionView(session: TuningSessionRecord, iterations?: readonly TuningIterationRecord[]) {
  const space = spaceOrNull(session);
  const trials = iterations?.filter(isTrial);
  const counts = iterations &&
    trials && {
      ok: trials.filter((it) => it.state === 'ok').length,
      failed: trials.filter((it) => it.state === 'failed').length,
      cancelled: trials.filter((it) => it.state === 'cancelled').length,
      contaminated: iterations.filter((it) => it.state === 'contaminated').length,
      /** Skipped unmeasured: they change no heavy statement's plan (plan-aware sessions). */
      planNeutral: trials.filter((it) => it.state === 'plan_neutral').length,
      /** Refused before they ran: a heavy statement's plan would regress (plan-aware sessions). */
      refused: trials.filter((it) => it.state === 'refused').length,
      baselineWindows: iterations.filter((it) => it.kind === 'baseline' && it.phase === 'search' && it.state === 'ok').length,
      abRounds: session.verification?.rounds ?? 0,
    };
  const judgement = iterations && judgeSession(session, iterations);
  return {
    id: session.id,
    databaseId: session.databaseId,
    state: session.state,
    mode: session.mode,
    iterations: session.iterations,
    windowSeconds: session.windowSeconds,
    windowMinSeconds: session.windowMinSeconds,
    /** The length chosen from the measured noise (window-length.ts); null before. */
    windowNowSeconds: session.windowNowSeconds,
    warmupSeconds: session.warmupSeconds,
    abRoundsMin: session.abRoundsMin,
    abRoundsMax: session.abRoundsMax,
    minEffectPercent: session.minEffectPercent,
    confidencePercent: session.confidencePercent,
    seed: session.seed,
    requireApproval: session.requireApproval,
    verifyEarly: session.verifyEarly,
    planAware: session.planAware,
    statementRegressions: session.statementRegressions,
    reportIntervalSeconds: sessionReportInterval(windowOf(session)),
    createdBy: session.createdBy,
    createdAt: session.createdAt.toISOString(),
    updatedAt: session.updatedAt.toISOString(),
    endedAt: iso(session.endedAt),
    message: session.message,
    baseline: {
      window: windowView(session.baselineWindow),
      stats: statsView(session.baseline?.stats ?? null),
      reports: session.baseline?.reports ?? null,
      measuredAt: session.baseline?.measuredAt ?? null,
    },
    best: session.best && { ...session.best, diff: space ? configDiff(space, session.best.config) : [] },
    verification: verificationView(session),
    /** Every early verification (steps.ts), in order, each with its figures and what became of it. */
    steps: session.steps.map((step) => ({
      ...step,
      /** The plan changes behind it, as the planner named them before its trial ran (plan-aware sessions). */
      planChanges: iterations?.find((it) => it.ordinal === step.iteration)?.plans?.changes ?? [],
      diff: space ? configDiff(space, step.config) : [],
      summary: step.rounds > 0 ? describeVerdict(step, session.confidencePercent / 100) : null,
    })),
    ...(judgement && {
      drift: judgement.drift && {
        perHour: round4(judgement.drift.perHour),
        total: round4(judgement.drift.total),
        windows: judgement.drift.windows,
      },
      noise: judgement.noise === null ? null : round4(judgement.noise),
    }),
    finalCommandId: session.finalCommandId,
    /** Started from the advice between sessions: what it found, and when the reports it read came. */
    fromAdvice: session.space.advice
      ? { findings: session.space.advice.findings, from: session.space.advice.from, to: session.space.advice.to }
      : null,
    ...(counts && { progress: counts }),
  };
}

export function iterationViews(session: TuningSessionRecord, iterations: readonly TuningIterationRecord[]) {
  const space = spaceOrNull(session);
  const judgement = judgeSession(session, iterations);
  const bests = bestSoFarOf(space, iterations, judgement);
  return iterations.map((it, i) => {
    const judged = judgement.judged.get(it.ordinal);
    const sd = judged?.sd ?? null;
    return {
      ordinal: it.ordinal,
      kind: it.kind,
      phase: it.phase,
      round: it.round,
      state: it.state,
      reason: it.reason,
      config: it.config,
      diff: space ? configDiff(space, it.config) : [],
      predicted: it.predicted,
      commandId: it.commandId,
      createdAt: it.createdAt.toISOString(),
      sentAt: iso(it.sentAt),
      ackedAt: iso(it.ackedAt),
      window: windowView(it.window),
      objective: judged ? round4(judged.objective) : null,
      objectiveInterval:
        judged && sd !== null
          ? { low: round4(judged.objective * Math.exp(-1.96 * sd)), high: round4(judged.objective * Math.exp(1.96 * sd)) }
          : null,
      baselineRatio: judgement.baselineRatios.has(it.ordinal) ? round4(judgement.baselineRatios.get(it.ordinal)!) : null,
      bestSoFar: bests[i] ?? null,
      stats: statsView(it.stats),
      reports: it.reports,
      failure: it.failure,
      finishedAt: iso(it.finishedAt),
      /** What the planner said about it (plan-aware sessions): the verdict, the plan changes behind it, thresholds. */
      plans: it.plans,
    };
  });
}

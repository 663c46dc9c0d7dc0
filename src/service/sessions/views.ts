// The JSON shapes of tuning sessions in the people's API (documented in docs/service.md).
import type { WindowStats } from '../../measure/objective.ts';
import type { SearchSpace } from '../../optimizer/index.ts';
import type { SessionWindow, TuningIterationRecord, TuningSessionRecord } from '../storage/storage.ts';
import { throughput } from './constraints.ts';
import { bestSoFar } from './history.ts';
import { sessionReportInterval } from './params.ts';
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
function bestSoFarOf(space: SearchSpace | null, iterations: readonly TuningIterationRecord[]): Array<number | null> {
  if (space) return bestSoFar(space, iterations);
  let low: number | null = null;
  return iterations.map((it) => (it.state === 'ok' && it.objective !== null ? (low = Math.min(low ?? Infinity, it.objective)) : low));
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

export function sessionView(session: TuningSessionRecord, iterations?: readonly TuningIterationRecord[]) {
  const space = spaceOrNull(session);
  const counts = iterations && {
    ok: iterations.filter((it) => it.state === 'ok').length,
    failed: iterations.filter((it) => it.state === 'failed').length,
    cancelled: iterations.filter((it) => it.state === 'cancelled').length,
  };
  return {
    id: session.id,
    databaseId: session.databaseId,
    state: session.state,
    mode: session.mode,
    iterations: session.iterations,
    windowSeconds: session.windowSeconds,
    warmupSeconds: session.warmupSeconds,
    seed: session.seed,
    requireApproval: session.requireApproval,
    reportIntervalSeconds: sessionReportInterval(session.windowSeconds),
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
    finalCommandId: session.finalCommandId,
    ...(counts && { progress: counts }),
  };
}

export function iterationViews(session: TuningSessionRecord, iterations: readonly TuningIterationRecord[]) {
  const space = spaceOrNull(session);
  const bests = bestSoFarOf(space, iterations);
  return iterations.map((it, i) => ({
    ordinal: it.ordinal,
    kind: it.kind,
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
    objective: it.objective,
    bestSoFar: bests[i] ?? null,
    stats: statsView(it.stats),
    reports: it.reports,
    failure: it.failure,
    finishedAt: iso(it.finishedAt),
  }));
}

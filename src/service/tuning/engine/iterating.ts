// The state iterating: the search. Windows in flight first, then what must come before the next
// trial (a baseline window after a trip or a kept step, a step worth verifying now), then the
// optimizer's suggestion, or the verification when the search has nothing left to give.
import { suggest, type Suggestion } from '../../../optimizer/index.ts';
import type { TuningIterationRecord, TuningSessionRecord } from '../store.ts';
import { historyOf, isTrial, judgeSession, nothingLeft, type SessionJudgement } from '../history.ts';
import { ENVIRONMENT_TRIP, environmentTrips, tripAwaitingBaseline } from '../trips.ts';
import { smallestVerifiableGain } from '../window-length.ts';
import { chainAt, currentEpoch, epochOf, keptSteps, pendingStep, stepNoise, worthVerifyingNow } from '../steps.ts';
import { diagnosisSignals } from '../space.ts';
import { ENGINE_LIMITS, type Turn, pct, verifySettings } from './turn.ts';
import { endTuningSession, spaceOf } from './end.ts';
import { chooseWindow, issueTrial, issueWindow, moveWindowInFlight } from './windows.ts';
import { startStep, startVerification } from './verifying.ts';
import { askPlanner } from './planning.ts';

export async function iterate(t: Turn): Promise<boolean> {
  const iterations = await t.tx.iterations();
  const moved = await moveWindowInFlight(t, iterations);
  if (moved !== null) return moved;

  // A trip the baseline window after it shows the environment caused is no failure (trips.ts).
  const environmental = environmentTrips(t.session, iterations);
  for (const trip of environmental) await t.tx.updateIteration(trip.ordinal, { state: 'contaminated', failure: trip.failure });
  if (environmental.length > 0) return true;

  const trials = iterations.filter(isTrial);
  const unsettled = whyStop(t.session, trials);
  if (unsettled) {
    await endTuningSession(t, 'failed', unsettled, 'known-good');
    return false;
  }
  const trip = tripAwaitingBaseline(iterations);
  if (trip) {
    const reason = `the baseline measured again after iteration ${trip.ordinal} failed (${trip.failure ?? 'no reason given'}): if it is just as slow, the environment caused it`;
    return issueWindow(t, iterations, 'baseline', 'search', null, {}, reason);
  }
  // A trial skipped as plan-neutral or refused before it ran counts against the planned number.
  const finished = trials.filter((it) => ['ok', 'failed', 'plan_neutral', 'refused'].includes(it.state)).length;
  if (finished >= t.session.iterations) return startVerification(t, iterations, null);
  const epoch = currentEpoch(t.session);
  if (epoch > 0 && !iterations.some((it) => it.kind === 'baseline' && it.state === 'ok' && epochOf(t.session, it.ordinal) === epoch)) {
    const reason = `the baseline measured again: step ${keptSteps(t.session).at(-1)!.n} is the known-good configuration now, and the trials after it are judged against it`;
    return issueWindow(t, iterations, 'baseline', 'search', null, {}, reason);
  }
  const judgement = judgeSession(t.session, iterations);
  if (await chooseWindow(t, judgement)) return true;
  const early = stepDue(t.session, iterations, judgement);
  if (early) return startStep(t, iterations, early);
  if (baselineDue(iterations)) {
    const reason = `the baseline measured again after ${ENGINE_LIMITS.baselineEvery} trials: each trial is judged against the baseline windows nearest in time`;
    return issueWindow(t, iterations, 'baseline', 'search', null, {}, reason);
  }
  return nextTrial(t, iterations, judgement, trials.length, finished);
}

/** Why the search cannot go on: trials the agent kept losing, or an environment too unsettled. */
function whyStop(session: TuningSessionRecord, trials: readonly TuningIterationRecord[]): string | null {
  const cancelled = trials.filter((it) => it.state === 'cancelled').length;
  if (cancelled > session.iterations)
    return `${cancelled} trials were cancelled (not received by the agent in time, or not in effect for their whole window: the agent kept returning to known-good): stopped`;
  const tripped = trials.filter((it) => it.failure?.startsWith(ENVIRONMENT_TRIP)).length;
  if (tripped > ENGINE_LIMITS.environmentTrips)
    return `${tripped} trials tripped a guardrail while the baseline was just as slow: the environment is too unsettled to tune in; stopped`;
  return null;
}

/** The optimizer's next trial, or the verification when the search has nothing left to give. */
async function nextTrial(
  t: Turn,
  iterations: readonly TuningIterationRecord[],
  judgement: SessionJudgement,
  tried: number,
  finished: number,
): Promise<boolean> {
  const space = await spaceOf(t);
  if (!space) return false;
  let suggestion: Suggestion;
  try {
    suggestion = suggest({
      space,
      history: historyOf(iterations, judgement, { withNeutral: true }),
      seed: t.session.seed,
      iteration: tried,
      ...(diagnosisSignals(t.session) && { signals: diagnosisSignals(t.session) }),
    });
  } catch (err) {
    return startVerification(t, iterations, `the optimizer has nothing more to try (${(err as Error).message})`);
  }
  // What a verification could prove at the measured noise: a promise under it cannot end in a verified gain.
  const minEffect = t.session.minEffectPercent / 100;
  const provable = smallestVerifiableGain(judgement.noise, verifySettings(t.session));
  const promised = nothingLeft(iterations, suggestion, Math.max(minEffect, provable), ENGINE_LIMITS.exhaustedSteps);
  if (!promised) return t.session.planAware ? askPlanner(t, iterations, space, suggestion) : issueTrial(t, iterations, suggestion);
  const most = Math.max(...promised);
  const under =
    provable > minEffect
      ? `under the ${pct(provable)} that ${t.session.abRoundsMax} A/B rounds can verify at the measured noise of one window, ${pct(judgement.noise ?? 0)}`
      : `under the minimum effect of ${pct(minEffect)}`;
  return startVerification(
    t,
    iterations,
    `the search has nothing left to give: for ${promised.length} steps in a row the model allowed at most ${pct(most)} over the best so far (${under}), so it stopped after ${finished} of ${t.session.iterations} trials`,
  );
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

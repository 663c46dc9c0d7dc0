// The state verifying: A/B rounds of a candidate (a step, or the search's recommendation) against
// the known-good configuration, until the interval decides (src/measure/verify.ts); then kept,
// offered for approval, or not.
import { timeShares, type WindowStats } from '../../../measure/objective.ts';
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
} from '../../../measure/verify.ts';
import type { SessionBest, SessionStep, SessionVerification, TuningIterationRecord } from '../store.ts';
import { throughput } from '../constraints.ts';
import { configKey } from '../../../optimizer/index.ts';
import { judgeSession, searchBest, searchRecommendation } from '../history.ts';
import { ENVIRONMENT_TRIP, verificationTrip } from '../trips.ts';
import { chainAt, chainedInterval, currentEpoch, epochOf, keptSteps, pendingStep } from '../steps.ts';
import { ENGINE_LIMITS, type Turn, fmt, keptWords, nextRound, updateSession, updateStep, verifySettings } from './turn.ts';
import { endTuningSession, issueRevert, spaceOf } from './end.ts';
import { chooseWindow, issueWindow, moveWindowInFlight } from './windows.ts';
import { applyBest } from './applying-best.ts';

/** Verifies a trial as a step, now (steps.ts). */
export async function startStep(t: Turn, iterations: readonly TuningIterationRecord[], trial: TuningIterationRecord): Promise<boolean> {
  const judged = judgeSession(t.session, iterations).judged.get(trial.ordinal)!;
  const relative = judged.objective / chainAt(t.session, epochOf(t.session, trial.ordinal));
  const step: SessionStep = {
    n: t.session.steps.length + 1,
    iteration: trial.ordinal,
    config: { ...trial.config },
    rounds: 0,
    runtime: null,
    throughput: null,
    statements: [],
    outcome: 'verifying',
    note: null,
    keptAfter: null,
    at: t.now.toISOString(),
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
  await updateSession(t, {
    state: 'verifying',
    verification,
    steps: [...t.session.steps, step],
    message: `iteration ${trial.ordinal} measured at ${fmt(relative)} of the known-good configuration's runtime, enough for a short verification to clear the minimum effect: verifying it now as step ${step.n}, against the known-good in ${t.session.abRoundsMin} to ${t.session.abRoundsMax} A/B rounds`,
  });
  return true;
}

/** A step that will not be kept: noted, and the search goes on from the known-good it had. */
async function stepNotKept(
  t: Turn,
  outcome: 'not_verified' | 'refused',
  note: string,
  v: Verdict,
  statements: readonly StatementChange[],
): Promise<boolean> {
  const step = pendingStep(t.session)!;
  await updateStep(t, { outcome, note, rounds: v.rounds, runtime: v.runtime, throughput: v.throughput, statements: [...statements] });
  await updateSession(t, {
    state: 'iterating',
    verification: { ...t.session.verification!, ...figures(v), decision: 'no_significant_improvement', note },
    message: `step ${step.n} (iteration ${step.iteration}) ${outcome === 'refused' ? 'is not recommended' : 'was not verified'}: ${note}; the search goes on`,
  });
  return true;
}

/** After the search: verify its recommendation, or end when no trial even measured below the known-good. */
export async function startVerification(t: Turn, iterations: readonly TuningIterationRecord[], note: string | null): Promise<boolean> {
  const space = await spaceOf(t);
  if (!space) return false;
  const judgement = judgeSession(t.session, iterations);
  // The rounds' windows are all of one length: chosen before them when the noise is known now.
  if (await chooseWindow(t, judgement)) return true;
  const best = searchBest(space, iterations, judgement);
  const prefix = note ? `${note}; ` : '';
  const kept = keptSteps(t.session);
  const knownGood = chainAt(t.session, kept.length);
  const lastKept = kept.at(-1);
  const candidate = best && (searchRecommendation(space, iterations, judgement) ?? best);
  if (!best || !candidate || best.objective >= knownGood || (lastKept && configKey(candidate.config) === configKey(lastKept.config))) {
    if (lastKept) {
      await endTuningSession(
        t,
        'done',
        `${prefix}${keptWords(t.session)}; no trial after step ${lastKept.n} measured below it, so the database stays on it: it is the agent's known-good configuration`,
        'known-good',
      );
      return false;
    }
    const what = best
      ? `no trial measured below the baseline's runtime (the best: objective ${fmt(best.objective)})`
      : 'no configuration was measured';
    await endTuningSession(
      t,
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
  await updateSession(t, {
    state: 'verifying',
    verification,
    message: `${prefix}verifying the search's recommendation (iteration ${candidate.iteration}, objective ${fmt(candidate.objective)} in the search, not verified${simpler}) against ${against} in ${t.session.abRoundsMin} to ${t.session.abRoundsMax} A/B rounds`,
  });
  return true;
}

/** The complete rounds of the verification starting at round `first`: a clean baseline and candidate window each. */
function roundsOf(iterations: readonly TuningIterationRecord[], first: number): RoundFigures[] {
  const rounds: RoundFigures[] = [];
  for (let r = first; ; r++) {
    // The last of each: a round measured again after a candidate's trip the environment caused
    // has a second baseline window, the one next to its candidate't.
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

export async function verify(t: Turn): Promise<boolean> {
  const iterations = await t.tx.iterations();
  const moved = await moveWindowInFlight(t, iterations);
  if (moved !== null) return moved;
  const verification = t.session.verification;
  if (!verification) {
    await endTuningSession(t, 'failed', 'the session is verifying without a candidate', 'known-good');
    return false;
  }
  const isStep = verification.purpose === 'step' && pendingStep(t.session) !== null;
  const first = verification.firstRound ?? 1;
  const settings = verifySettings(t.session);
  const rounds = roundsOf(iterations, first);
  const noise = judgeSession(t.session, iterations).noise;
  const v = verdict(rounds, settings, noise);
  const baseline = t.session.baseline;
  const shares = baseline?.stats.statementMs ? timeShares(baseline.mix, baseline.stats.statementMs) : {};
  const statements = statementChanges(rounds, shares, settings, noise);
  const failed = iterations.find(
    (it) => it.phase === 'verify' && (it.round ?? 0) >= first && it.kind === 'candidate' && it.state === 'failed',
  );
  if (failed) return failedRound(t, iterations, failed, v, statements);
  // A statement measured much slower whose interval cannot say so yet: more rounds, while there are.
  const unsure = v.decision === 'recommend' && v.rounds < settings.maxRounds ? unsureRegressions(statements) : [];
  const decision = unsure.length > 0 ? 'continue' : v.decision;
  if (v.rounds !== verification.rounds || decision !== verification.decision) {
    const note =
      unsure.length > 0
        ? `the runtime interval clears the minimum effect, but ${unsure.map((c) => `statement ${c.key}`).join(', ')} measured ×${STATEMENT_REGRESSION} or slower without its interval saying so: another round`
        : figures(v).note;
    await updateSession(t, { verification: { ...verification, ...figures(v), note, decision, statements } });
    if (isStep) await updateStep(t, { rounds: v.rounds, runtime: v.runtime, throughput: v.throughput, statements });
  }
  if (decision === 'recommend') return recommend(t, v, statements);
  if (v.decision === 'no_significant_improvement') {
    const words = `${describeVerdict(v, settings.confidence)}: ${v.why}`;
    if (isStep) return stepNotKept(t, 'not_verified', words, v, statements);
    const kept = keptWords(t.session);
    await endTuningSession(
      t,
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
  const what = isStep ? `step ${pendingStep(t.session)!.n}` : 'candidate';
  const reason = `A/B round ${round - first + 1}: the ${role === 'baseline' ? 'baseline (known-good)' : `${what} (iteration ${verification.candidate.iteration})`}`;
  return issueWindow(t, iterations, role, 'verify', round, role === 'baseline' ? {} : verification.candidate.config, reason);
}

/** A candidate window of the verification failed: a guardrail trip the environment caused is
 * measured again (trips.ts), anything else ends the verification without a claim. */
async function failedRound(
  t: Turn,
  iterations: readonly TuningIterationRecord[],
  failed: TuningIterationRecord,
  v: Verdict,
  statements: readonly StatementChange[],
): Promise<boolean> {
  const verification = t.session.verification!;
  const isStep = verification.purpose === 'step' && pendingStep(t.session) !== null;
  const first = verification.firstRound ?? 1;
  const roundWords = `A/B round ${failed.round === null ? '?' : failed.round - first + 1}`;
  // A guardrail trip is judged by the baseline window after it, as a trial's is (trips.ts).
  const trip = verificationTrip(t.session, iterations, failed);
  if (trip.outcome === 'awaiting')
    return issueWindow(
      t,
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
    await t.tx.updateIteration(failed.ordinal, { state: 'contaminated', failure: trip.failure });
    return true;
  }
  const note = `the candidate failed in ${roundWords}: ${failed.failure ?? 'no reason given'}${trip.outcome === 'environment' ? ` (the environment, as the baseline window after it showed, but ${environmental} candidate windows of this verification were already the environment's: too unsettled to verify in)` : ''}`;
  if (isStep) return stepNotKept(t, 'not_verified', note, v, statements);
  await updateSession(t, { verification: { ...verification, ...figures(v), decision: 'no_significant_improvement', note } });
  await endTuningSession(
    t,
    'done',
    `${keptWords(t.session) ? `${keptWords(t.session)}; then ` : ''}no significant improvement: ${note}; the database stays on its known-good configuration`,
    'known-good',
  );
  return false;
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
export async function recommend(t: Turn, v: Verdict, statements: readonly StatementChange[]): Promise<boolean> {
  const { session } = t;
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
    if (step) await updateStep(t, { outcome: 'applying' });
    await applyBest(t, best, session.createdById, `${what} is ${summary}; `);
    return false;
  }
  const slower = `it makes ${regressions.length === 1 ? 'a statement' : `${regressions.length} statements`} slower by ${Math.round((STATEMENT_REGRESSION - 1) * 100)} % or more: ${regressions.map((c) => describeStatementChange(c, confidence)).join('; ')}`;
  if (regressions.length > 0 && session.statementRegressions === 'refuse') {
    const note = `the configuration is ${summary}, but ${slower}`;
    if (step) return stepNotKept(t, 'refused', note, v, statements);
    await updateSession(t, { verification: { ...session.verification!, decision: 'no_significant_improvement', note } });
    const kept = keptWords(session);
    await endTuningSession(
      t,
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
  await issueRevert(t, 'known-good', session.createdById);
  if (step) await updateStep(t, { outcome: 'awaiting_approval', note: concerns === '' ? null : concerns });
  const then = step ? '; the search goes on from it once it is kept' : '';
  await updateSession(t, {
    state: 'awaiting_approval',
    best,
    message: `${what} is ${summary}${warning}; approve it to apply and keep it${then}. Meanwhile the database is on its known-good configuration`,
  });
  return false;
}

// A plan-aware session's trials ask the agent's planner first (the `plan` command: nothing on the
// server changes), and only then go live. The trial's row is `planning` while the command is out;
// with the answer it is
//   refused        a heavy statement's plan would regress (≥ 5 % of the time, cost ≥ 3×): no window;
//   plan_neutral   it moves only planner parameters and changes no heavy statement's plan: no window;
//   applying       otherwise, its apply queued, the plan changes behind it kept with the row.
// The first candidate that moves work_mem (or hash_mem_multiplier) asks for the threshold too: the
// smallest value that flips a heavy statement's plan, found by bisection on the planner. When the
// candidate sits below it, it is raised to the threshold with headroom, asked about again, then
// measured. No answer within a bounded wait (or a refusal: include_plans is off) and the trial goes
// live as without the planner, saying so.
import { randomUUID } from 'node:crypto';
import { isFeasible, type NumericDimension, type SearchSpace, type Suggestion } from '../../../optimizer/index.ts';
import { THRESHOLD_PARAMETERS, type PlanAnswer, type ThresholdParameter } from '../../../protocol/plans.ts';
import type { Command } from '../../../protocol/v1.ts';
import { sessionReportInterval } from '../params.ts';
import { heavyThresholds, judgeCandidate, statementName, thresholdValue } from '../plans.ts';
import { keptSteps } from '../steps.ts';
import type { IterationPlans } from '../iteration-plans.ts';
import type { TuningIterationRecord, TuningSessionRecord } from '../store.ts';
import { windowOf } from '../window-length.ts';
import { nextOrdinal, searchIteration, trialDeliverySeconds, type Turn } from './turn.ts';
import { spaceOf } from './end.ts';

type Values = Record<string, number | string>;

/** How long a trial waits for the planner's answer before it goes live without it: the agent
 * answers with its next report, and the probe is bounded by its own budget (30 s). */
export const planWaitSeconds = (session: TuningSessionRecord) => Math.max(60, 3 * sessionReportInterval(windowOf(session)));

/** The known-good values of the parameters `config` sets: the last kept step's, else the server's at the start. */
export function knownGoodValues(session: TuningSessionRecord, config: Values): Values {
  const kept = keptSteps(session).at(-1)?.config ?? {};
  const values: Values = {};
  for (const name of Object.keys(config)) {
    const value = kept[name] ?? session.space.settings.find((s) => s.name === name)?.setting;
    if (value !== undefined) values[name] = value;
  }
  return values;
}

const same = (a: number | string | undefined, b: number | string | undefined) =>
  a !== undefined &&
  b !== undefined &&
  (String(a) === String(b) || (Number.isFinite(Number(a)) && Math.abs(Number(a) - Number(b)) <= 1e-9 * Math.max(1, Math.abs(Number(a)))));

/** The parameters a candidate moves away from the known-good. */
const movedFrom = (reference: Values, config: Values) => Object.keys(config).filter((name) => !same(reference[name], config[name]));

/** Threshold searches not asked yet in this session, for the memory parameters this candidate moves. */
function thresholdsToAsk(space: SearchSpace, iterations: readonly TuningIterationRecord[], reference: Values, config: Values) {
  const asked = new Set(iterations.flatMap((it) => it.plans?.thresholdsAsked ?? []));
  return THRESHOLD_PARAMETERS.flatMap((name) => {
    const dim = numericDimension(space, name);
    const low = Number(reference[name]);
    if (!dim || asked.has(name) || config[name] === undefined || !Number.isFinite(low)) return [];
    return [{ name, low: Math.max(dim.min, low), high: dim.max }];
  });
}

const numericDimension = (space: SearchSpace, name: string): NumericDimension | undefined => {
  const dim = space.dimensions.find((d) => d.name === name);
  return dim?.kind === 'numeric' ? dim : undefined;
};

function planCommand(
  session: TuningSessionRecord,
  config: Values,
  thresholds: Array<{ name: ThresholdParameter; low: number; high: number }>,
): Command {
  return {
    id: randomUUID(),
    kind: 'plan',
    candidates: [{ values: knownGoodValues(session, config) }, { values: { ...config } }],
    ...(thresholds.length > 0 && { thresholds }),
  };
}

/** The optimizer's suggestion, put to the planner before it goes live. */
export async function askPlanner(
  t: Turn,
  iterations: readonly TuningIterationRecord[],
  space: SearchSpace,
  suggestion: Suggestion,
): Promise<boolean> {
  const reference = knownGoodValues(t.session, suggestion.config);
  const thresholds = thresholdsToAsk(space, iterations, reference, suggestion.config);
  const command = planCommand(t.session, suggestion.config, thresholds);
  const plans: IterationPlans = {
    commandIds: [command.id],
    verdict: 'unavailable',
    changes: [],
    note: 'asking the planner',
    ...(thresholds.length > 0 && { thresholdsAsked: thresholds.map((th) => th.name) }),
  };
  await t.tx.addIteration({ ...searchIteration(iterations, suggestion, command.id), planning: true }, command, t.session.createdById);
  await t.tx.updateIteration(nextOrdinal(iterations), { plans });
  t.commandIssued = true;
  return false;
}

/** Waiting for the planner's answer about the trial `it`. */
export async function awaitPlanning(t: Turn, it: TuningIterationRecord): Promise<boolean> {
  const plans: IterationPlans = it.plans ?? { commandIds: [it.commandId], verdict: 'unavailable', changes: [], note: '' };
  const command = await t.tx.command(it.commandId);
  if (!command)
    return goLive(t, it, {
      ...plans,
      verdict: 'unavailable',
      note: 'the plan command is gone from the storage: measured without the planner',
    });
  if (command.status !== 'done') {
    const wait = planWaitSeconds(t.session);
    if (t.now.getTime() - it.createdAt.getTime() <= wait * 1000) return false;
    await t.tx.cancelCommand(it.commandId, `the tuning session stopped waiting for the planner after ${wait} s`);
    return goLive(t, it, { ...plans, verdict: 'unavailable', note: `the planner did not answer within ${wait} s: measured without it` });
  }
  const outcome = command.outcome;
  if (outcome?.status !== 'applied' || !outcome.plans || outcome.plans.candidates.length < 2) {
    const why = outcome?.errors.join('; ') || 'no answer';
    return goLive(t, it, { ...plans, verdict: 'unavailable', note: `the planner was not asked (${why}): measured without it` });
  }
  const answer: PlanAnswer = outcome.plans;
  const thresholds = [...(plans.thresholds ?? []), ...heavyThresholds(answer.thresholds)];
  const withThresholds: IterationPlans = { ...plans, ...(thresholds.length > 0 && { thresholds }) };
  if (answer.thresholds.length > 0) {
    const raised = await raiseToThresholds(t, it, withThresholds);
    if (raised) return true;
  }
  const reference = answer.candidates[0]!;
  const candidate = answer.candidates[1]!;
  const judged = judgeCandidate(movedFrom(knownGoodValues(t.session, it.config), it.config), reference, candidate);
  const { regression: _regression, ...verdict } = judged;
  const kept: IterationPlans = {
    ...withThresholds,
    ...verdict,
    note: [plans.note.startsWith('raised') ? plans.note : '', verdict.note].filter(Boolean).join('; '),
  };
  if (judged.verdict === 'refused') {
    await t.tx.updateIteration(it.ordinal, { state: 'refused', failure: judged.note, plans: kept, finished: true });
    return true;
  }
  if (judged.verdict === 'neutral') {
    await t.tx.updateIteration(it.ordinal, { state: 'plan_neutral', plans: kept, finished: true });
    return true;
  }
  return goLive(t, it, kept);
}

/**
 * A candidate below a heavy statement's threshold is raised to it (with headroom, within bounds
 * and the memory constraints) and put to the planner again. True when it was.
 */
async function raiseToThresholds(t: Turn, it: TuningIterationRecord, plans: IterationPlans): Promise<boolean> {
  const space = await spaceOf(t);
  if (!space) return true;
  const config: Values = { ...it.config };
  const raised: string[] = [];
  for (const name of THRESHOLD_PARAMETERS) {
    const dim = numericDimension(space, name);
    const current = Number(config[name]);
    if (!dim || !Number.isFinite(current)) continue;
    const found = thresholdValue(dim, current, plans.thresholds ?? []);
    if (!found) continue;
    const next = { ...config, [name]: found.value };
    if (!isFeasible(space, next)) continue;
    Object.assign(config, next);
    raised.push(
      `raised ${name} from ${current} to ${found.value}: the smallest value that flips the plan of ${statementName(found.threshold)} is ${found.threshold.value} (${found.threshold.words.join('; ')}), with headroom`,
    );
  }
  if (raised.length === 0) return false;
  const command = planCommand(t.session, config, []);
  await t.tx.issueCommand(command, t.session.createdById);
  await t.tx.updateIteration(it.ordinal, {
    commandId: command.id,
    config,
    plans: { ...plans, commandIds: [...plans.commandIds, command.id], note: raised.join('; ') },
  });
  t.commandIssued = true;
  return true;
}

/** The trial goes live: its apply queued (its delivery deadline counts from now), the plans kept. */
async function goLive(t: Turn, it: TuningIterationRecord, plans: IterationPlans): Promise<boolean> {
  const command: Command = {
    id: randomUUID(),
    kind: 'apply',
    values: { ...it.config },
    allowRestart: t.session.mode === 'restart',
    keep: false,
  };
  await t.tx.issueCommand(command, t.session.createdById, trialDeliverySeconds(t.session));
  await t.tx.updateIteration(it.ordinal, { commandId: command.id, state: 'applying', plans });
  t.commandIssued = true;
  return false;
}

// The tuning session's state machine. Every turn reads what happened (reports, acks, guardrail
// events: all in storage) and moves the session on, inside the transaction that holds its row
// lock; nothing lives in memory, so a session goes on after a restart, on any replica. One
// module per state (engine/), each a handler of the table below; engine/turn.ts is what a turn
// carries, engine/windows.ts the windows every state measures, engine/end.ts how a session ends.
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
import type { TuningSessionRecord, TuningSessionState, TuningSessionTx } from './store.ts';
import { MEASURING_SESSION_STATES } from './store.ts';
import { windowOf } from './window-length.ts';
import { awaitKeep } from './engine/applying-best.ts';
import { measureBaseline } from './engine/baseline.ts';
import { iterate } from './engine/iterating.ts';
import { ENGINE_LIMITS, updateSession, type Turn } from './engine/turn.ts';
import { verify } from './engine/verifying.ts';

export interface AdvanceResult {
  session: TuningSessionRecord;
  commandIssued: boolean;
}

/** Each running state's handler: true when it moved the session on (another turn may follow). */
const HANDLERS: Partial<Record<TuningSessionState, (t: Turn) => Promise<boolean>>> = {
  baseline: measureBaseline,
  iterating: iterate,
  verifying: verify,
  applying_best: awaitKeep,
};

/** Moves the session as far as what has happened allows. */
export async function advanceSession(tx: TuningSessionTx, session: TuningSessionRecord, now: Date): Promise<AdvanceResult> {
  const turn: Turn = { tx, session, now, commandIssued: false };
  for (let i = 0; i < ENGINE_LIMITS.stepsPerCall; i++) {
    if (!(await turnOnce(turn))) break;
  }
  return { session: turn.session, commandIssued: turn.commandIssued };
}

async function turnOnce(t: Turn): Promise<boolean> {
  const handler = HANDLERS[t.session.state];
  if (!handler) return false;
  if (MEASURING.has(t.session.state) && (await agentAway(t))) return false;
  return handler(t);
}

const MEASURING = new Set(MEASURING_SESSION_STATES);
const PAUSED = 'paused: ';

/**
 * Whether the agent is gone (it stopped, or its lease lapsed) and has not reported for longer than
 * a window: the session pauses rather than condemn windows nobody measured (three of them failed a
 * session whose agent was stopped), says so, and goes on once an agent holds the lease again.
 */
async function agentAway(t: Turn): Promise<boolean> {
  const { live, lastReportAt } = await t.tx.agentPresence();
  const since = lastReportAt ?? t.session.createdAt;
  const away = !live && t.now.getTime() - since.getTime() > windowOf(t.session) * 1000;
  const paused = t.session.message?.startsWith(PAUSED) ?? false;
  if (away && !paused) {
    await updateSession(t, {
      message: `${PAUSED}the agent is gone (no live lease, no report since ${since.toISOString()}): the session goes on when it reports again`,
    });
  } else if (!away && paused) {
    await updateSession(t, { message: 'the agent reports again: the session goes on' });
  }
  return away;
}

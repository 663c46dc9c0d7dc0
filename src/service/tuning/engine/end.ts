// How a session ends, from the engine or from a person: what is in flight cancelled, the pending
// step closed, the database returned to known-good (or the baseline) first.
import { randomUUID } from 'node:crypto';
import type { SearchSpace } from '../../../optimizer/index.ts';
import { pendingStep } from '../steps.ts';
import { buildSpace } from '../space.ts';
import { type Turn, updateSession, updateStep } from './turn.ts';

export async function issueRevert(t: Turn, to: 'known-good' | 'baseline', userId: string | null): Promise<void> {
  await t.tx.issueCommand({ id: randomUUID(), kind: 'revert', to }, userId);
  t.commandIssued = true;
}

/** Cancels what is in flight: the current iteration and a command the agent has not received. */
async function abandonInFlight(t: Turn, reason: string): Promise<void> {
  for (const it of await t.tx.iterations()) {
    if (it.state !== 'planning' && it.state !== 'applying' && it.state !== 'measuring') continue;
    const command = await t.tx.command(it.commandId);
    if (command?.status === 'pending') await t.tx.cancelCommand(it.commandId, reason);
    await t.tx.updateIteration(it.ordinal, { state: 'cancelled', failure: reason, finished: true });
  }
  if (t.session.state === 'applying_best' && t.session.finalCommandId) {
    const command = await t.tx.command(t.session.finalCommandId);
    if (command?.status === 'pending') await t.tx.cancelCommand(command.id, reason);
  }
}

/** Ends the session in `state`, returning the database to `revertTo` first when given. */
export async function endTuningSession(
  t: Turn,
  state: 'done' | 'stopped' | 'reverted' | 'failed',
  message: string,
  revertTo: 'known-good' | 'baseline' | null,
  userId: string | null = t.session.createdById,
): Promise<void> {
  await abandonInFlight(t, `the tuning session ended (${state})`);
  const step = pendingStep(t.session);
  if (step)
    await updateStep(
      t,
      step.outcome === 'verifying'
        ? { outcome: 'not_verified', note: `the session ended (${state}) before its verification did` }
        : { outcome: 'not_kept', note: `the session ended (${state}) before it was kept` },
    );
  if (revertTo) await issueRevert(t, revertTo, userId);
  await updateSession(t, { state, message, ended: true });
}

/** The session's search space; a space that cannot be rebuilt (a catalog changed under a stored
 * session, say) ends the session rather than failing every step. */
export async function spaceOf(t: Turn): Promise<SearchSpace | null> {
  try {
    return buildSpace(t.session.space);
  } catch (err) {
    await endTuningSession(
      t,
      'failed',
      `the search space cannot be rebuilt from what the agent reported at the start: ${(err as Error).message}`,
      'known-good',
    );
    return null;
  }
}

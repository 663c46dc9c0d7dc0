// The state applying_best: the verified configuration applied with keep=true, waited for, and
// then either the session's end or, for a step, back to iterating from it.
import { randomUUID } from 'node:crypto';
import { describeVerdict } from '../../../measure/verify.ts';
import type { Command } from '../../../protocol/v1.ts';
import type { SessionBest, SessionStep } from '../store.ts';
import { pendingStep } from '../steps.ts';
import { ENGINE_LIMITS, type Turn, keptWords, updateSession, updateStep } from './turn.ts';
import { endTuningSession } from './end.ts';

/** Applies the best configuration and keeps it (it becomes the agent's known-good). */
export async function applyBest(t: Turn, best: SessionBest, userId: string | null, prefix = ''): Promise<void> {
  if (pendingStep(t.session)?.outcome === 'awaiting_approval') await updateStep(t, { outcome: 'applying' });
  const command: Command = {
    id: randomUUID(),
    kind: 'apply',
    values: { ...best.config },
    allowRestart: t.session.mode === 'restart',
    keep: true,
  };
  await t.tx.issueCommand(command, userId);
  t.commandIssued = true;
  await updateSession(t, {
    state: 'applying_best',
    best,
    finalCommandId: command.id,
    finalSentAt: null,
    message: `${prefix}applying the verified configuration (iteration ${best.iteration}) to keep it`,
  });
}

export async function awaitKeep(t: Turn): Promise<boolean> {
  const { session } = t;
  const command = session.finalCommandId ? await t.tx.command(session.finalCommandId) : null;
  if (!command) {
    await endTuningSession(t, 'failed', 'the command applying the best configuration is gone', null);
    return false;
  }
  if (command.status === 'done') {
    if (command.outcome?.status === 'applied') {
      const step = pendingStep(session);
      if (step?.outcome === 'applying') return stepKept(t, step);
      const v = session.verification;
      const figures = v ? describeVerdict(v, session.confidencePercent / 100) : 'verified';
      const kept = keptWords(session);
      await endTuningSession(
        t,
        'done',
        `${kept ? `${kept}; then ` : ''}the verified configuration (iteration ${session.best?.iteration ?? '?'}; ${figures}${kept ? ' against the last step' : ''}) is applied and kept: it is the agent's known-good configuration now`,
        null,
      );
    } else {
      const errors = command.outcome?.errors.join('; ') || 'no reason given';
      await endTuningSession(
        t,
        'failed',
        `the agent did not apply the best configuration (${command.outcome?.status ?? 'failed'}: ${errors}); the database stays on its known-good configuration`,
        null,
      );
    }
    return false;
  }
  const sentAt = session.finalSentAt ?? (command.sentCount > 0 ? command.sentAt : null);
  if (session.finalSentAt === null && sentAt !== null) await updateSession(t, { finalSentAt: sentAt });
  const timeout = ENGINE_LIMITS.ackTimeoutSeconds[session.mode];
  if (sentAt !== null && t.now.getTime() - sentAt.getTime() > timeout * 1000) {
    await t.tx.cancelCommand(command.id, `the tuning session gave up waiting for its acknowledgement after ${timeout} s`);
    await endTuningSession(t, 'failed', `the agent did not acknowledge the best configuration within ${timeout} s`, null);
  }
  return false;
}

/** A step applied with keep=true: the known-good configuration now, and the search goes on from it. */
async function stepKept(t: Turn, step: SessionStep): Promise<boolean> {
  const iterations = await t.tx.iterations();
  await updateStep(t, { outcome: 'kept', keptAfter: iterations.at(-1)?.ordinal ?? 0 });
  // finalCommandId stays the step's keep: what the session kept, should it end on this step.
  await updateSession(t, {
    state: 'iterating',
    message: `step ${step.n} (iteration ${step.iteration}) is kept: it is the agent's known-good configuration, and the search goes on from it`,
  });
  return true;
}

// What people do with tuning sessions, through the JSON API or the dashboard: start, stop,
// approve, revert. Every action that changes a session holds its row lock, like the engine.
import { randomInt, randomUUID } from 'node:crypto';
import { TARGETS, type TargetRegistry } from '../../agent/targets/registry.ts';
import { conflict, invalid, notFound } from '../errors.ts';
import { databaseOf, type DatabasesDeps } from '../databases/actions.ts';
import { latestReportOf } from '../databases/queries.ts';
import type { User } from '../people/store.ts';
import {
  ACTIVE_SESSION_STATES,
  TuningSessionBusyError,
  type TuningSessionRecord,
  type TuningSessionTx,
  type TuningStore,
} from './store.ts';
import type { RunningSessions } from './running.ts';
import { applyBest, endTuningSession, personStep } from './engine.ts';
import { SESSION_LIMITS, type StartTuningSessionInput } from './params.ts';
import { buildSpace, sessionSpaceInput } from './space.ts';
import { adviceSeed } from '../advice/seed.ts';

/** What the tuning feature needs: its port, the databases feature (whose database a session
 * tunes), and the cache of databases with a running session. */
export type TuningDeps = DatabasesDeps & {
  stores: { tuning: TuningStore };
  runningSessions: RunningSessions;
};

export const noSuchSession = (id: string) => notFound(`no tuning session ${id} for this database in your account`);
export const isActive = (session: TuningSessionRecord) => ACTIVE_SESSION_STATES.includes(session.state);

/** Why sessions on `target` are reload-only whatever the agent allows, or null (its capabilities say). */
export function reloadOnlyReason(target: string, registry: TargetRegistry = TARGETS): string | null {
  const restart = registry.capabilitiesOf(target).restart;
  return restart.mode === 'never' ? `${target} is reload-only (${restart.why})` : null;
}

export async function startTuningSession(
  ctx: TuningDeps,
  user: User,
  databaseId: string,
  { fromAdvice, ...input }: StartTuningSessionInput,
): Promise<TuningSessionRecord> {
  const database = await databaseOf(ctx, user, databaseId);
  const reloadOnly = reloadOnlyReason(database.target);
  if (input.mode === 'restart' && reloadOnly) throw invalid(`body.mode: ${reloadOnly}: use reload-only`);
  const agent = database.agent;
  if (!agent?.live)
    throw conflict('no agent is connected to this database: a session measures through its reports, so start tuner-agent first');
  if (input.mode === 'restart' && !agent.allowRestart) {
    throw invalid(
      'body.mode: restart needs an agent allowed to restart the database: set postgresql.allow_restart: true (AGENT_POSTGRESQL_ALLOW_RESTART=true) and restart the agent, or use reload-only',
    );
  }
  if (agent.system.applyBlockedReason)
    throw conflict(`the agent cannot apply changes to this database: ${agent.system.applyBlockedReason}`);
  const machine = agent.system.machine;
  if (!machine)
    throw conflict(
      "the agent could not tell the machine's memory and vCPUs, which bound every setting: see its preflight (tuner-agent --check)",
    );
  const report = await latestReportOf(ctx, database);
  if (!report?.metrics) throw conflict('no report with metrics from the agent yet: wait for its next report');

  const space = sessionSpaceInput({
    target: database.target,
    mode: input.mode,
    machine,
    settings: report.settings.length > 0 ? report.settings : agent.system.settings,
    maxConnections: report.metrics.activity.maxConnections,
  });
  try {
    if (buildSpace(space).dimensions.length === 0) throw new Error(`no parameter can be tuned on this server in ${input.mode} mode`);
  } catch (err) {
    throw conflict(`cannot build the search space from what the agent reported: ${(err as Error).message}`);
  }
  if (fromAdvice) space.advice = await adviceSeed(ctx, database);
  const result = await ctx.stores.tuning.createTuningSession(user.accountId, {
    id: randomUUID(),
    databaseId,
    ...input,
    seed: input.seed ?? randomInt(0, SESSION_LIMITS.maxSeed),
    space,
    createdById: user.id,
  });
  if (result.kind === 'no_database') throw notFound(`no database ${databaseId} in your account`);
  if (result.kind === 'conflict') {
    throw conflict(
      `session ${result.active.id} is ${result.active.state.replace('_', ' ')} on this database: one session at a time (stop it, or approve or revert its result, first)`,
    );
  }
  ctx.runningSessions.add(databaseId);
  return result.session;
}

/** Runs `fn` on the locked session after checking it belongs to the user's account. */
async function withOwnedSession<R>(
  ctx: TuningDeps,
  user: User,
  databaseId: string,
  sessionId: string,
  fn: (tx: TuningSessionTx, session: TuningSessionRecord) => Promise<R>,
): Promise<R> {
  if (!(await ctx.stores.tuning.getTuningSession(user.accountId, databaseId, sessionId))) throw noSuchSession(sessionId);
  try {
    const result = await ctx.stores.tuning.withTuningSession(databaseId, sessionId, {}, fn);
    if (result === null) throw noSuchSession(sessionId);
    return result;
  } catch (err) {
    if (err instanceof TuningSessionBusyError) throw conflict(err.message);
    throw err;
  }
}

/** Stops an active session; a trial that may be applied is reverted to known-good. */
export function stopTuningSession(ctx: TuningDeps, user: User, databaseId: string, sessionId: string): Promise<TuningSessionRecord> {
  return withOwnedSession(ctx, user, databaseId, sessionId, async (tx, session) => {
    if (!isActive(session)) throw conflict(`the session is ${session.state} already`);
    const step = personStep(tx, session, await tx.now());
    const trialMayBeApplied = (session.state === 'iterating' || session.state === 'verifying') && (await tx.iterations()).length > 0;
    const kept =
      session.state === 'applying_best'
        ? '; an apply of the best configuration the agent has received already is kept (revert to undo it)'
        : '';
    await endTuningSession(
      step,
      'stopped',
      `stopped by ${user.username}${trialMayBeApplied ? ': the database returns to its known-good configuration' : ''}${kept}`,
      trialMayBeApplied ? 'known-good' : null,
      user.id,
    );
    return step.session;
  });
}

/** Applies and keeps the best configuration of a session that waits for approval. */
export function approveTuningSession(ctx: TuningDeps, user: User, databaseId: string, sessionId: string): Promise<TuningSessionRecord> {
  return withOwnedSession(ctx, user, databaseId, sessionId, async (tx, session) => {
    if (session.state !== 'awaiting_approval' || !session.best) {
      throw conflict(`the session is ${session.state.replace('_', ' ')}: only a session awaiting approval can be approved`);
    }
    const step = personStep(tx, session, await tx.now());
    await applyBest(step, session.best, user.id, `approved by ${user.username}; `);
    ctx.runningSessions.add(databaseId);
    return step.session;
  });
}

/** Returns the database to the configuration the agent found (its baseline), and ends the session. */
export async function revertTuningSession(
  ctx: TuningDeps,
  user: User,
  databaseId: string,
  sessionId: string,
): Promise<TuningSessionRecord> {
  const [latest] = await ctx.stores.tuning.listTuningSessions(user.accountId, databaseId, 1);
  return withOwnedSession(ctx, user, databaseId, sessionId, async (tx, session) => {
    if (session.state === 'reverted') throw conflict('the session is reverted already');
    if (!isActive(session) && latest?.id !== sessionId)
      throw conflict("only the database's latest session, or an active one, can be reverted");
    const step = personStep(tx, session, await tx.now());
    await endTuningSession(
      step,
      'reverted',
      `reverted to the baseline (the configuration the agent found) by ${user.username}`,
      'baseline',
      user.id,
    );
    return step.session;
  });
}

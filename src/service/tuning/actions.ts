// What people do with tuning sessions, through the JSON API or the dashboard: start, stop,
// approve, revert. Every action that changes a session holds its row lock, like the engine.
import { randomInt, randomUUID } from 'node:crypto';
import { TARGETS, type TargetRegistry } from '../../agent/targets/registry.ts';
import { conflict, invalid, notFound } from '../errors.ts';
import { databaseOf, type DatabasesDeps } from '../databases/actions.ts';
import { latestReportOf } from '../databases/queries.ts';
import type { Actor } from '../people/store.ts';
import { recordAudit, type AuditDeps } from '../audit/record.ts';
import {
  ACTIVE_SESSION_STATES,
  TuningSessionBusyError,
  type SessionAdviceSeed,
  type SessionSpaceInput,
  type TuningSessionRecord,
  type TuningSessionTx,
  type TuningStore,
} from './store.ts';
import type { RunningSessions } from './running.ts';
import type { DatabaseSummary } from '../databases/store.ts';
import { applyBest } from './engine/applying-best.ts';
import { endTuningSession } from './engine/end.ts';
import { personTurn } from './engine/turn.ts';
import { SESSION_LIMITS, type StartTuningSessionInput } from './params.ts';
import { buildSpace, sessionSpaceInput } from './space.ts';

/** What the tuning feature needs: its port, the databases feature (whose database a session
 * tunes), and the cache of databases with a running session. */
export type TuningDeps = DatabasesDeps & {
  stores: { tuning: TuningStore };
  runningSessions: RunningSessions;
};

export const noSuchSession = (id: string) => notFound(`no tuning session ${id} for this database in your organization`);
export const isActive = (session: TuningSessionRecord) => ACTIVE_SESSION_STATES.includes(session.state);

/** Why sessions on `target` are reload-only whatever the agent allows, or null (its capabilities say). */
export function reloadOnlyReason(target: string, registry: TargetRegistry = TARGETS): string | null {
  const restart = registry.capabilitiesOf(target).restart;
  return restart.mode === 'never' ? `${target} is reload-only (${restart.why})` : null;
}

/** The database's agent, when it can run a session in `mode` (plan-aware when asked): its machine
 * and whether it asks the planner; else a clear refusal of what is missing. */
function readyAgentOf(database: DatabaseSummary, mode: StartTuningSessionInput['mode'], planAware: boolean | undefined) {
  const reloadOnly = reloadOnlyReason(database.target);
  if (mode === 'restart' && reloadOnly) throw invalid(`body.mode: ${reloadOnly}: use reload-only`);
  const agent = database.agent;
  if (!agent?.live)
    throw conflict('no agent is connected to this database: a session measures through its reports, so start tuner-agent first');
  if (mode === 'restart' && !agent.allowRestart) {
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
  const agentPlans = agent.system.includePlans === true;
  if (planAware && !agentPlans)
    throw invalid(
      'body.planAware: the agent does not ask the planner (its postgresql.include_plans is off): set postgresql.include_plans: true (AGENT_POSTGRESQL_INCLUDE_PLANS=true) and restart the agent, or leave planAware out',
    );
  return { agent, machine, agentPlans };
}

export async function startTuningSession(
  ctx: TuningDeps & AuditDeps,
  user: Actor,
  databaseId: string,
  { fromAdvice, planAware, knobs, ...input }: StartTuningSessionInput,
  /** The advice to start from (fromAdvice): the advice feature's, given by the caller, since the
   * advice reads tuning sessions and tuning must not import it back. */
  seedFromAdvice: (database: DatabaseSummary) => Promise<SessionAdviceSeed>,
): Promise<TuningSessionRecord> {
  const database = await databaseOf(ctx, user, databaseId, { role: 'operator', to: 'start tuning sessions' });
  const { agent, machine, agentPlans } = readyAgentOf(database, input.mode, planAware);
  const report = await latestReportOf(ctx, database);
  if (!report?.metrics) throw conflict('no report with metrics from the agent yet: wait for its next report');

  const space = sessionSpaceInput({
    target: database.target,
    mode: input.mode,
    machine,
    settings: report.settings.length > 0 ? report.settings : agent.system.settings,
    maxConnections: report.metrics.activity.maxConnections,
  });
  const tunable = tunableIn(space, input.mode);
  if (knobs) space.knobs = onlyKnobs(tunable, knobs);
  if (fromAdvice) space.advice = await seedFromAdvice(database);
  const result = await ctx.stores.tuning.createTuningSession(user.organizationId, {
    id: randomUUID(),
    databaseId,
    ...input,
    planAware: planAware ?? agentPlans,
    seed: input.seed ?? randomInt(0, SESSION_LIMITS.maxSeed),
    space,
    createdById: user.id,
  });
  if (result.kind === 'no_database') throw notFound(`no database ${databaseId} in your organization`);
  if (result.kind === 'conflict') {
    throw conflict(
      `session ${result.active.id} is ${result.active.state.replace('_', ' ')} on this database: one session at a time (stop it, or approve or revert its result, first)`,
    );
  }
  ctx.runningSessions.add(databaseId);
  const s = result.session;
  await recordAudit(
    ctx,
    user,
    'tuning_session.started',
    {
      sessionId: s.id,
      mode: s.mode,
      iterations: s.iterations,
      requireApproval: s.requireApproval,
      fromAdvice: fromAdvice ?? false,
      planAware: s.planAware,
    },
    databaseId,
  );
  return s;
}

/** The parameters a session could tune on this server: a server the search space cannot be built
 * for, or with nothing to tune, is a clear conflict before any session starts. */
function tunableIn(space: SessionSpaceInput, mode: StartTuningSessionInput['mode']): string[] {
  try {
    const tunable = buildSpace(space).dimensions.map((d) => d.name);
    if (tunable.length === 0) throw new Error(`no parameter can be tuned on this server in ${mode} mode`);
    return tunable;
  } catch (err) {
    throw conflict(`cannot build the search space from what the agent reported: ${(err as Error).message}`);
  }
}

/** The parameters the person asked to tune, each one this session can tune. */
function onlyKnobs(tunable: readonly string[], knobs: readonly string[]): string[] {
  const unknown = knobs.filter((name) => !tunable.includes(name));
  if (unknown.length > 0)
    throw invalid(`body.knobs: ${unknown.join(', ')} cannot be tuned in this session; expected some of: ${tunable.join(', ')}`);
  return [...new Set(knobs)];
}

/** Runs `fn` on the locked session after checking it belongs to the user's organization. */
async function withOwnedSession(
  ctx: TuningDeps & AuditDeps,
  user: Actor,
  databaseId: string,
  sessionId: string,
  action: { to: string; audit: 'tuning_session.stopped' | 'tuning_session.approved' | 'tuning_session.reverted' },
  fn: (tx: TuningSessionTx, session: TuningSessionRecord) => Promise<TuningSessionRecord>,
): Promise<TuningSessionRecord> {
  await databaseOf(ctx, user, databaseId, { role: 'operator', to: action.to });
  if (!(await ctx.stores.tuning.getTuningSession(user.organizationId, databaseId, sessionId))) throw noSuchSession(sessionId);
  let before: TuningSessionRecord['state'] | null = null;
  let after: TuningSessionRecord | null;
  try {
    after = await ctx.stores.tuning.withTuningSession(databaseId, sessionId, {}, (tx, session) => {
      before = session.state;
      return fn(tx, session);
    });
  } catch (err) {
    if (err instanceof TuningSessionBusyError) throw conflict(err.message);
    throw err;
  }
  if (after === null) throw noSuchSession(sessionId);
  await recordAudit(ctx, user, action.audit, { sessionId, state: { before, after: after.state } }, databaseId);
  return after;
}

/** Stops an active session; a trial that may be applied is reverted to known-good. */
export function stopTuningSession(
  ctx: TuningDeps & AuditDeps,
  user: Actor,
  databaseId: string,
  sessionId: string,
): Promise<TuningSessionRecord> {
  return withOwnedSession(
    ctx,
    user,
    databaseId,
    sessionId,
    { to: 'stop tuning sessions', audit: 'tuning_session.stopped' },
    async (tx, session) => {
      if (!isActive(session)) throw conflict(`the session is ${session.state} already`);
      const turn = personTurn(tx, session, await tx.now());
      const trialMayBeApplied = (session.state === 'iterating' || session.state === 'verifying') && (await tx.iterations()).length > 0;
      const kept =
        session.state === 'applying_best'
          ? '; an apply of the best configuration the agent has received already is kept (revert to undo it)'
          : '';
      await endTuningSession(
        turn,
        'stopped',
        `stopped by ${user.username}${trialMayBeApplied ? ': the database returns to its known-good configuration' : ''}${kept}`,
        trialMayBeApplied ? 'known-good' : null,
        user.id,
      );
      return turn.session;
    },
  );
}

/** Applies and keeps the best configuration of a session that waits for approval. */
export function approveTuningSession(
  ctx: TuningDeps & AuditDeps,
  user: Actor,
  databaseId: string,
  sessionId: string,
): Promise<TuningSessionRecord> {
  return withOwnedSession(
    ctx,
    user,
    databaseId,
    sessionId,
    { to: 'approve tuning sessions', audit: 'tuning_session.approved' },
    async (tx, session) => {
      if (session.state !== 'awaiting_approval' || !session.best) {
        throw conflict(`the session is ${session.state.replace('_', ' ')}: only a session awaiting approval can be approved`);
      }
      const turn = personTurn(tx, session, await tx.now());
      await applyBest(turn, session.best, user.id, `approved by ${user.username}; `);
      ctx.runningSessions.add(databaseId);
      return turn.session;
    },
  );
}

/** Returns the database to the configuration the agent found (its baseline), and ends the session. */
export async function revertTuningSession(
  ctx: TuningDeps & AuditDeps,
  user: Actor,
  databaseId: string,
  sessionId: string,
): Promise<TuningSessionRecord> {
  const [latest] = await ctx.stores.tuning.listTuningSessions(user.organizationId, databaseId, 1);
  return withOwnedSession(
    ctx,
    user,
    databaseId,
    sessionId,
    { to: 'revert tuning sessions', audit: 'tuning_session.reverted' },
    async (tx, session) => {
      if (session.state === 'reverted') throw conflict('the session is reverted already');
      if (!isActive(session) && latest?.id !== sessionId)
        throw conflict("only the database's latest session, or an active one, can be reverted");
      const turn = personTurn(tx, session, await tx.now());
      await endTuningSession(
        turn,
        'reverted',
        `reverted to the baseline (the configuration the agent found) by ${user.username}`,
        'baseline',
        user.id,
      );
      return turn.session;
    },
  );
}

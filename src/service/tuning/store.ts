// What tuning sessions ask of their storage: sessions, their windows (iterations), and the
// transaction a session's step runs in.
import type { Command, TargetKind, TuningMode } from '../../protocol/v1.ts';
import type { CallShares } from '../../measure/contamination.ts';
import type { QueryMix, WindowStats } from '../../measure/objective.ts';
import type { Decision, Interval, StatementChange } from '../../measure/verify.ts';
import type { Prediction, WorkloadSignals } from '../../optimizer/index.ts';
import type { CommandRecord, StoredReport } from '../databases/store.ts';
import type { IterationPlans } from './iteration-plans.ts';

/** baseline → iterating → verifying → awaiting_approval | applying_best → done; or stopped, reverted, failed.
 * Every state, once: the metrics show each (and the storage's CHECK constraint lists the same). */
export const TUNING_SESSION_STATES = [
  'baseline',
  'iterating',
  'verifying',
  'awaiting_approval',
  'applying_best',
  'done',
  'stopped',
  'reverted',
  'failed',
] as const;
export type TuningSessionState = (typeof TUNING_SESSION_STATES)[number];
/** The states a session holds its database in: at most one such session per database. */
export const ACTIVE_SESSION_STATES: readonly TuningSessionState[] = [
  'baseline',
  'iterating',
  'verifying',
  'awaiting_approval',
  'applying_best',
];
/** Active states that time can move on (a window that closes, an ack that never comes). */
export const RUNNING_SESSION_STATES: readonly TuningSessionState[] = ['baseline', 'iterating', 'verifying', 'applying_best'];
/** Running states whose windows are being measured: in these, and only these, the agent is asked
 * to report faster (sessionReportInterval), so that every window has reports enough to close. */
export const MEASURING_SESSION_STATES: readonly TuningSessionState[] = ['baseline', 'iterating', 'verifying'];

/** What the search space is built from, as it was when the session started (plain JSON). */
export interface SessionSpaceInput {
  target: TargetKind;
  mode: TuningMode;
  machine: { memoryBytes: number; vcpus: number };
  /** As the agent reported them; `unwritable` says why the target will not write one. */
  settings: Array<{ name: string; setting: string; unit: string | null; context: string; unwritable?: string }>;
  /** A session a person started from the advice between sessions: the signals the advice read and
   * what it found, which the session's diagnoses read instead of its baseline's (advice/seed.ts).
   * Kept here because, like the rest, it is fixed at the start and every step reads it. */
  advice?: SessionAdviceSeed;
  /** The parameters a person chose to tune (the others stay as they are); absent: all the space allows. */
  knobs?: string[];
}

export interface SessionAdviceSeed {
  signals: WorkloadSignals;
  /** The findings the advice showed, strongest first (Diagnosis['finding']). */
  findings: string[];
  /** When the reports it read were received. */
  from: string;
  to: string;
}

export interface SessionWindow {
  start: Date;
  end: Date;
  /** Windows measured so far that had nothing to measure (the window restarts after one). */
  attempts: number;
}

export interface SessionBaseline {
  mix: QueryMix;
  /** Its statements' shares of the calls, which later windows' mixes are compared with
   * (sessions started before contamination checks have none). */
  shares?: CallShares;
  stats: WindowStats;
  reports: number;
  /** The lowest share of memory available during the baseline (the target's metrics), if known. */
  lowestMemoryShare: number | null;
  /** What the baseline's statistics showed, which the optimizer's diagnoses read (sessions
   * started before the diagnoses have none). */
  signals?: WorkloadSignals;
  measuredAt: string;
}

/** The configuration recommended: verified by A/B rounds (since the verification). */
export interface SessionBest {
  iteration: number;
  config: Record<string, number | string>;
  /** Its runtime over the baseline's: the A/B rounds' estimate. */
  objective: number;
  /** A/B rounds that measured it. */
  measurements: number;
  /** Its runtime over the first baseline's with the interval: after kept steps, their product with
   * its own (steps.ts chainedInterval). Absent in sessions from before the steps. */
  runtime?: Interval | null;
}

/** The A/B verification of the search's best against the baseline. */
export interface SessionVerification {
  candidate: { iteration: number; config: Record<string, number | string>; objective: number };
  /** Complete rounds (a baseline and a candidate window each). */
  rounds: number;
  runtime: Interval | null;
  throughput: Interval | null;
  decision: Decision;
  /** Why it decided as it did (or ended early: a candidate window failed), for people. */
  note: string | null;
  /** The statements carrying 5 % or more of the baseline's time, each compared on its own (sessions
   * from before these checks have none). */
  statements?: StatementChange[];
  /** step: a big win verified as soon as it was seen, the search goes on after it (steps.ts);
   * final: the search's recommendation at its end. Absent in sessions from before the steps: final. */
  purpose?: 'step' | 'final';
  /** Its first A/B round's number: a session's verifications number their rounds on from one
   * another's (absent: 1). */
  firstRound?: number;
}

/**
 * A trial whose window was far enough below the baseline that a short verification was likely to
 * clear the minimum effect, verified at once (steps.ts). Kept, it is the known-good configuration
 * the search goes on from: later windows are judged against it, and its gain multiplies theirs.
 */
export interface SessionStep {
  /** 1, 2, …: every early verification of the session, in order. */
  n: number;
  /** The trial it verified. */
  iteration: number;
  config: Record<string, number | string>;
  rounds: number;
  /** Its runtime and throughput over the known-good configuration's at the time (the previous step's). */
  runtime: Interval | null;
  throughput: Interval | null;
  statements: StatementChange[];
  /**
   * verifying; awaiting_approval (back on known-good meanwhile); applying (the keep=true apply
   * sent); kept; not_verified (its interval did not clear the minimum effect, or a window failed);
   * refused (a statement regressed and the session refuses those); not_kept (verified, but the
   * session ended before it was kept).
   */
  outcome: 'verifying' | 'awaiting_approval' | 'applying' | 'kept' | 'not_verified' | 'refused' | 'not_kept';
  /** Why, for people. */
  note: string | null;
  /** Kept: the last window before it became known-good; windows after it are judged against it. */
  keptAfter: number | null;
  at: string;
}

export interface TuningSessionParams {
  mode: TuningMode;
  iterations: number;
  /** The longest window a person allows: the session's windows start at it (window-length.ts). */
  windowSeconds: number;
  /** The shortest: once the noise of one window is measured, windows shrink to the length that
   * noise needs, no shorter. Equal to windowSeconds: fixed windows. */
  windowMinSeconds: number;
  warmupSeconds: number;
  /** A/B rounds of the verification: at least, and at most. */
  abRoundsMin: number;
  abRoundsMax: number;
  /** The smallest runtime gain recommended, in percent. */
  minEffectPercent: number;
  /** The level of the verification's intervals, in percent. */
  confidencePercent: number;
  /** A verified configuration that makes a heavy statement slower (verify.ts statementChanges):
   * recommended with the regression named, after a person's approval; or refused. */
  statementRegressions: 'approve' | 'refuse';
  seed: number;
  requireApproval: boolean;
  /** Verify a big win as soon as it is seen, as a step (steps.ts); false: only the search's best, at its end. */
  verifyEarly: boolean;
  /** Ask the agent's planner about each candidate before it goes live (engine/planning.ts). */
  planAware: boolean;
}

export interface TuningSessionRecord extends TuningSessionParams {
  id: string;
  databaseId: string;
  state: TuningSessionState;
  space: SessionSpaceInput;
  createdById: string | null;
  createdBy: string | null;
  createdAt: Date;
  updatedAt: Date;
  endedAt: Date | null;
  /** What the session waits for, or why it ended, for people. */
  message: string | null;
  baselineWindow: SessionWindow | null;
  baseline: SessionBaseline | null;
  best: SessionBest | null;
  verification: SessionVerification | null;
  /** The session's early verifications, in order (steps.ts). */
  steps: SessionStep[];
  /** The window length chosen from the measured noise (window-length.ts); null before (windowSeconds). */
  windowNowSeconds: number | null;
  /** The keep=true apply of the best configuration, once issued. */
  finalCommandId: string | null;
  finalSentAt: Date | null;
}

/** planning: a plan-aware session asked the agent's planner about it and waits for the answer;
 * plan_neutral: skipped, not measured (it moves only planner parameters and changes no heavy
 * statement's plan); refused: refused before it ran (a heavy statement's plan would regress).
 * contaminated: its window could not be trusted, and was measured again in a later row. Every
 * state, once (the storage's CHECK constraint lists the same). */
export const TUNING_ITERATION_STATES = [
  'planning',
  'applying',
  'measuring',
  'ok',
  'failed',
  'cancelled',
  'contaminated',
  'plan_neutral',
  'refused',
] as const;
export type TuningIterationState = (typeof TUNING_ITERATION_STATES)[number];

/**
 * diagnosis, heuristic, explore: the optimizer's trials; baseline: a window of the known-good
 * configuration; candidate: a window of the configuration being verified; remeasure: a best
 * measured again, in sessions from before the verification.
 */
export type TuningIterationKind = 'diagnosis' | 'heuristic' | 'explore' | 'remeasure' | 'baseline' | 'candidate';

/** One measurement window of a session: a trial, a baseline window, or half of an A/B round. */
export interface TuningIterationRecord {
  sessionId: string;
  /** 1, 2, …: the order of the windows. */
  ordinal: number;
  kind: TuningIterationKind;
  /** search: trials and the baselines between them; verify: the A/B rounds. */
  phase: 'search' | 'verify';
  /** The A/B round (verify), else null. */
  round: number | null;
  config: Record<string, number | string>;
  reason: string;
  predicted: Prediction | null;
  commandId: string;
  state: TuningIterationState;
  createdAt: Date;
  /** When the agent first received the command. */
  sentAt: Date | null;
  ackedAt: Date | null;
  /** The values the agent read back after applying. */
  effective: Record<string, string> | null;
  window: SessionWindow | null;
  objective: number | null;
  stats: WindowStats | null;
  reports: number | null;
  failure: string | null;
  finishedAt: Date | null;
  /** What the planner said about it (plan-aware sessions), or null. */
  plans: IterationPlans | null;
}

export type TuningSessionPatch = Partial<
  Pick<
    TuningSessionRecord,
    | 'state'
    | 'message'
    | 'baselineWindow'
    | 'baseline'
    | 'best'
    | 'verification'
    | 'steps'
    | 'windowNowSeconds'
    | 'finalCommandId'
    | 'finalSentAt'
  > & { ended: boolean }
>;

export type TuningIterationPatch = Partial<
  Pick<
    TuningIterationRecord,
    | 'state'
    | 'sentAt'
    | 'ackedAt'
    | 'effective'
    | 'window'
    | 'objective'
    | 'stats'
    | 'reports'
    | 'failure'
    | 'plans'
    | 'commandId'
    | 'config'
  > & {
    finished: boolean;
  }
>;

export type NewTuningIteration = Pick<
  TuningIterationRecord,
  'ordinal' | 'kind' | 'phase' | 'round' | 'config' | 'reason' | 'predicted' | 'commandId'
> & {
  /** A plan-aware trial's first row: its command is the plan command, the apply comes after. */
  planning?: boolean;
  /** A window of a configuration that is applied already (its command's): measured from the start. */
  measuring?: Pick<TuningIterationRecord, 'sentAt' | 'ackedAt' | 'effective' | 'window'>;
  /** A trial's command: the agent must receive it within this many seconds, else it is cancelled. */
  deliverWithinSeconds?: number;
};

/** A report as a session measures it: the agent's clock (sentAt) beside the service's (receivedAt),
 * and the lease that sent it with its place in that lease's sequence (0, 1, …). */
export type SessionReport = StoredReport;

export interface GuardrailBreach {
  commandId: string;
  message: string;
  at: Date;
}

/** What a session's step may read and write, inside the transaction that holds its row lock. */
export interface TuningSessionTx {
  /** The storage's clock: the one acks and reports are stamped with. */
  now(): Promise<Date>;
  iterations(): Promise<TuningIterationRecord[]>;
  updateSession(patch: TuningSessionPatch): Promise<TuningSessionRecord>;
  /** Inserts the iteration and queues its command for the agent (none for an iteration `measuring` already). */
  addIteration(iteration: NewTuningIteration, command: Command | null, createdById: string | null): Promise<TuningIterationRecord>;
  updateIteration(ordinal: number, patch: TuningIterationPatch): Promise<void>;
  /** Queues a command; `deliverWithinSeconds`: a trial's deadline (see NewTuningIteration). */
  issueCommand(command: Command, createdById: string | null, deliverWithinSeconds?: number): Promise<void>;
  /** Marks the database's oldest command that may go out now as sent and returns it: the answer
   * to the report this step follows hands over what the step queued, in the same transaction. */
  sendNextCommand(): Promise<Command | null>;
  command(commandId: string): Promise<CommandRecord | null>;
  /** Marks a command the agent has not acknowledged as done, with a failed outcome naming `reason`. */
  cancelCommand(commandId: string, reason: string): Promise<boolean>;
  /** Reports received at or after `since`, oldest first (at most `limit`). */
  reportsSince(since: Date, limit: number): Promise<SessionReport[]>;
  /** guardrail_breach events about any of these commands. */
  guardrailBreaches(commandIds: readonly string[]): Promise<GuardrailBreach[]>;
  /** Whether an agent holds a live lease on the database (by the storage's clock), and when the
   * agent of the last lease last reported (null: not since its start). */
  agentPresence(): Promise<{ live: boolean; lastReportAt: Date | null }>;
}

export type CreateSessionResult =
  { kind: 'created'; session: TuningSessionRecord } | { kind: 'conflict'; active: TuningSessionRecord } | { kind: 'no_database' };

export interface NewTuningSession extends TuningSessionParams {
  id: string;
  databaseId: string;
  space: SessionSpaceInput;
  createdById: string;
}

export interface TuningStore {
  /** Creates the session unless the database has an active one (one at a time, enforced by a unique index). */
  createTuningSession(organizationId: string, session: NewTuningSession): Promise<CreateSessionResult>;
  listTuningSessions(organizationId: string, databaseId: string, limit: number): Promise<TuningSessionRecord[]>;
  getTuningSession(
    organizationId: string,
    databaseId: string,
    sessionId: string,
  ): Promise<{ session: TuningSessionRecord; iterations: TuningIterationRecord[] } | null>;
  /** The database's active session, unlocked: a cheap look on the report path. */
  activeTuningSession(databaseId: string): Promise<TuningSessionRecord | null>;
  /** Databases whose session is in a state the clock can move (for the timer). */
  databasesWithRunningSession(): Promise<string[]>;
  /**
   * Runs fn in one transaction holding the session's row lock (SELECT … FOR UPDATE), so that one
   * replica at a time advances it: the session `sessionId`, or the database's active session when
   * null. Null when there is no such session, or when `skipLocked` and another holder has it.
   */
  withTuningSession<R>(
    databaseId: string,
    sessionId: string | null,
    options: { skipLocked?: boolean },
    fn: (tx: TuningSessionTx, session: TuningSessionRecord) => Promise<R>,
  ): Promise<R | null>;
}

/** Another request or replica held a tuning session's lock for longer than the lock timeout. */
export class TuningSessionBusyError extends Error {
  override name = 'TuningSessionBusyError';
}

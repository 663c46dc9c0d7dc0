// The agent's main loop: take a lease, then every interval collect → report → carry out the
// command the service returns → acknowledge it. The database stays on its known-good
// configuration whatever happens to the service: when the service is away, the agent keeps
// collecting on schedule, queues a bounded number of reports (and counts those it had to drop),
// and retries with jittered backoff; while a trial configuration is applied, guardrails watch it
// and revert it by themselves. However the loop ends (a signal, the service rejecting the agent,
// a fatal error), it returns the database to known-good first, or says loudly why it could not.
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  ENVIRONMENT_BREACH,
  ENVIRONMENT_CAUSE,
  MAX_QUEUED_REPORTS,
  PROTOCOL_VERSION,
  type AgentEvent,
  type Command,
  type CommandAckRequest,
  type ReportRequest,
  type SystemInfo,
} from '../../protocol/v1.ts';
import { preflightProblems, runPreflight, tuningBlockedReason } from './preflight.ts';
import {
  applyChange,
  recoverOnStart,
  recoveryReason,
  restore,
  tuningMode,
  type ApplyContext,
  type ApplyOutcome,
} from '../applying/apply.ts';
import { baselineMixFrom, buildMetricsReport, createCollector, diffSnapshots, type BaselineMix, type Snapshot } from '../collect/index.ts';
import { createGuard, knownGoodFigures, type Guard, type KnownGoodFigures } from '../applying/guardrails.ts';
import { errorMessage } from '../base/log.ts';
import type { AgentMetrics } from './metrics.ts';
import {
  LeaseExpiredError,
  RequestRefusedError,
  ServiceRejectedError,
  ServiceUnavailableError,
  backoffMs,
  type ServiceClient,
} from '../sending/service-client.ts';
import { catalogSettings, describeSystem } from '../sending/system.ts';
import type { TargetBreach, TrialWatch } from '../../target/target.ts';
import { AGENT_VERSION } from '../base/version.ts';
import { answerPlanCommand, INCLUDE_PLANS_OFF, type PlanCommand } from '../plans/command.ts';

export const LEASE_FILE_NAME = 'tuner-agent.lease.json';
const MAX_EVENTS = 100;
/** Outcomes remembered by command id, so that a command sent twice is carried out once. */
const REMEMBERED_OUTCOMES = 200;
/** How often guardrails look at the database while a trial configuration is applied. */
const GUARD_INTERVAL_MS = 5_000;
/** The first report goes this soon after the start (or the interval, if shorter): the service can
 * start a tuning session once it has a report with metrics, and the user is waiting for it. */
const FIRST_REPORT_AFTER_MS = 5_000;
/** Before any interval has been measured, the guardrails judge what needs no reference. */
const NO_FIGURES: KnownGoodFigures = { weightedRuntimeMs: null, callsPerSecond: 0, rollbackRate: 0, connectionShare: 0 };

export interface LoopOptions {
  ctx: ApplyContext;
  service: ServiceClient;
  databaseId: string;
  cwd: string;
  /** Aborted to stop (a signal, an uncaught error): the loop finishes what it is doing, returns
   * to known-good if the applied configuration was a trial, releases its lease and returns. */
  signal: AbortSignal;
  /** Guardrail tick; shorter in tests. */
  guardIntervalMs?: number;
  /** Prometheus metrics, when the agent serves them (--metrics-listen). */
  metrics?: AgentMetrics;
}

interface Lease {
  leaseId: string;
  intervalSeconds: number;
}

/** A trial configuration under watch: applied, not accepted. */
interface Trial {
  commandId: string;
  guard: Guard;
  /** The target's own guardrails, when it has some (Target.watchTrial). */
  targetWatch: TrialWatch | null;
}

/** Sleeps, unless the agent is stopping. Returns false when it is. */
async function pause(ms: number, signal: AbortSignal): Promise<boolean> {
  try {
    await sleep(ms, undefined, { signal });
    return true;
  } catch {
    return false;
  }
}

/** A report as collected; the lease, its sequence number and the send time are added when it goes out. */
type CollectedReport = Omit<ReportRequest, 'leaseId' | 'seq' | 'sentAt'>;
/** The outcome of a command as acknowledged; the lease is added when it goes out. */
type Acknowledgement = Omit<CommandAckRequest, 'leaseId'>;

export interface LoopEnd {
  /** The database is on its known-good configuration (false: the log says why not). */
  atKnownGood: boolean;
}

/** Runs until stopped; throws what retrying cannot fix (the service rejecting the agent, say),
 * but only after the database was returned to known-good. */
export function runLoop(options: LoopOptions): Promise<LoopEnd> {
  return new AgentLoop(options).run();
}

/** The loop's state, all of it, and one method per step. */
class AgentLoop {
  readonly #options: LoopOptions;
  readonly #ctx: ApplyContext;
  readonly #leaseFile: string;
  readonly #guardIntervalMs: number;
  readonly #collector: ReturnType<typeof createCollector>;

  #lease: Lease | null = null;
  #seq = 0;
  readonly #queue: CollectedReport[] = [];
  readonly #events: AgentEvent[] = [];
  readonly #outcomes = new Map<string, Acknowledgement>();
  #failures = 0;
  /** While the service is away: when to try sending again. */
  #nextAttemptAt = 0;
  #dropped = 0;
  #previous: Snapshot | null = null;
  #baselineMix: BaselineMix | undefined;
  /** What the preflight found wrong at start, for the service's dashboard (with the lease). */
  #preflight: SystemInfo['preflight'] = [];
  /** Why no change may be applied: a prerequisite FAILed at start. Reports keep flowing. */
  #blocked: string | null = null;
  #knownGood: KnownGoodFigures | null = null;
  #trial: Trial | null = null;
  /** A trial was applied at some point in the current interval: its figures are not known-good. */
  #intervalHadTrial = false;
  /** A command is being carried out (its change may be half-way): the interval is not known-good. */
  #executing = false;
  /** When the last report was collected; the next one is due an interval after it. */
  #collectedAt = 0;
  /** The command being carried out, if any. */
  #carrying: string | null = null;
  /** A command handed over while the agent was busy, carried out when it is free. */
  #deferred: Command | null = null;

  constructor(options: LoopOptions) {
    this.#options = options;
    this.#ctx = options.ctx;
    this.#leaseFile = join(options.cwd, LEASE_FILE_NAME);
    this.#guardIntervalMs = options.guardIntervalMs ?? GUARD_INTERVAL_MS;
    this.#collector = createCollector(this.#ctx.db, { includeQueries: this.#ctx.config.postgresql.includeQueries });
    options.metrics?.observe({ queuedReports: () => this.#queue.length, journal: this.#ctx.journal });
  }

  async run(): Promise<LoopEnd> {
    let failure: Error | null = null;
    try {
      await this.#recoverAtStart();
      await this.#loop();
    } catch (err) {
      failure = err instanceof Error ? err : new Error(String(err));
    }
    const atKnownGood = await this.#shutdown(failure);
    if (failure !== null) throw failure;
    return { atKnownGood };
  }

  /** Collects every interval, whatever the service does; sends when the service can take it. */
  async #loop(): Promise<void> {
    const { signal } = this.#options;
    this.#preflight = await this.#checkPrerequisites();
    this.#lease = await this.#takeLease();
    this.#previous = await this.#collector.collect().catch(() => null);
    // The first report comes within seconds, not a whole interval after the start.
    this.#collectedAt = Date.now() - Math.max(0, (this.#lease?.intervalSeconds ?? 0) * 1000 - FIRST_REPORT_AFTER_MS);
    while (this.#lease && !signal.aborted) {
      const wakeAt = this.#failures === 0 ? this.#nextCollectAt() : Math.min(this.#nextCollectAt(), this.#nextAttemptAt);
      if (!(await this.#watch(wakeAt - Date.now()))) break;
      await this.#returnUnwatchedToKnownGood();
      if (Date.now() >= this.#nextCollectAt()) this.#enqueue(await this.#collect());
      if (this.#failures === 0 || Date.now() >= this.#nextAttemptAt) await this.#deliver();
    }
  }

  /** An interval after the last collection, with the interval the service gave last: a shorter
   * one told in the answer to a report counts from that report, not from the one after it. */
  #nextCollectAt(): number {
    return this.#collectedAt + (this.#lease?.intervalSeconds ?? 0) * 1000;
  }

  /** The same checks as --check, at start: each problem logged, and told to the service with
   * the lease so that the dashboard shows it. A FAIL line blocks tuning (the service is told
   * why, and apply commands are refused) while the agent goes on monitoring what it can. */
  async #checkPrerequisites(): Promise<SystemInfo['preflight']> {
    const { db, target, journal, log } = this.#ctx;
    try {
      const checks = await runPreflight(db, target, journal);
      const problems = preflightProblems(checks);
      for (const p of problems) log.warn(`preflight: ${p.status.toUpperCase()} ${p.name}: ${p.detail}${p.fix ? `; fix: ${p.fix}` : ''}`);
      this.#blocked = tuningBlockedReason(checks);
      return problems;
    } catch (err) {
      this.#blocked = `the preflight could not run: ${errorMessage(err)}`.slice(0, 500);
      return [];
    } finally {
      if (this.#blocked) log.warn(`no change will be applied (reports go on): ${this.#blocked}`);
    }
  }

  /** A change cut off by a crash, or a trial the agent died with, goes back to known-good before
   * anything else; the service hears of it with the first report. */
  async #recoverAtStart(): Promise<void> {
    const ctx = this.#ctx;
    const reason = recoveryReason(ctx);
    if (!reason) return;
    const outcome = await recoverOnStart(ctx).catch((err: unknown) => {
      ctx.log.error(`recovery did not complete: ${errorMessage(err)}; trying again once the database answers`);
      return null;
    });
    if (!outcome) return;
    this.#options.metrics?.reverted('recovery', outcome.status);
    if (outcome.status !== 'applied') ctx.log.error(`recovery did not complete: ${outcome.errors.join('; ')}`);
    const done =
      outcome.status === 'applied'
        ? 'the database was returned to its known-good configuration'
        : `returning to known-good ${outcome.status}: ${outcome.errors.join('; ')}`;
    this.#event(outcome.status === 'applied' ? 'warn' : 'error', 'recovered', `at start, ${reason}: ${done}`);
  }

  #event(level: AgentEvent['level'], code: string, message: string, commandId?: string): void {
    this.#events.push({ at: new Date().toISOString(), level, code, message: message.slice(0, 2000), ...(commandId && { commandId }) });
    if (this.#events.length > MAX_EVENTS) this.#events.splice(0, this.#events.length - MAX_EVENTS);
  }

  #readLeaseFile(): string | undefined {
    if (!existsSync(this.#leaseFile)) return undefined;
    try {
      const data = JSON.parse(readFileSync(this.#leaseFile, 'utf8')) as { databaseId?: unknown; leaseId?: unknown };
      return data.databaseId === this.#options.databaseId && typeof data.leaseId === 'string' ? data.leaseId : undefined;
    } catch {
      return undefined;
    }
  }

  /** Takes the lease, retrying while the service is away; throws only what retrying cannot fix. */
  async #takeLease(): Promise<Lease | null> {
    const { service, signal, databaseId } = this.#options;
    const { log, target, config } = this.#ctx;
    for (let attempt = 0; !signal.aborted; attempt++) {
      try {
        const resumeLeaseId = this.#readLeaseFile();
        const response = await service.start({
          agentVersion: AGENT_VERSION,
          protocolVersion: PROTOCOL_VERSION,
          target: target.kind,
          targetIdentity: target.identity,
          allowRestart: config.postgresql.allowRestart,
          mode: tuningMode(config),
          includeQueries: config.postgresql.includeQueries,
          host: { hostname: hostname(), pid: process.pid },
          system: await this.#system(),
          ...(resumeLeaseId && { resumeLeaseId }),
        });
        writeFileSync(this.#leaseFile, `${JSON.stringify({ databaseId, leaseId: response.leaseId })}\n`, { mode: 0o600 });
        log.info(`connected to the tuning service: lease ${response.leaseId}, reporting every ${response.reportIntervalSeconds} s`);
        return { leaseId: response.leaseId, intervalSeconds: response.reportIntervalSeconds };
      } catch (err) {
        if (!(err instanceof ServiceUnavailableError) && !isDatabaseDown(err)) throw err;
        const wait = backoffMs(attempt);
        log.warn(`${errorMessage(err)}; trying again in ${(wait / 1000).toFixed(1)} s`);
        if (!(await this.#watch(wait))) return null;
      }
    }
    return null;
  }

  /** What the lease carries about the server; a blocked preflight is a reason changes cannot be applied. */
  async #system(): Promise<SystemInfo> {
    const system = await describeSystem(this.#ctx.db, this.#ctx.target);
    const reasons = [system.applyBlockedReason, this.#blocked].filter((r): r is string => r !== null).join('; ');
    const applyBlockedReason = reasons === '' ? null : reasons.length > 500 ? `${reasons.slice(0, 499)}…` : reasons;
    return { ...system, applyBlockedReason, preflight: this.#preflight, includePlans: this.#ctx.config.postgresql.includePlans };
  }

  /** One interval's report; collection failures become events, never a crash. */
  async #collect(): Promise<CollectedReport> {
    const collecting = performance.now();
    this.#collectedAt = Date.now();
    const report = await this.#collectReport();
    this.#options.metrics?.collected((performance.now() - collecting) / 1000);
    return report;
  }

  async #collectReport(): Promise<CollectedReport> {
    const { log, db, target, config } = this.#ctx;
    let metrics: ReportRequest['metrics'] = null;
    let settings: ReportRequest['settings'] = [];
    const targetMetrics = await target.metrics().catch((err: unknown) => {
      log.warn(`target metrics failed: ${errorMessage(err)}`);
      return [];
    });
    try {
      const current = await this.#collector.collect();
      if (this.#previous) {
        const delta = diffSnapshots(this.#previous, current);
        this.#baselineMix ??= baselineMixFrom(delta);
        metrics = buildMetricsReport(delta, { includeQueries: config.postgresql.includeQueries, baselineMix: this.#baselineMix });
        if (!this.#intervalHadTrial && !this.#trial && !this.#executing) this.#knownGood = knownGoodFigures(metrics);
      }
      this.#previous = current;
      settings = await catalogSettings(db, target);
    } catch (err) {
      // The database may be restarting; the session reconnects on the next call.
      this.#event('warn', 'collect_failed', `collection failed: ${errorMessage(err)}`);
      log.warn(`collection failed: ${errorMessage(err)}`);
    }
    this.#intervalHadTrial = this.#trial !== null || this.#executing;
    return { metrics, settings, targetMetrics, events: this.#events.splice(0) };
  }

  /** Queues a report; beyond the bound the oldest are dropped, and the gap reported. */
  #enqueue(report: CollectedReport): void {
    this.#queue.push(report);
    if (this.#queue.length > MAX_QUEUED_REPORTS) {
      this.#dropped += this.#queue.length - MAX_QUEUED_REPORTS;
      this.#options.metrics?.reportsDropped(this.#queue.length - MAX_QUEUED_REPORTS);
      this.#queue.splice(0, this.#queue.length - MAX_QUEUED_REPORTS);
    }
  }

  /** Sends what is queued, and sorts what went wrong into what the loop does about it. */
  async #deliver(): Promise<void> {
    const { log } = this.#ctx;
    try {
      if (this.#dropped > 0) {
        this.#event('warn', 'reports_dropped', `${this.#dropped} report(s) were dropped while the tuning service was unreachable`);
        this.#dropped = 0;
      }
      await this.#flush();
      if (this.#failures > 0) log.info('the tuning service is reachable again');
      this.#failures = 0;
      this.#nextAttemptAt = 0;
    } catch (err) {
      if (err instanceof LeaseExpiredError) {
        // The lease lapsed, or the service refused a report's seq as out of order (two processes
        // on one lease, say): a start takes the lease back with a new sequence, and the queue,
        // kept whole, goes out under it.
        log.warn(`the service asks for a new start (${errorMessage(err)}): starting again`);
        this.#lease = await this.#takeLease();
        this.#seq = 0;
      } else if (err instanceof RequestRefusedError) {
        // The service refused this body (a bug or a version mismatch): drop it, keep going.
        log.error(`${errorMessage(err)}; the report was dropped`);
        this.#queue.shift();
      } else if (err instanceof ServiceUnavailableError) {
        const wait = backoffMs(this.#failures);
        this.#failures++;
        this.#nextAttemptAt = Date.now() + wait;
        log.warn(
          `${errorMessage(err)}; ${this.#queue.length} report(s) queued, collecting goes on; sending again in ${(wait / 1000).toFixed(1)} s`,
        );
      } else {
        throw err;
      }
    }
  }

  /** Sends queued reports oldest first; carries out the command of each answer. */
  async #flush(): Promise<void> {
    const { service } = this.#options;
    // A command handed over while the agent was busy (its answer came to a report sent during a
    // revert or another command) is carried out first: the service sends a trial again only until
    // its delivery deadline, and after that waits for its acknowledgement until the ack timeout
    // (10 minutes), its session stalled meanwhile.
    const deferred = this.#deferred;
    if (deferred && this.#lease) {
      this.#deferred = null;
      await this.#carryOut(deferred, this.#lease);
    }
    while (this.#queue.length > 0 && this.#lease) {
      const lease = this.#lease;
      const response = await service.report({
        ...this.#queue[0]!,
        leaseId: lease.leaseId,
        seq: this.#seq,
        sentAt: new Date().toISOString(),
      });
      this.#queue.shift();
      this.#seq++;
      this.#options.metrics?.reportDelivered();
      lease.intervalSeconds = response.nextReportInSeconds;
      if (response.command) await this.#carryOut(response.command, lease);
    }
  }

  /** Carries out a command once (one sent again gets the outcome remembered) and acknowledges it. */
  async #carryOut(command: Command, lease: Lease): Promise<void> {
    let ack = this.#outcomes.get(command.id);
    if (!ack) {
      this.#carrying = command.id;
      try {
        // A plan command changes nothing and is bounded by its budget: carried out on the agent's
        // session with nothing else on it (no report collected meanwhile inside its transactions).
        ack = command.kind === 'plan' ? await this.#plan(command) : await this.#reportingWhile(this.#execute(command));
      } finally {
        this.#carrying = null;
      }
      this.#outcomes.set(command.id, ack);
      if (this.#outcomes.size > REMEMBERED_OUTCOMES) this.#outcomes.delete(this.#outcomes.keys().next().value!);
    }
    await this.#options.service.ack(command.id, { ...ack, leaseId: lease.leaseId });
  }

  /**
   * Reports on schedule while `work` (a command, a revert of the agent's own) runs: an apply or a
   * revert may wait minutes for its target (Patroni applying on every member, a cloud's long
   * operation, a restart), and the lease, the service's windows and the dashboard all live on
   * reports. The answers' commands are left for after: the one being carried out comes again
   * until it is acknowledged, and another is kept (#deferred) and carried out once this is done.
   */
  async #reportingWhile<T>(work: Promise<T>): Promise<T> {
    const { signal } = this.#options;
    // Without a lease (still taking one) there is nothing to report under.
    if (!this.#lease) return work;
    this.#executing = true;
    const settled = work.then(
      () => true,
      () => true,
    );
    try {
      for (;;) {
        const wait = new AbortController();
        const stop = () => wait.abort();
        signal.addEventListener('abort', stop, { once: true });
        const due = sleep(Math.max(0, this.#nextCollectAt() - Date.now()), false, { signal: wait.signal }).catch(() => false);
        const done = await Promise.race([settled, due]);
        wait.abort();
        signal.removeEventListener('abort', stop);
        if (done || signal.aborted) return await work;
        this.#enqueue(await this.#collect());
        await this.#sendWithoutCommands();
      }
    } finally {
      this.#executing = false;
    }
  }

  /** Sends what is queued, oldest first, leaving the answers' commands for later; a failure
   * leaves the rest queued for the loop, which sorts it out as it always does. */
  async #sendWithoutCommands(): Promise<void> {
    const { service } = this.#options;
    try {
      while (this.#queue.length > 0 && this.#lease) {
        const response = await service.report({
          ...this.#queue[0]!,
          leaseId: this.#lease.leaseId,
          seq: this.#seq,
          sentAt: new Date().toISOString(),
        });
        this.#queue.shift();
        this.#seq++;
        this.#options.metrics?.reportDelivered();
        this.#lease.intervalSeconds = response.nextReportInSeconds;
        // Carried out once the agent is free (#flush); the one being carried out comes again
        // until it is acknowledged.
        if (response.command && response.command.id !== this.#carrying) this.#deferred = response.command;
      }
    } catch (err) {
      this.#ctx.log.warn(`a report sent while a command is carried out failed (${errorMessage(err)}); it stays queued`);
    }
  }

  /** A plan command: the planner asked, nothing changed (never through apply or the journal). */
  async #plan(command: PlanCommand): Promise<Acknowledgement> {
    const { db, target, config, log } = this.#ctx;
    const none = { effective: {}, restarted: false, restored: false };
    if (!config.postgresql.includePlans) {
      log.warn(`command ${command.id} (plan): refused: ${INCLUDE_PLANS_OFF}`);
      return { ...none, status: 'refused', errors: [INCLUDE_PLANS_OFF] };
    }
    try {
      const { machine } = await target.machine();
      const plans = await answerPlanCommand(
        { db, machine, targetKind: target.kind, includeTexts: config.postgresql.includeQueries },
        command,
      );
      log.info(
        `command ${command.id} (plan): ${plans.candidates.length} candidate(s) and ${plans.thresholds.length} threshold search(es) planned`,
      );
      return { ...none, status: 'applied', errors: [], plans };
    } catch (err) {
      log.warn(`command ${command.id} (plan): failed: ${errorMessage(err)}`);
      return { ...none, status: 'failed', errors: [`the planner could not be asked: ${errorMessage(err)}`] };
    }
  }

  async #execute(command: Exclude<Command, PlanCommand>): Promise<Acknowledgement> {
    const ctx = this.#ctx;
    if (command.kind === 'apply' && this.#blocked) {
      // A revert is still carried out: it only returns the database to what it was.
      const error = `tuning is blocked until the preflight passes, nothing was changed: ${this.#blocked}`;
      ctx.log.warn(`command ${command.id} (apply): refused: ${error}`);
      this.#options.metrics?.applied('refused');
      return { status: 'refused', effective: {}, errors: [error], restarted: false, restored: false };
    }
    let ack: Acknowledgement;
    try {
      const outcome =
        command.kind === 'apply'
          ? await applyChange(ctx, command.values, { id: command.id, accept: command.keep, allowRestart: command.allowRestart })
          : await restore(ctx, command.to === 'baseline' ? 'baseline' : 'knownGood', `the service asked for a revert to ${command.to}`);
      ack = toAck(outcome);
    } catch (err) {
      // The database went away mid-command, say. The journal still holds the change in flight,
      // and the loop returns to known-good as soon as the database answers again.
      ack = { status: 'failed', effective: {}, errors: [errorMessage(err)], restarted: false, restored: false };
    }
    if (command.kind === 'apply') this.#options.metrics?.applied(ack.status);
    else this.#options.metrics?.reverted('command', ack.status);
    ctx.log.info(`command ${command.id} (${command.kind}): ${ack.status}${ack.errors.length ? `: ${ack.errors.join('; ')}` : ''}`);
    // A trial is watched by the guardrails until it is replaced, accepted or reverted. A change
    // that did not go through leaves the trial before it in place, and under watch.
    const isTrial = command.kind === 'apply' && !command.keep && ack.status === 'applied';
    if (isTrial) {
      this.#trial = {
        commandId: command.id,
        guard: createGuard(ctx.db, this.#knownGood ?? NO_FIGURES, this.#baselineMix, ctx.config.guardrails),
        targetWatch: await this.#watchTrial(),
      };
      this.#intervalHadTrial = true;
    } else if (ack.status === 'applied' || !ctx.journal.needsRecovery()) {
      this.#trial = null;
    }
    return ack;
  }

  /** Waits `ms`; while a trial is applied, judges it every guard interval and reverts it to
   * known-good on a breach. Returns false when the agent is stopping. */
  async #watch(ms: number): Promise<boolean> {
    const { signal } = this.#options;
    const ctx = this.#ctx;
    const until = Date.now() + ms;
    for (;;) {
      const left = until - Date.now();
      if (left <= 0) return !signal.aborted;
      if (!this.#trial) return pause(left, signal);
      if (!(await pause(Math.min(left, this.#guardIntervalMs), signal))) return false;
      const watched = this.#trial;
      const breaches = await watched.guard.tick(await ctx.target.metrics().catch(() => [])).catch((err: unknown) => {
        ctx.log.warn(`guardrail check failed: ${errorMessage(err)}`);
        return [];
      });
      const targetBreaches = await this.#checkTargetWatch(watched);
      if ((breaches.length > 0 || targetBreaches.length > 0) && this.#trial === watched) {
        this.#trial = null;
        const message = breachMessage(breaches, targetBreaches);
        ctx.log.warn(`${message}: reverting trial ${watched.commandId}`);
        this.#options.metrics?.guardrailBreached();
        // Reverting may wait as long as an apply (Patroni's members, a restart): reports go on.
        const outcome = await this.#reportingWhile(restore(ctx, 'knownGood', message));
        if (outcome) this.#options.metrics?.reverted('guardrail', outcome.status);
        this.#event(
          'warn',
          'guardrail_breach',
          `${message}; returned to known-good: ${outcome?.status ?? 'nothing to revert'}`,
          watched.commandId,
        );
      }
      if (Date.now() >= until) return true;
    }
  }

  /** The target's own guardrails for the trial just applied; none when it has none, or they
   * cannot begin (said in the log: the common guardrails still watch). */
  async #watchTrial(): Promise<TrialWatch | null> {
    const { target, log } = this.#ctx;
    if (!target.watchTrial) return null;
    return target.watchTrial().catch((err: unknown) => {
      log.warn(`the target's guardrails could not begin: ${errorMessage(err)}`);
      return null;
    });
  }

  async #checkTargetWatch(trial: Trial): Promise<TargetBreach[]> {
    if (!trial.targetWatch) return [];
    return trial.targetWatch.check().catch((err: unknown) => {
      this.#ctx.log.warn(`the target's guardrail check failed: ${errorMessage(err)}`);
      return [];
    });
  }

  /** A change cut off mid-way (the database went away), or a configuration that is neither
   * accepted nor watched, goes back to known-good as soon as the database answers. */
  async #returnUnwatchedToKnownGood(): Promise<void> {
    const { journal, log } = this.#ctx;
    if (!journal.data.inFlight && (this.#trial || !journal.needsRecovery())) return;
    const reason = journal.data.inFlight ? 'a change was interrupted' : 'a configuration that was not accepted is no longer watched';
    await this.#reportingWhile(restore(this.#ctx, 'knownGood', reason)).then(
      (outcome) => {
        if (outcome) this.#options.metrics?.reverted('recovery', outcome.status);
        if (!journal.needsRecovery()) this.#trial = null;
        this.#event('warn', 'recovered', `${reason}; returning to known-good: ${outcome?.status ?? 'nothing to undo'}`);
      },
      (err: unknown) => log.warn(`${reason}; returning to known-good failed, trying again later: ${errorMessage(err)}`),
    );
  }

  /** However the loop ended: a trial configuration does not outlive the agent, and the lease is
   * released (unless the service rejected the agent). Returns whether the database is at known-good. */
  async #shutdown(failure: Error | null): Promise<boolean> {
    const { service, cwd } = this.#options;
    const ctx = this.#ctx;
    const { journal, log } = ctx;
    if (failure !== null) log.warn('stopping on the error below: returning to known-good first');
    if (journal.needsRecovery()) {
      const outcome = await restore(ctx, 'knownGood', 'stopping with a configuration that was not accepted').catch((err: unknown) => {
        log.error(`could not return to known-good while stopping: ${errorMessage(err)}`);
        return null;
      });
      if (outcome && outcome.status !== 'applied') log.error(`could not return to known-good while stopping: ${outcome.errors.join('; ')}`);
    }
    const atKnownGood = !journal.needsRecovery();
    if (!atKnownGood) {
      log.error(
        `THE DATABASE MAY STILL RUN A CONFIGURATION THAT WAS NOT ACCEPTED (${journal.notAtKnownGood().join(', ')}): ` +
          `start the agent again, or run tuner-agent --${ctx.target.kind} --revert, to return it to known-good (${journal.path} records what to return to)`,
      );
    }
    if (this.#lease && !(failure instanceof ServiceRejectedError)) {
      await service.stop({ leaseId: this.#lease.leaseId }).then(
        () => rmSync(join(cwd, LEASE_FILE_NAME), { force: true }),
        (err: unknown) => log.warn(`could not release the lease: ${errorMessage(err)}`),
      );
    }
    log.info('stopped');
    return atKnownGood;
  }
}

/** The guardrail event's message: when the environment ended the trial (a failover), it says so
 * first (ENVIRONMENT_BREACH), so that the service marks the window contaminated, not failed. */
function breachMessage(common: readonly string[], target: readonly TargetBreach[]): string {
  const environment = target.filter((b) => b.environment).map((b) => b.reason);
  const others = [...common, ...target.filter((b) => !b.environment).map((b) => b.reason)];
  if (environment.length > 0) return [`${ENVIRONMENT_BREACH} ${environment.join('; ')}`, ...others].join('; ');
  return `guardrail: ${others.join('; ')}`;
}

function toAck(outcome: ApplyOutcome | null): Acknowledgement {
  const none = { effective: {}, errors: [], restarted: false, restored: false };
  if (!outcome) return { ...none, status: 'applied' };
  switch (outcome.status) {
    case 'applied':
      return { ...none, status: 'applied', effective: outcome.effective, restarted: outcome.restarted };
    case 'refused':
      return { ...none, status: 'refused', errors: outcome.errors };
    case 'failed': {
      const errors = outcome.environment ? [`${ENVIRONMENT_CAUSE} ${outcome.errors[0] ?? ''}`, ...outcome.errors.slice(1)] : outcome.errors;
      return { ...none, status: 'failed', effective: outcome.effective, errors, restored: outcome.restored };
    }
  }
}

function isDatabaseDown(err: unknown): boolean {
  const code = (err as { code?: unknown }).code;
  return code === 'ECONNREFUSED' || code === '57P03' || code === '57P01';
}

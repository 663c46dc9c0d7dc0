// The agent's main loop: take a lease, then every interval collect → report → carry out the
// command the service returns → acknowledge it. The database stays on its known-good
// configuration whatever happens to the service: when the service is away, the agent keeps
// collecting, queues a bounded number of reports, and retries with jittered backoff; while a
// trial configuration is applied, guardrails watch it and revert it by themselves.
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { hostname } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { PROTOCOL_VERSION, type AgentEvent, type Command, type CommandAckRequest, type ReportRequest } from '../protocol/v1.ts';
import { applyChange, restore, tuningMode, type ApplyContext, type ApplyOutcome } from './apply.ts';
import { baselineMixFrom, buildMetricsReport, createCollector, diffSnapshots, type BaselineMix, type Snapshot } from './collect/index.ts';
import { createGuard, knownGoodFigures, type Guard, type KnownGoodFigures } from './guardrails.ts';
import { errorMessage } from './log.ts';
import { LeaseExpiredError, RequestRefusedError, ServiceUnavailableError, backoffMs, type ServiceClient } from './service-client.ts';
import { catalogSettings, describeSystem } from './system.ts';
import { AGENT_VERSION } from './version.ts';

export const LEASE_FILE_NAME = 'tuner-agent.lease.json';
/** Reports kept while the service is away; older ones are dropped (and the gap reported). */
const MAX_QUEUED_REPORTS = 120;
const MAX_EVENTS = 100;
/** Outcomes remembered by command id, so that a command sent twice is carried out once. */
const REMEMBERED_OUTCOMES = 200;
/** How often guardrails look at the database while a trial configuration is applied. */
const GUARD_INTERVAL_MS = 5_000;
/** Before any interval has been measured, the guardrails judge what needs no reference. */
const NO_FIGURES: KnownGoodFigures = { weightedRuntimeMs: null, callsPerSecond: 0, rollbackRate: 0, connectionShare: 0 };

export interface LoopOptions {
  ctx: ApplyContext;
  service: ServiceClient;
  databaseId: string;
  cwd: string;
  /** Aborted on SIGTERM/SIGINT: the loop finishes what it is doing, returns to known-good if the
   * applied configuration was a trial, releases its lease and returns. */
  signal: AbortSignal;
  /** Guardrail tick; shorter in tests. */
  guardIntervalMs?: number;
}

interface Lease {
  leaseId: string;
  intervalSeconds: number;
}

/** A trial configuration under watch: applied, not accepted. */
interface Trial {
  commandId: string;
  guard: Guard;
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

export async function runLoop(options: LoopOptions): Promise<void> {
  const { ctx, service, signal } = options;
  const { log, db, target, config } = ctx;
  const leaseFile = join(options.cwd, LEASE_FILE_NAME);
  const guardIntervalMs = options.guardIntervalMs ?? GUARD_INTERVAL_MS;
  const collector = createCollector(db, { includeQueries: config.postgresql.includeQueries });

  // The loop's state, all of it.
  let lease: Lease | null = null;
  let seq = 0;
  const queue: ReportRequest[] = [];
  const events: AgentEvent[] = [];
  const outcomes = new Map<string, CommandAckRequest>();
  let failures = 0;
  let dropped = 0;
  let previous: Snapshot | null = null;
  let baselineMix: BaselineMix | undefined;
  let knownGood: KnownGoodFigures | null = null;
  let trial: Trial | null = null;
  /** A trial was applied at some point in the current interval: its figures are not known-good. */
  let intervalHadTrial = false;

  const event = (level: AgentEvent['level'], code: string, message: string, commandId?: string) => {
    events.push({ at: new Date().toISOString(), level, code, message: message.slice(0, 2000), ...(commandId && { commandId }) });
    if (events.length > MAX_EVENTS) events.splice(0, events.length - MAX_EVENTS);
  };

  const readLeaseFile = (): string | undefined => {
    if (!existsSync(leaseFile)) return undefined;
    try {
      const data = JSON.parse(readFileSync(leaseFile, 'utf8')) as { databaseId?: unknown; leaseId?: unknown };
      return data.databaseId === options.databaseId && typeof data.leaseId === 'string' ? data.leaseId : undefined;
    } catch {
      return undefined;
    }
  };

  /** Takes the lease, retrying while the service is away; throws only what retrying cannot fix. */
  const takeLease = async (): Promise<Lease | null> => {
    for (let attempt = 0; !signal.aborted; attempt++) {
      try {
        const resumeLeaseId = readLeaseFile();
        const response = await service.start({
          agentVersion: AGENT_VERSION,
          protocolVersion: PROTOCOL_VERSION,
          target: target.kind,
          targetIdentity: target.identity,
          allowRestart: config.postgresql.allowRestart,
          mode: tuningMode(config),
          includeQueries: config.postgresql.includeQueries,
          host: { hostname: hostname(), pid: process.pid },
          system: await describeSystem(db, target),
          ...(resumeLeaseId && { resumeLeaseId }),
        });
        writeFileSync(leaseFile, `${JSON.stringify({ databaseId: options.databaseId, leaseId: response.leaseId })}\n`, { mode: 0o600 });
        log.info(`connected to the tuning service: lease ${response.leaseId}, reporting every ${response.reportIntervalSeconds} s`);
        return { leaseId: response.leaseId, intervalSeconds: response.reportIntervalSeconds };
      } catch (err) {
        if (!(err instanceof ServiceUnavailableError) && !isDatabaseDown(err)) throw err;
        const wait = backoffMs(attempt);
        log.warn(`${errorMessage(err)}; trying again in ${(wait / 1000).toFixed(1)} s`);
        if (!(await pause(wait, signal))) return null;
      }
    }
    return null;
  };

  /** One interval's report; collection failures become events, never a crash. */
  const collect = async (): Promise<ReportRequest> => {
    let metrics: ReportRequest['metrics'] = null;
    let settings: ReportRequest['settings'] = [];
    const targetMetrics = await target.metrics().catch((err: unknown) => {
      log.warn(`target metrics failed: ${errorMessage(err)}`);
      return [];
    });
    try {
      const current = await collector.collect();
      if (previous) {
        const delta = diffSnapshots(previous, current);
        baselineMix ??= baselineMixFrom(delta);
        metrics = buildMetricsReport(delta, { includeQueries: config.postgresql.includeQueries, baselineMix });
        if (!intervalHadTrial && !trial) knownGood = knownGoodFigures(metrics);
      }
      previous = current;
      settings = await catalogSettings(db, target);
    } catch (err) {
      // The database may be restarting; the session reconnects on the next call.
      event('warn', 'collect_failed', `collection failed: ${errorMessage(err)}`);
      log.warn(`collection failed: ${errorMessage(err)}`);
    }
    intervalHadTrial = trial !== null;
    return { leaseId: '', seq: 0, sentAt: '', metrics, settings, targetMetrics, events: events.splice(0) };
  };

  const execute = async (command: Command): Promise<CommandAckRequest> => {
    let ack: CommandAckRequest;
    try {
      const outcome = command.kind === 'apply'
        ? await applyChange(ctx, command.values, { id: command.id, accept: command.keep, allowRestart: command.allowRestart })
        : await restore(ctx, command.to === 'baseline' ? 'baseline' : 'knownGood', `the service asked for a revert to ${command.to}`);
      ack = toAck(outcome);
    } catch (err) {
      // The database went away mid-command, say. The journal still holds the change in flight,
      // and the loop returns to known-good as soon as the database answers again.
      ack = { leaseId: '', status: 'failed', effective: {}, errors: [errorMessage(err)], restarted: false, restored: false };
    }
    log.info(`command ${command.id} (${command.kind}): ${ack.status}${ack.errors.length ? `: ${ack.errors.join('; ')}` : ''}`);
    // A trial is watched by the guardrails until it is replaced, accepted or reverted.
    const isTrial = command.kind === 'apply' && !command.keep && ack.status === 'applied';
    trial = isTrial ? { commandId: command.id, guard: createGuard(db, knownGood ?? NO_FIGURES, baselineMix) } : null;
    if (isTrial) intervalHadTrial = true;
    return ack;
  };

  /** Sends queued reports oldest first; carries out the command of each answer. */
  const flush = async (): Promise<void> => {
    while (queue.length > 0 && lease) {
      const response = await service.report({ ...queue[0]!, leaseId: lease.leaseId, seq, sentAt: new Date().toISOString() });
      queue.shift();
      seq++;
      lease.intervalSeconds = response.nextReportInSeconds;
      const command = response.command;
      if (!command) continue;
      let ack = outcomes.get(command.id);
      if (!ack) {
        ack = await execute(command);
        outcomes.set(command.id, ack);
        if (outcomes.size > REMEMBERED_OUTCOMES) outcomes.delete(outcomes.keys().next().value!);
      }
      await service.ack(command.id, { ...ack, leaseId: lease.leaseId });
    }
  };

  /** Waits `ms`; while a trial is applied, judges it every guard interval and reverts it to
   * known-good on a breach. Returns false when the agent is stopping. */
  const watch = async (ms: number): Promise<boolean> => {
    const until = Date.now() + ms;
    for (;;) {
      const left = until - Date.now();
      if (!trial) return left <= 0 || pause(left, signal);
      if (!(await pause(Math.min(left, guardIntervalMs), signal))) return false;
      const watched = trial;
      const breaches = await watched.guard.tick(await target.metrics().catch(() => [])).catch((err: unknown) => {
        log.warn(`guardrail check failed: ${errorMessage(err)}`);
        return [];
      });
      if (breaches.length > 0 && trial === watched) {
        trial = null;
        const message = `guardrail: ${breaches.join('; ')}`;
        log.warn(`${message}: reverting trial ${watched.commandId}`);
        const outcome = await restore(ctx, 'knownGood', message);
        event('warn', 'guardrail_breach', `${message}; returned to known-good: ${outcome?.status ?? 'nothing to revert'}`, watched.commandId);
      }
      if (Date.now() >= until) return true;
    }
  };

  /** A change cut off mid-way (the database went away) goes back to known-good once it answers. */
  const finishInterrupted = async (): Promise<void> => {
    if (!ctx.journal.data.inFlight) return;
    await restore(ctx, 'knownGood', 'a change was interrupted').then(
      (outcome) => event('warn', 'recovered', `an interrupted change was undone: ${outcome?.status ?? 'nothing to undo'}`),
      (err: unknown) => log.warn(`undoing an interrupted change failed, trying again later: ${errorMessage(err)}`),
    );
  };

  lease = await takeLease();
  previous = await collector.collect().catch(() => null);
  while (lease && !signal.aborted) {
    const waitMs = failures === 0 ? lease.intervalSeconds * 1000 : Math.min(backoffMs(failures - 1), lease.intervalSeconds * 1000);
    if (!(await watch(waitMs))) break;
    await finishInterrupted();
    if (failures === 0 || queue.length === 0) {
      queue.push(await collect());
      if (queue.length > MAX_QUEUED_REPORTS) {
        dropped += queue.length - MAX_QUEUED_REPORTS;
        queue.splice(0, queue.length - MAX_QUEUED_REPORTS);
      }
    }
    try {
      if (dropped > 0) {
        event('warn', 'reports_dropped', `${dropped} report(s) were dropped while the tuning service was unreachable`);
        dropped = 0;
      }
      await flush();
      if (failures > 0) log.info('the tuning service is reachable again');
      failures = 0;
    } catch (err) {
      if (err instanceof LeaseExpiredError) {
        log.warn(`the lease lapsed (${errorMessage(err)}): starting again`);
        lease = await takeLease();
        seq = 0;
      } else if (err instanceof RequestRefusedError) {
        // The service refused this body (a bug or a version mismatch): drop it, keep going.
        log.error(`${errorMessage(err)}; the report was dropped`);
        queue.shift();
      } else if (err instanceof ServiceUnavailableError) {
        failures++;
        log.warn(`${errorMessage(err)}; ${queue.length} report(s) queued, collecting goes on`);
      } else {
        throw err;
      }
    }
  }
  await shutdown(options, lease);
}

function toAck(outcome: ApplyOutcome | null): CommandAckRequest {
  const none = { leaseId: '', effective: {}, errors: [], restarted: false, restored: false };
  if (!outcome) return { ...none, status: 'applied' };
  switch (outcome.status) {
    case 'applied':
      return { ...none, status: 'applied', effective: outcome.effective, restarted: outcome.restarted };
    case 'refused':
      return { ...none, status: 'refused', errors: outcome.errors };
    case 'failed':
      return { ...none, status: 'failed', effective: outcome.effective, errors: outcome.errors, restored: outcome.restored };
  }
}

/** On SIGTERM: a trial configuration does not outlive the agent; then the lease is released. */
async function shutdown(options: LoopOptions, lease: Lease | null): Promise<void> {
  const { ctx, service } = options;
  if (ctx.journal.needsRecovery()) {
    await restore(ctx, 'knownGood', 'stopping with a configuration that was not accepted').catch((err: unknown) => {
      ctx.log.error(`could not return to known-good while stopping: ${errorMessage(err)}; the next start will`);
    });
  }
  if (lease) {
    await service.stop({ leaseId: lease.leaseId }).then(
      () => rmSync(join(options.cwd, LEASE_FILE_NAME), { force: true }),
      (err: unknown) => ctx.log.warn(`could not release the lease: ${errorMessage(err)}`),
    );
  }
  ctx.log.info('stopped');
}

function isDatabaseDown(err: unknown): boolean {
  const code = (err as { code?: unknown }).code;
  return code === 'ECONNREFUSED' || code === '57P03' || code === '57P01';
}

// The watch at work: for a database due (store.ts watchDue), the kept configuration's session is
// read, the reports since the keep are judged (verdict.ts) and, once a period, the period's mix
// compared with the verified one (workload.ts); the new state is saved with the events it raises
// (once: the save is conditional) and with their webhook in the outbox (notify/outbox.ts: one row
// per webhook of the database's organization, and for the service-wide one), in the same
// transaction. The watch never reverts anything: the event
// says what a person can do.
import { randomUUID } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import { safeErrorForLog } from '../errors.ts';
import { repeatEvery, type Repeating } from '../repeat.ts';
import { webhookBody, type WebhookEvent } from '../notify/webhook.ts';
import type { OutboxEvent } from '../notify/store.ts';
import { configKey } from '../../optimizer/index.ts';
import { judgeSession, pointOf } from '../tuning/history.ts';
import type { TuningIterationRecord, TuningSessionRecord, TuningStore } from '../tuning/store.ts';
import { serviceInterval } from '../tuning/window.ts';
import type { WatchDue, WatchEvent, WatchRecord, WatchStore } from './store.ts';
import { WATCH, watchVerdict, type WatchReference, type WatchReport, type WatchVerdict } from './verdict.ts';
import { compareWorkload, describeWorkloadChange, statementTexts, WORKLOAD, type WorkloadComparison } from './workload.ts';

export interface WatchOptions {
  /** A database is judged again this long after its last judgement. */
  judgeEverySeconds: number;
  /** The stretch of reports the workload comparison reads, and how often it runs. */
  workloadPeriodSeconds: number;
}

export const WATCH_DEFAULTS: WatchOptions = { judgeEverySeconds: 60, workloadPeriodSeconds: WORKLOAD.periodSeconds };

/** Reports read at most per judgement (a week of one-minute reports is far beyond a run). */
const MAX_REPORTS = 5000;
/** Reports from the kept session's baseline on read for the texts of statements that vanished. */
const VERIFIED_TEXT_REPORTS = 100;

export interface WatchDeps {
  stores: { watch: WatchStore; tuning: TuningStore };
  /** The webhooks' outbox (notify/outbox.ts): told to send after a save; `serviceWide`: whether
   * the service-wide webhook is configured, for which the events are written too. */
  webhook?: { kick(): void; readonly serviceWide: boolean };
  metrics?: { watchEventRaised(code: WatchEvent['code']): void };
}

/** What the verification measured, read off the kept session; null when it has no verified runtime.
 * The kept configuration is the session's best: after verified steps (tuning/steps.ts), its gain
 * over the first baseline is their product with its own, and its level its own A/B windows. */
export function referenceOf(session: TuningSessionRecord, iterations: readonly TuningIterationRecord[]): WatchReference | null {
  const runtime = session.best?.runtime ?? session.verification?.runtime;
  if (!session.baseline || !runtime) return null;
  const kept = session.best ? configKey(session.best.config) : null;
  const level = iterations
    .filter((it) => it.phase === 'verify' && it.kind === 'candidate' && (kept === null || configKey(it.config) === kept))
    .flatMap((it) => pointOf(it) ?? []);
  if (level.length === 0) return null;
  return {
    mix: session.baseline.mix,
    verified: runtime,
    level,
    noise: judgeSession(session, iterations).noise,
    windowSeconds: session.windowSeconds,
    minEffectPercent: session.minEffectPercent,
    confidencePercent: session.confidencePercent,
  };
}

const pct = (x: number) => `${(x * 100).toFixed(1)} %`;

function goneMessage(verdict: WatchVerdict, reference: WatchReference): string {
  const r = verdict.runtime!;
  return (
    `the kept configuration's gain is gone: on the verified query mix it now runs at ${r.estimate.toFixed(3)} of the baseline's runtime ` +
    `(${reference.confidencePercent} % interval ${r.low.toFixed(3)}–${r.high.toFixed(3)}), verified at ${reference.verified.estimate.toFixed(3)}; ` +
    `the interval no longer clears the minimum effect of ${reference.minEffectPercent} % (gain now ${pct(1 - r.estimate)}) and lies above the verified ratio. ` +
    'Start a new session, or revert to the baseline: the service does not revert by itself.'
  );
}

function asWatchReports(reports: Awaited<ReturnType<WatchStore['watchReports']>>): WatchReport[] {
  return reports.flatMap((r) => {
    const interval = serviceInterval(r);
    return r.metrics && interval ? [{ leaseId: r.leaseId, seq: r.seq, metrics: r.metrics, start: interval.start, end: interval.end }] : [];
  });
}

/** Judges one database's kept configuration; the events it raised (none when another replica saved first). */
export async function judgeKept(deps: WatchDeps, due: WatchDue, options: WatchOptions, now = new Date()): Promise<WatchEvent[]> {
  const stored = await deps.stores.watch.watchRecord(due.databaseId);
  // A row for an earlier kept configuration starts over.
  const previous = stored?.sessionId === due.sessionId ? stored : null;
  const found = await deps.stores.tuning.getTuningSession(due.organizationId, due.databaseId, due.sessionId);
  const reference = found && referenceOf(found.session, found.iterations);
  // The run's windows and the workload's period, with a fifth to spare.
  const lookbackMs = Math.max((WATCH.runWindows + 1) * (reference?.windowSeconds ?? 0), options.workloadPeriodSeconds) * 1200;
  const since = new Date(Math.max(due.watchFrom.getTime(), now.getTime() - lookbackMs));
  const reports = reference ? asWatchReports(await deps.stores.watch.watchReports(due.databaseId, since, MAX_REPORTS)) : [];
  const judged: WatchVerdict = reference ? watchVerdict(reference, reports) : { state: 'measuring', windows: 0, runtime: null };
  // Too few windows since a later session ended says nothing new: the last verdict stands (so a
  // gain gone is not raised again after a pause, only after it was seen holding in between).
  const verdict: WatchVerdict =
    judged.state === 'measuring' && previous && previous.state !== 'measuring'
      ? { state: previous.state, windows: judged.windows, runtime: previous.runtime }
      : judged;

  const workloadDue =
    now.getTime() - due.watchFrom.getTime() >= options.workloadPeriodSeconds * 1000 &&
    (previous?.workloadCheckedAt == null || now.getTime() - previous.workloadCheckedAt.getTime() >= options.workloadPeriodSeconds * 1000);
  const shares = found?.session.baseline?.shares;
  let workload: WorkloadComparison | null = previous?.workload ?? null;
  let workloadChangedSince = previous?.workloadChangedSince ?? null;
  if (workloadDue && shares) {
    const periodStart = now.getTime() - options.workloadPeriodSeconds * 1000;
    const period = reports.filter((r) => r.start >= periodStart).map((r) => r.metrics);
    workload = compareWorkload(shares, period);
    // A statement that vanished is not in the period's reports: its text is in those the kept
    // session's baseline was measured on, while the storage still keeps them.
    const baselineStart = found?.session.baselineWindow?.start;
    if (workload?.vanished.some((s) => s.key !== '*' && s.text === null) && baselineStart) {
      const verifiedReports = await deps.stores.watch.watchReports(due.databaseId, baselineStart, VERIFIED_TEXT_REPORTS);
      workload = compareWorkload(shares, period, statementTexts(verifiedReports.flatMap((r) => (r.metrics ? [r.metrics] : []))));
    }
    workloadChangedSince = workload?.changed ? (workloadChangedSince ?? now) : null;
  }

  const events: WatchEvent[] = [];
  if (verdict.state === 'gone' && previous?.state !== 'gone' && reference)
    events.push({ id: randomUUID(), code: 'kept_gain_gone', message: goneMessage(verdict, reference), at: now });
  if (workload?.changed && previous?.workloadChangedSince == null)
    events.push({ id: randomUUID(), code: 'workload_changed', message: describeWorkloadChange(workload), at: now });

  const record: WatchRecord = {
    databaseId: due.databaseId,
    sessionId: due.sessionId,
    state: verdict.state,
    stateSince: previous && previous.state === verdict.state ? previous.stateSince : now,
    runtime: verdict.runtime,
    judgedAt: now,
    workloadCheckedAt: workloadDue && shares ? now : (previous?.workloadCheckedAt ?? null),
    workloadChangedSince,
    workload,
  };
  const webhooks = deps.webhook
    ? events.map((event): OutboxEvent => {
        const webhook: WebhookEvent = {
          id: event.id,
          kind: event.code,
          database: { id: due.databaseId, name: due.databaseName },
          at: event.at,
          details: {
            sessionId: due.sessionId,
            message: event.message,
            ...(event.code === 'kept_gain_gone'
              ? { verified: reference?.verified ?? null, measured: verdict.runtime, minEffectPercent: reference?.minEffectPercent ?? null }
              : { workload }),
          },
        };
        return {
          eventId: event.id,
          databaseId: due.databaseId,
          kind: event.code,
          body: webhookBody(webhook),
          serviceWide: deps.webhook?.serviceWide ?? false,
        };
      })
    : [];
  const saved = await deps.stores.watch.saveWatch(record, stored, events, webhooks);
  if (!saved) return [];
  for (const event of events) deps.metrics?.watchEventRaised(event.code);
  // The outbox sends (and retries) on its own; this only spares the events the wait for its round.
  if (webhooks.length > 0) deps.webhook?.kick();
  return events;
}

/** Judges the databases due, every `everyMs`; a slow round is not stacked upon. */
export function startWatchTicker(deps: WatchDeps, log: FastifyBaseLogger, options: WatchOptions, everyMs: number): Repeating {
  const round = async () => {
    let due: WatchDue[];
    try {
      due = await deps.stores.watch.watchDue(options.judgeEverySeconds, 200);
    } catch (err) {
      log.warn({ err: safeErrorForLog(err) }, 'watch: could not list the kept configurations due; it tries again');
      return;
    }
    for (const d of due) {
      try {
        const events = await judgeKept(deps, d, options);
        for (const e of events) log.warn({ databaseId: d.databaseId, code: e.code }, `watch: ${e.message}`);
      } catch (err) {
        log.warn({ err: safeErrorForLog(err), databaseId: d.databaseId }, 'watch: could not judge the kept configuration; it tries again');
      }
    }
  };
  return repeatEvery(round, everyMs);
}

// A simulated agent for the tuning-session tests: it speaks protocol v1 over HTTP like the real
// one, keeps the settings it was told to apply, and reports query runtimes that depend on them
// (larger work_mem and a lower random_page_cost are faster), so a session has something to find.
// What it does with each apply is up to the test: apply, refuse, fail, ignore, or apply and then
// have a guardrail revert it.
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import {
  AgentStartResponseSchema,
  ReportResponseSchema,
  type AgentEvent,
  type Command,
  type CommandAckRequest,
  type ReportResponse,
  type Setting,
} from '../src/protocol/v1.ts';
import { roundOrder } from '../src/measure/verify.ts';
import { ENVIRONMENT_TRIP } from '../src/service/tuning/trips.ts';
import { ENGINE_LIMITS } from '../src/service/tuning/engine/turn.ts';
import type { IterationPlans } from '../src/service/tuning/iteration-plans.ts';
import { createRng, type Rng } from '../src/optimizer/index.ts';
import { PAGE_BYTES } from '../src/knobs/index.ts';
import { PG15_KNOB_SETTINGS } from './helpers/pg15-settings.ts';
import { AgentClient, type PersonClient } from './helpers/service.ts';
import { sampleMetrics, sampleTargetMetrics, startRequest } from './helpers/service-reports.ts';

/** The catalog's knobs as a PostgreSQL 15 cluster reports them by default. */
export const FULL_SETTINGS: Setting[] = PG15_KNOB_SETTINGS;

export const MACHINE = { memoryBytes: 8 * 1024 ** 3, vcpus: 2 };

/** How much slower than the baseline the simulated workload runs with these settings. */
export function runtimeFactor(settings: ReadonlyMap<string, string>): number {
  const workMem = Number(settings.get('work_mem') ?? 4096);
  const randomPageCost = Number(settings.get('random_page_cost') ?? 4);
  return (1 / (1 + 0.15 * Math.log2(Math.max(1, workMem / 4096)))) * (0.8 + 0.05 * Math.min(randomPageCost, 4));
}

/** What the agent does with an apply. */
export type ApplyPlan =
  | { status: 'applied'; breach?: boolean }
  | { status: 'refused' | 'failed'; errors: string[] }
  /** Never acknowledged (and never applied). */
  | { status: 'ignore' };

export class SimulatedAgent {
  client: AgentClient;
  leaseId = '';
  seq = 0;
  private lastEnd = new Date();
  readonly baseline = new Map(FULL_SETTINGS.map((s) => [s.name, s.setting]));
  settings = new Map(this.baseline);
  knownGood = new Map(this.baseline);
  /** Every command received, first time only, in order. */
  readonly received: Command[] = [];
  private readonly outcomes = new Map<string, CommandAckRequest | null>();
  private readonly events: AgentEvent[] = [];
  private breachPending: string | null = null;
  private trials = 0;
  last: ReportResponse | null = null;
  plan: (command: Extract<Command, { kind: 'apply' }>, trial: number) => ApplyPlan = () => ({ status: 'applied' });
  /** How much slower than the baseline the workload runs with these settings. */
  effect: (settings: ReadonlyMap<string, string>) => number = runtimeFactor;
  /** How much slower one statement (by its index in the report) runs with these settings, besides `effect`: a plan flip. */
  statementEffect: (settings: ReadonlyMap<string, string>, index: number) => number = () => 1;
  /** Each report's runtimes are off by a lognormal factor of this standard deviation (seeded). */
  noise = 0;
  /** While set, the workload runs other statements than the baseline's (a batch job, say). */
  mixShifted = false;
  /** The busiest statement sorts 8 MB per call, spilling to temporary files while work_mem is at
   * its 4 MB default: what the optimizer's diagnosis reads. */
  spills = false;
  /** Reverts fail (the database refuses them, say). */
  failReverts = false;
  /** As the real agent does when the service cannot answer (a storage failover): a report or an
   * acknowledgement that fails (5xx, no answer) is sent again, the same one, after a pause; each
   * such failure counted here. Off: any failure fails the test at once. */
  retryFailures = false;
  failuresRetried = 0;
  private readonly rng: Rng;

  constructor(baseUrl: string, databaseId: string, apiKey: string) {
    this.client = new AgentClient(baseUrl, databaseId, apiKey);
    this.rng = createRng('simulated-agent', databaseId);
  }

  async start(options: { allowRestart?: boolean; target?: 'local' | 'managed-b-flex' } = {}): Promise<void> {
    const request = startRequest({ target: options.target ?? 'local' });
    request.allowRestart = options.allowRestart ?? false;
    request.mode = request.allowRestart ? 'restart' : 'reload-only';
    request.system = { ...request.system, machine: { ...MACHINE, source: 'test' }, settings: FULL_SETTINGS };
    const response = await this.client.start(request);
    assert.equal(response.status, 200, JSON.stringify(response.body));
    this.leaseId = AgentStartResponseSchema.parse(response.body).leaseId;
    this.lastEnd = new Date();
  }

  /** Reports to another replica of the service from now on (the lease is the storage's). */
  useService(baseUrl: string): void {
    this.client = new AgentClient(baseUrl, this.client.databaseId, this.client.apiKey);
  }

  private currentSettings(): Setting[] {
    return FULL_SETTINGS.map((s) => ({ ...s, setting: this.settings.get(s.name) ?? s.setting }));
  }

  private metrics(end: Date) {
    const metrics = sampleMetrics({ topStatements: 10, withText: false, end });
    const seconds = Math.max(0.001, (end.getTime() - this.lastEnd.getTime()) / 1000);
    metrics.interval = { start: this.lastEnd.toISOString(), end: end.toISOString(), seconds, serverRestarted: false };
    const factor = this.effect(this.settings) * Math.exp(this.noise * this.rng.normal());
    // The same offered load whatever the configuration: calls in proportion to time.
    for (const [i, row] of metrics.statements.top.entries()) {
      row.calls = Math.max(1, Math.round((row.calls / 60) * seconds));
      row.meanExecTimeMs = row.meanExecTimeMs * factor * this.statementEffect(this.settings, i);
      row.totalExecTimeMs = row.meanExecTimeMs * row.calls;
    }
    metrics.statements.other = {
      ...metrics.statements.other,
      calls: Math.max(1, Math.round((metrics.statements.other.calls / 60) * seconds)),
    };
    metrics.derived.calls = metrics.statements.top.reduce((n, row) => n + row.calls, 0) + metrics.statements.other.calls;
    if (this.mixShifted)
      metrics.statements.top = metrics.statements.top.map((row, i) => (i % 2 ? { ...row, queryId: `${row.queryId}9` } : row));
    if (this.spills && Number(this.settings.get('work_mem') ?? 4096) <= 4096) {
      const spiller = metrics.statements.top[0]!;
      spiller.tempBlksWritten = spiller.calls * 1024;
      metrics.database.total = { ...metrics.database.total, tempFiles: spiller.calls, tempBytes: spiller.tempBlksWritten * PAGE_BYTES };
    }
    metrics.derived.avgQueryRuntimeMs = 0.4 * factor;
    metrics.derived.weightedQueryRuntimeMs = 0.4 * factor;
    // The same offered load whatever the configuration: transactions in proportion to time.
    const xacts = Math.max(1, Math.round(1000 * seconds));
    metrics.database.total = { ...metrics.database.total, xactCommit: xacts, xactRollback: 0 };
    metrics.database.databases = [{ ...metrics.database.databases[0]!, xactCommit: xacts, xactRollback: 0 }];
    metrics.derived.tps = xacts / seconds;
    // WAL and buffer traffic in proportion to time too: the sample's figures are a minute's.
    const perMinute = (n: number) => Math.round((n / 60) * seconds);
    if (metrics.wal)
      metrics.wal = {
        ...metrics.wal,
        records: perMinute(metrics.wal.records),
        fpi: perMinute(metrics.wal.fpi),
        bytes: perMinute(metrics.wal.bytes),
      };
    return metrics;
  }

  /** One interval's report; carries out (and acknowledges) the command of the answer. */
  async report(): Promise<ReportResponse> {
    if (this.breachPending) {
      this.settings = new Map(this.knownGood);
      this.events.push({
        at: new Date().toISOString(),
        level: 'warn',
        code: 'guardrail_breach',
        message: 'guardrail: query runtime 9.9 ms is 6.0× the known-good 1.6 ms; returned to known-good: applied',
        commandId: this.breachPending,
      });
      this.breachPending = null;
    }
    const end = new Date();
    const body = {
      leaseId: this.leaseId,
      seq: this.seq++,
      sentAt: end.toISOString(),
      metrics: this.metrics(end),
      settings: this.currentSettings(),
      targetMetrics: sampleTargetMetrics(end),
      events: this.events.splice(0),
    };
    const response = await this.untilAnswered(() => this.client.report(body, { gzip: true }));
    assert.equal(response.status, 200, JSON.stringify(response.body));
    this.lastEnd = end;
    const parsed = ReportResponseSchema.parse(response.body);
    this.last = parsed;
    if (parsed.command) await this.carryOut(parsed.command);
    return parsed;
  }

  private async carryOut(command: Command): Promise<void> {
    if (!this.outcomes.has(command.id)) {
      this.received.push(command);
      this.outcomes.set(command.id, this.execute(command));
    }
    const ack = this.outcomes.get(command.id);
    if (!ack) return;
    const response = await this.untilAnswered(() => this.client.ack(command.id, { ...ack, leaseId: this.leaseId }));
    assert.equal(response.status, 204, JSON.stringify(response.body));
  }

  /** The request's answer; with retryFailures, sent again while the service fails it. */
  private async untilAnswered<T extends { status: number }>(send: () => Promise<T>): Promise<T> {
    for (;;) {
      const response = await send().catch((err: unknown) => {
        if (!this.retryFailures) throw err;
        return null;
      });
      if (response && (response.status < 500 || !this.retryFailures)) return response;
      this.failuresRetried++;
      await sleep(250);
    }
  }

  private execute(command: Command): CommandAckRequest | null {
    const done = (effective: Record<string, string>): CommandAckRequest => ({
      leaseId: '',
      status: 'applied',
      effective,
      errors: [],
      restarted: false,
      restored: false,
    });
    if (command.kind === 'revert') {
      if (this.failReverts)
        return {
          leaseId: '',
          status: 'failed',
          effective: {},
          errors: ['work_mem: pg_settings shows 16384, expected 4096'],
          restarted: false,
          restored: false,
        };
      this.settings = new Map(command.to === 'baseline' ? this.baseline : this.knownGood);
      if (command.to === 'baseline') this.knownGood = new Map(this.baseline);
      return done({});
    }
    // The simulated agent runs with postgresql.include_plans off, as agents do by default.
    if (command.kind === 'plan')
      return { leaseId: '', status: 'refused', effective: {}, errors: ['include_plans is off'], restarted: false, restored: false };
    const plan: ApplyPlan = command.keep ? { status: 'applied' } : this.plan(command, ++this.trials);
    if (plan.status === 'ignore') return null;
    if (plan.status !== 'applied')
      return { leaseId: '', status: plan.status, effective: {}, errors: plan.errors, restarted: false, restored: plan.status === 'failed' };
    const effective = Object.fromEntries(Object.entries(command.values).map(([name, value]) => [name, String(value)]));
    for (const [name, value] of Object.entries(effective)) this.settings.set(name, value);
    if (command.keep) this.knownGood = new Map(this.settings);
    if (plan.breach) this.breachPending = command.id;
    return done(effective);
  }

  /** Reports every `everyMs` until `done()` holds. */
  async runUntil(what: string, done: () => Promise<boolean>, options: { everyMs?: number; timeoutMs?: number } = {}): Promise<void> {
    const deadline = Date.now() + (options.timeoutMs ?? 45_000);
    for (;;) {
      if (await done()) return;
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
      await sleep(options.everyMs ?? 200);
      await this.report();
    }
  }
}

/** A new database with a started agent that has sent `reports` reports a few milliseconds apart;
 * `spills`: its workload writes temporary files (SimulatedAgent.spills). */
export async function reportingAgent(
  person: PersonClient,
  baseUrl: string,
  name: string,
  options: { spills?: boolean; reports?: number } = {},
): Promise<{ databaseId: string; agent: SimulatedAgent }> {
  const { databaseId, apiKey } = await person.createDatabase(name, 'local');
  const agent = new SimulatedAgent(baseUrl, databaseId, apiKey);
  agent.spills = options.spills ?? false;
  await agent.start();
  for (let i = 0; i < (options.reports ?? 3); i++) {
    await sleep(50);
    await agent.report();
  }
  return { databaseId, agent };
}

export interface SessionJson {
  id: string;
  state: string;
  message: string | null;
  mode: string;
  iterations: number;
  windowSeconds: number;
  windowMinSeconds: number;
  windowNowSeconds: number | null;
  warmupSeconds: number;
  abRoundsMin: number;
  abRoundsMax: number;
  minEffectPercent: number;
  confidencePercent: number;
  seed: number;
  requireApproval: boolean;
  verifyEarly: boolean;
  statementRegressions: 'approve' | 'refuse';
  reportIntervalSeconds: number;
  best: {
    iteration: number;
    config: Record<string, number | string>;
    objective: number;
    measurements: number;
    diff: Array<{ name: string; baseline: string; value: string }>;
  } | null;
  baseline: { stats: { weightedRuntimeMs: number | null; tps: number } | null; reports: number | null };
  verification: {
    candidate: { iteration: number; config: Record<string, number | string>; objective: number };
    rounds: number;
    runtime: { estimate: number; low: number; high: number } | null;
    throughput: { estimate: number; low: number; high: number } | null;
    decision: 'continue' | 'recommend' | 'no_significant_improvement';
    note: string | null;
    summary: string | null;
    statements?: Array<{
      key: string;
      share: number;
      ratio: { estimate: number; low: number; high: number } | null;
      rounds: number;
      regression: boolean;
    }>;
  } | null;
  /** Every early verification (steps.ts). */
  steps: Array<{
    n: number;
    iteration: number;
    outcome: string;
    rounds: number;
    runtime: { estimate: number; low: number; high: number } | null;
    keptAfter: number | null;
    note: string | null;
    summary: string | null;
  }>;
  drift?: { perHour: number; total: number; windows: number } | null;
  noise?: number | null;
  finalCommandId: string | null;
  fromAdvice?: { findings: string[]; from: string; to: string } | null;
  progress?: {
    ok: number;
    failed: number;
    cancelled: number;
    contaminated: number;
    planNeutral: number;
    refused: number;
    baselineWindows: number;
    abRounds: number;
  };
  planAware: boolean;
}

export interface IterationJson {
  ordinal: number;
  kind: 'diagnosis' | 'heuristic' | 'explore' | 'remeasure' | 'baseline' | 'candidate';
  phase: 'search' | 'verify';
  round: number | null;
  state: string;
  reason: string;
  config: Record<string, number | string>;
  diff: Array<{ name: string; baseline: string; value: string }>;
  commandId: string;
  objective: number | null;
  objectiveInterval: { low: number; high: number } | null;
  baselineRatio: number | null;
  bestSoFar: number | null;
  failure: string | null;
  stats: Record<string, number | null> | null;
  sentAt: string | null;
  window: { start: string; end: string; attempts: number } | null;
  plans: IterationPlans | null;
}

export async function getTuningSession(
  person: PersonClient,
  databaseId: string,
  sessionId: string,
): Promise<{ session: SessionJson; iterations: IterationJson[] }> {
  const response = await person.get<{ session: SessionJson; iterations: IterationJson[] }>(
    `/api/manage/databases/${databaseId}/tuning-sessions/${sessionId}`,
  );
  assert.equal(response.status, 200, JSON.stringify(response.body));
  return response.body;
}

export async function startTuningSession(person: PersonClient, databaseId: string, body: Record<string, unknown>): Promise<SessionJson> {
  const response = await person.post<{ session: SessionJson }>(`/api/manage/databases/${databaseId}/tuning-sessions`, body);
  assert.equal(response.status, 201, JSON.stringify(response.body));
  return response.body.session;
}

/** A trial of the search (not a baseline or A/B window). */
export const isTrialJson = (it: IterationJson) => it.phase === 'search' && it.kind !== 'baseline';

/**
 * The shape of a session's windows: the planned trials (in `states`), a baseline window after
 * every ENGINE_LIMITS.baselineEvery measured trials, then A/B rounds in alternating order
 * (contaminated windows measured again in the next row). Returns the complete A/B rounds.
 */
export function assertSessionShape(
  iterations: readonly IterationJson[],
  planned: number,
  states: readonly string[] = ['ok', 'failed'],
): number {
  const summary = JSON.stringify(iterations.map((it) => [it.ordinal, it.phase, it.kind, it.round, it.state, it.failure]));
  assert.deepEqual(
    iterations.map((it) => it.ordinal),
    iterations.map((_, i) => i + 1),
  );
  const clean = iterations.filter((it) => it.state !== 'contaminated');
  const trials = clean.filter(isTrialJson);
  assert.equal(trials.length, planned, summary);
  assert.ok(
    trials.every((it) => states.includes(it.state) && it.kind !== 'remeasure'),
    summary,
  );
  let since = 0;
  let previous: IterationJson | undefined;
  let afterVerify = false;
  for (const it of iterations) {
    if (it.phase === 'verify') {
      // A/B rounds measure the known-good too: the cadence starts over after them.
      if (it.kind === 'baseline' && it.state === 'ok') since = 0;
      afterVerify = true;
      continue;
    }
    // A trial a guardrail or a constraint failed is followed by a baseline window at once
    // (src/service/tuning/trips.ts), and is contaminated when that window is just as slow.
    const tripped = previous?.state === 'failed' || previous?.failure?.startsWith(ENVIRONMENT_TRIP) === true;
    const afterTrip = tripped && (/\bguardrail\b/.test(previous?.failure ?? '') || previous?.stats !== null);
    if (it.state === 'contaminated' && !it.failure?.startsWith(ENVIRONMENT_TRIP)) continue;
    // After a kept step (steps.ts) the new known-good is measured first.
    if (it.kind === 'baseline' && !afterTrip && !afterVerify) {
      assert.equal(
        since,
        ENGINE_LIMITS.baselineEvery,
        `a baseline window after every ${ENGINE_LIMITS.baselineEvery} measured trials: ${summary}`,
      );
      since = 0;
    } else if (it.kind === 'baseline') since = 0;
    else if (it.state === 'ok') since++;
    previous = it;
    afterVerify = false;
  }
  // The verifications (steps', then the search's last): each a run of A/B windows, its rounds
  // numbered on from the one before, each round's order alternating from its first.
  const blocks: IterationJson[][] = [];
  let inBlock = false;
  for (const it of iterations) {
    if (it.phase !== 'verify') {
      inBlock = false;
      continue;
    }
    if (!inBlock) blocks.push([]);
    inBlock = true;
    if (it.state !== 'contaminated') blocks.at(-1)!.push(it);
  }
  let next = 1;
  for (const measured of blocks) {
    // A round measured again after a candidate's trip the environment caused (trips.ts
    // verificationTrip) has two baseline windows: the one next to its candidate counts.
    const block = measured.filter(
      (it, i) => !(it.kind === 'baseline' && measured[i + 1]?.kind === 'baseline' && measured[i + 1]?.round === it.round),
    );
    block.forEach((it, i) => {
      const round = Math.floor(i / 2) + 1;
      assert.equal(it.round, next + round - 1, summary);
      assert.equal(it.kind, roundOrder(round)[i % 2], `round ${round} alternates its order: ${summary}`);
    });
    next += Math.ceil(block.length / 2);
  }
  return Math.floor((blocks.at(-1) ?? []).filter((it) => it.state === 'ok').length / 2);
}

// The fleet in the people's API (documented in docs/service.md): zod schemas, so that the shape
// is written once, checked in the tests, and readable by clients that want to validate it.
import { z } from 'zod';
import { TargetKindSchema } from '../../protocol/v1.ts';
import { FLEET_FLAGS } from './flags.ts';
import { FLEET_SORTS, FLEET_STATE_FILTERS, type FleetQuery } from './query.ts';
import { fleetFlags, needsAttentionRank, verifiedGain } from './attention.ts';
import { ACTIVE_SESSION_STATES, type TuningSessionState } from '../tuning/store.ts';
import type { FleetAnswer, FleetEntry, FleetInterval } from './store.ts';
import { AdviceItemViewSchema } from '../advice/views.ts';

const time = z.iso.datetime({ offset: true });
const IntervalSchema = z.strictObject({ estimate: z.number(), low: z.number(), high: z.number() });
/** Every state a session can be in: the active ones, and the ends. */
const ENDED_SESSION_STATES = ['done', 'stopped', 'reverted', 'failed'] as const satisfies readonly TuningSessionState[];
const SESSION_STATES = [...ACTIVE_SESSION_STATES, ...ENDED_SESSION_STATES];

export const FleetDatabaseViewSchema = z.strictObject({
  id: z.uuid(),
  name: z.string(),
  target: TargetKindSchema,
  /** The most pressing state first; `idle` alone when nothing applies. */
  states: z.array(z.enum(FLEET_FLAGS)).min(1),
  /** 0 first: the position of states[0] in the order of attention (docs/service.md). */
  attentionRank: z.number().int().min(0),
  agent: z
    .strictObject({
      health: z.enum(['connected', 'stopped', 'lost']),
      hostname: z.string(),
      agentVersion: z.string(),
      lastReportAt: time.nullable(),
      leaseExpiresAt: time,
      releasedAt: time.nullable(),
      applyBlockedReason: z.string().nullable(),
    })
    .nullable(),
  kept: z
    .strictObject({
      sessionId: z.uuid(),
      keptAt: time.nullable(),
      config: z.record(z.string(), z.union([z.number(), z.string()])),
      /** 1 − the verified runtime ratio: 0.2 is 20 % less runtime. */
      verifiedGain: z.number().nullable(),
      runtime: IntervalSchema.nullable(),
      throughput: IntervalSchema.nullable(),
      minEffectPercent: z.number(),
      confidencePercent: z.number(),
    })
    .nullable(),
  session: z
    .strictObject({
      id: z.uuid(),
      state: z.enum(SESSION_STATES),
      message: z.string().nullable(),
      createdAt: time,
      updatedAt: time,
      endedAt: time.nullable(),
    })
    .nullable(),
  /** The advice between sessions pending (advice/): how many findings, which (strongest first),
   * the parameters they would change, since when; null when there is none to act on. */
  advice: z
    .strictObject({
      count: z.number().int().min(1),
      findings: z.array(AdviceItemViewSchema.shape.finding),
      parameters: z.array(z.string()),
      since: time,
    })
    .nullable(),
  /** Since when the statement mix is no longer the verified one, and its distance (watch/workload.ts); null while it is. */
  workloadChange: z.strictObject({ since: time, distance: z.number() }).nullable(),
  /** The watch on the kept configuration (watch/verdict.ts); null when nothing is kept or not judged yet. */
  watch: z.enum(['holding', 'gone', 'measuring']).nullable(),
});
export type FleetDatabaseView = z.infer<typeof FleetDatabaseViewSchema>;

export const FleetViewSchema = z.strictObject({
  query: z.strictObject({ sort: z.enum(FLEET_SORTS), state: z.enum(FLEET_STATE_FILTERS), q: z.string(), page: z.number().int().min(1) }),
  /** Databases in the organization, before the filter. */
  total: z.number().int().min(0),
  /** Per state, how many of the organization's databases have it (before the filter). */
  counts: z.record(z.enum(FLEET_FLAGS), z.number().int().min(0)),
  /** Databases the filter keeps, on all pages. */
  matched: z.number().int().min(0),
  /** Databases per page: `databases` holds those of page `query.page`. */
  pageSize: z.number().int().min(1),
  databases: z.array(FleetDatabaseViewSchema),
});
export type FleetView = z.infer<typeof FleetViewSchema>;

const iso = (d: Date | null) => d?.toISOString() ?? null;
const intervalView = (i: FleetInterval | null) => i && { estimate: i.estimate, low: i.low, high: i.high };

export function fleetDatabaseView(entry: FleetEntry): FleetDatabaseView {
  const { agent, kept, latestSession: session } = entry;
  return {
    id: entry.id,
    name: entry.name,
    target: entry.target,
    states: fleetFlags(entry),
    attentionRank: needsAttentionRank(entry),
    agent: agent && {
      health: agent.health,
      hostname: agent.hostname,
      agentVersion: agent.agentVersion,
      lastReportAt: iso(agent.lastReportAt),
      leaseExpiresAt: agent.leaseExpiresAt.toISOString(),
      releasedAt: iso(agent.releasedAt),
      applyBlockedReason: agent.applyBlockedReason,
    },
    kept: kept && {
      sessionId: kept.sessionId,
      keptAt: iso(kept.keptAt),
      config: kept.config,
      verifiedGain: verifiedGain(entry),
      runtime: intervalView(kept.runtime),
      throughput: intervalView(kept.throughput),
      minEffectPercent: kept.minEffectPercent,
      confidencePercent: kept.confidencePercent,
    },
    session: session && {
      id: session.id,
      state: session.state,
      message: session.message,
      createdAt: session.createdAt.toISOString(),
      updatedAt: session.updatedAt.toISOString(),
      endedAt: iso(session.endedAt),
    },
    advice: entry.advice && {
      count: entry.advice.count,
      findings: [...entry.advice.findings],
      parameters: [...entry.advice.parameters],
      since: entry.advice.since.toISOString(),
    },
    workloadChange: entry.workloadChange && { since: entry.workloadChange.since.toISOString(), distance: entry.workloadChange.distance },
    watch: entry.watch,
  };
}

export function fleetView(answer: FleetAnswer, query: FleetQuery): FleetView {
  return {
    query,
    total: answer.total,
    counts: answer.counts,
    matched: answer.matched,
    pageSize: answer.pageSize,
    databases: answer.shown.map(fleetDatabaseView),
  };
}

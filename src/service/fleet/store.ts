// What the fleet home page asks of its storage: for every database of an organization, what the
// service knows of it, read in one statement (storage/sql-fleet.ts) however many databases there
// are. The watch and the workload comparison (issue 31 parts 1 and 2, watch/) fill theirs; the
// advice (part 3) is read as last computed after the reports arrived (advice/refresh.ts).
import type { TargetKind } from '../../protocol/v1.ts';
import type { TuningSessionState } from '../tuning/store.ts';
import type { AdviceFinding } from '../advice/advice.ts';
import type { FleetFlag } from './flags.ts';
import type { FleetQuery } from './query.ts';

/** none: no agent ever started; connected: it holds its lease; stopped: it released its lease
 * (a clean exit); lost: its lease lapsed without a release (no report in time). */
export type AgentHealth = 'none' | 'connected' | 'stopped' | 'lost';

export interface FleetAgent {
  health: Exclude<AgentHealth, 'none'>;
  hostname: string;
  agentVersion: string;
  lastReportAt: Date | null;
  leaseExpiresAt: Date;
  releasedAt: Date | null;
  /** Why the agent cannot apply changes (a `default.*` parameter group, a read-only server), as
   * it last said; null when it can. */
  applyBlockedReason: string | null;
}

/** A ratio (candidate over baseline) with its interval at the session's confidence. */
export interface FleetInterval {
  estimate: number;
  low: number;
  high: number;
}

/** The configuration a session verified and the agent applied to keep, while nothing undid it. */
export interface FleetKept {
  sessionId: string;
  keptAt: Date | null;
  config: Record<string, number | string>;
  /** The A/B verification's runtime ratio (below 1: faster); null from sessions before it. */
  runtime: FleetInterval | null;
  throughput: FleetInterval | null;
  minEffectPercent: number;
  confidencePercent: number;
}

/** The database's latest tuning session: running, waiting for approval, or how it ended. */
export interface FleetSession {
  id: string;
  state: TuningSessionState;
  message: string | null;
  createdAt: Date;
  updatedAt: Date;
  endedAt: Date | null;
}

/** The diagnoses' advice waiting for a person (advice/): what they found, strongest first, and
 * the parameters they would change. */
export interface FleetAdvice {
  count: number;
  findings: AdviceFinding[];
  parameters: string[];
  /** Since when it argues for these findings. */
  since: Date;
}

/** The statement mix moved away from the one the kept configuration was verified on (watch/workload.ts). */
export interface FleetWorkloadChange {
  since: Date;
  distance: number;
}

/** The watch on the kept configuration (watch/verdict.ts): measuring: too few windows judged yet;
 * holding: the gain may still be there; gone: it no longer clears the minimum effect. */
export type FleetWatch = 'holding' | 'gone' | 'measuring';

export interface FleetEntry {
  id: string;
  name: string;
  target: TargetKind;
  createdAt: Date;
  agent: FleetAgent | null;
  kept: FleetKept | null;
  latestSession: FleetSession | null;
  /** Null unless the advice as last computed argues for a change, was computed since the latest
   * session ended (and none runs), and read reports of the advice's window (15 minutes). */
  advice: FleetAdvice | null;
  /** Null while the mix is the verified one, or nothing is kept. */
  workloadChange: FleetWorkloadChange | null;
  /** Null when nothing is kept, or the watch has not judged it yet. */
  watch: FleetWatch | null;
}

/** The fleet as a person asks for it: the counts of the whole organization, and one page of the
 * databases the query's filter keeps, in its order. */
export interface FleetAnswer {
  /** Databases in the organization. */
  total: number;
  /** Of them, those that need a person (attention.ts). */
  attention: number;
  /** Per state, how many of the organization's databases have it (before the filter). */
  counts: Record<FleetFlag, number>;
  /** Databases the filter keeps (on every page). */
  matched: number;
  /** The page's number (from 1) and size. */
  page: number;
  pageSize: number;
  /** The page's databases, in the query's order. */
  shown: FleetEntry[];
}

export interface FleetStore {
  /** Every database of the organization, in one statement, ordered by name: what answerFleet
   * (attention.ts) works on, the reference the tests hold fleetPage to. */
  fleet(organizationId: string): Promise<FleetEntry[]>;
  /** The counts and one page, in one statement: the states, the filter, the order and the page
   * are worked out in the storage, so that only the page's rows travel (10,000 databases are 9 MB
   * of rows, a page of 100 under 100 KB). The same answer as answerFleet (attention.ts) on `fleet`. */
  fleetPage(organizationId: string, query: FleetQuery, pageSize: number): Promise<FleetAnswer>;
}

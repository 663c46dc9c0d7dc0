// What needs a person first: each database's states (flags), the one that ranks it, and the
// sorts and filters of the fleet page and its JSON. Pure: no storage, no clock.
import { RUNNING_SESSION_STATES } from '../tuning/store.ts';
import type { FleetAnswer, FleetEntry } from './store.ts';
import { FLEET_FLAGS, type FleetFlag } from './flags.ts';
import type { FleetQuery } from './query.ts';

/** Flags up to this one need a person; from it on, nothing does. */
const FIRST_QUIET_FLAG: FleetFlag = 'tuning';
export const ATTENTION_FLAGS: readonly FleetFlag[] = FLEET_FLAGS.slice(0, FLEET_FLAGS.indexOf(FIRST_QUIET_FLAG));

const RUNNING: ReadonlySet<string> = new Set(RUNNING_SESSION_STATES);

/** Every flag of the database, in FLEET_FLAGS order; `idle` only when no other applies. */
export function fleetFlags(entry: FleetEntry): FleetFlag[] {
  const session = entry.latestSession?.state;
  const health = entry.agent?.health ?? 'none';
  const has: Record<FleetFlag, boolean> = {
    awaiting_approval: session === 'awaiting_approval',
    agent_lost: health === 'lost',
    gain_gone: entry.watch === 'gone',
    blocked: Boolean(entry.agent?.applyBlockedReason),
    session_failed: session === 'failed',
    workload_changed: entry.workloadChange !== null,
    advice: (entry.advice?.count ?? 0) > 0,
    agent_stopped: health === 'stopped',
    no_agent: health === 'none',
    tuning: session !== undefined && RUNNING.has(session),
    kept: entry.kept !== null,
    idle: false,
  };
  const flags = FLEET_FLAGS.filter((f) => has[f]);
  return flags.length > 0 ? flags : ['idle'];
}

/** 0 first: the position of the database's most pressing flag in FLEET_FLAGS. */
export function needsAttentionRank(entry: FleetEntry): number {
  return FLEET_FLAGS.indexOf(fleetFlags(entry)[0]!);
}

export function needsAttention(entry: FleetEntry): boolean {
  return needsAttentionRank(entry) < ATTENTION_FLAGS.length;
}

/** Since when the most pressing flag holds, as far as the service knows: among equals, whoever
 * has waited longest comes first. */
function waitingSince(entry: FleetEntry): number {
  const time = (d: Date | null | undefined) => d?.getTime() ?? Number.POSITIVE_INFINITY;
  switch (fleetFlags(entry)[0]) {
    case 'awaiting_approval':
    case 'session_failed':
      return time(entry.latestSession?.updatedAt);
    case 'agent_lost':
      return time(entry.agent?.lastReportAt ?? entry.agent?.leaseExpiresAt);
    case 'workload_changed':
      return time(entry.workloadChange?.since);
    case 'advice':
      return time(entry.advice?.since);
    default:
      return Number.POSITIVE_INFINITY;
  }
}

/** a before b: negative; by code unit, as the storage orders text under COLLATE "C". */
const byText = (a: string, b: string) => (a === b ? 0 : a < b ? -1 : 1);

/** By name ignoring case, then as written, then by id: the order the storage sorts the fleet's
 * pages in (sql-fleet.ts), the same on PGlite and on PostgreSQL whatever their locales. */
const byName = (a: FleetEntry, b: FleetEntry) =>
  byText(a.name.toLowerCase(), b.name.toLowerCase()) || byText(a.name, b.name) || byText(a.id, b.id);

/** The kept configuration's verified runtime gain (0.2: 20 % less runtime), or null. */
export function verifiedGain(entry: FleetEntry): number | null {
  const ratio = entry.kept?.runtime?.estimate;
  return ratio === undefined ? null : 1 - ratio;
}

export type FleetSort = FleetQuery['sort'];

/** What each sort orders by, worked out once per entry (a sort compares each entry many times). */
interface SortKey {
  entry: FleetEntry;
  rank: number;
  since: number;
  lastReport: number;
  gain: number;
}

function sortKey(entry: FleetEntry): SortKey {
  return {
    entry,
    rank: needsAttentionRank(entry),
    since: waitingSince(entry),
    // Never reported sorts as the oldest report; no gain as the smallest.
    lastReport: entry.agent?.lastReportAt?.getTime() ?? Number.NEGATIVE_INFINITY,
    gain: verifiedGain(entry) ?? Number.NEGATIVE_INFINITY,
  };
}

/** a before b: negative. Equal infinities are equal (not NaN). */
const ascending = (a: number, b: number) => (a === b ? 0 : a < b ? -1 : 1);

const COMPARATORS: Record<FleetSort, (a: SortKey, b: SortKey) => number> = {
  attention: (a, b) => ascending(a.rank, b.rank) || ascending(a.since, b.since) || byName(a.entry, b.entry),
  name: (a, b) => byName(a.entry, b.entry),
  // Silent longest first.
  last_report: (a, b) => ascending(a.lastReport, b.lastReport) || byName(a.entry, b.entry),
  // The largest verified gain first.
  gain: (a, b) => ascending(b.gain, a.gain) || byName(a.entry, b.entry),
};

/** A sorted copy. */
export function sortFleet(entries: readonly FleetEntry[], sort: FleetSort): FleetEntry[] {
  return entries
    .map(sortKey)
    .sort(COMPARATORS[sort])
    .map((k) => k.entry);
}

/** The entries that have the state (`attention`: any that needs a person; `all`: every one) and
 * whose name holds `q` (case-insensitive). */
export function filterFleet(entries: readonly FleetEntry[], filter: Pick<FleetQuery, 'state' | 'q'>): FleetEntry[] {
  const needle = filter.q.trim().toLowerCase();
  return entries.filter((entry) => {
    if (needle !== '' && !entry.name.toLowerCase().includes(needle)) return false;
    if (filter.state === 'all') return true;
    if (filter.state === 'attention') return needsAttention(entry);
    return fleetFlags(entry).includes(filter.state);
  });
}

/** How many databases have each flag (the filter's counts). */
export function countFlags(entries: readonly FleetEntry[]): Record<FleetFlag, number> {
  const counts = Object.fromEntries(FLEET_FLAGS.map((f) => [f, 0])) as Record<FleetFlag, number>;
  for (const entry of entries) for (const flag of fleetFlags(entry)) counts[flag]++;
  return counts;
}

/** The fleet's answer worked out here from every entry: what the storage's statement answers
 * (sql-fleet.ts, which the tests hold to this). */
export function answerFleet(all: readonly FleetEntry[], query: FleetQuery, pageSize: number): FleetAnswer {
  const matched = sortFleet(filterFleet(all, query), query.sort);
  return {
    total: all.length,
    attention: all.filter(needsAttention).length,
    counts: countFlags(all),
    matched: matched.length,
    page: query.page,
    pageSize,
    shown: matched.slice((query.page - 1) * pageSize, query.page * pageSize),
  };
}

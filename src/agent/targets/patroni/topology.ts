// Failover awareness, for the guardrails and the loop to hook into: who leads and on which
// timeline (a switchover or failover changes one or both), how far each replica lags, which
// replica does not stream, and which member runs something other than the dynamic
// configuration (a local override), which blocks tuning until it agrees.
import { errorMessage, type Logger } from '../../base/log.ts';
import type { ClusterView, PatroniApi } from './api.ts';
import type { MemberSessions } from './members.ts';
import { isLeader, parametersOf, readMembers, loopMs, settleMembers, type Wanted } from './write.ts';
import { MiB } from '../../../knobs/units.ts';

export interface TopologyMember {
  name: string;
  role: string;
  state: string;
  timeline: number | null;
  /** Bytes of WAL behind the leader as Patroni reports it; null when unknown (or the leader). */
  lagBytes: number | null;
}

export interface Topology {
  /** The leader's member name; null when the cluster has none (a failover under way). */
  leader: string | null;
  timeline: number | null;
  members: TopologyMember[];
}

export function topologyOf(cluster: ClusterView): Topology {
  const members = cluster.members.map((m) => ({
    name: m.name,
    role: m.role,
    state: m.state,
    timeline: m.timeline ?? null,
    lagBytes: typeof m.lag === 'number' ? m.lag : null,
  }));
  const leader = cluster.members.find(isLeader);
  return { leader: leader?.name ?? null, timeline: leader?.timeline ?? null, members };
}

/** The leader and timeline now (GET /cluster from any member that answers). */
export async function readTopology(api: PatroniApi): Promise<Topology> {
  return topologyOf(await api.cluster());
}

/** Why the cluster is not the one a trial started on (a new leader, a new timeline), or null.
 * A trial that sees this ends, and its window is contaminated. */
export function topologyChangedSince(before: Topology, now: Topology): string | null {
  if (now.leader === null) return `the cluster has no leader (it had ${before.leader ?? 'none'}): a failover is under way`;
  if (before.leader !== now.leader) return `the leader changed from ${before.leader ?? 'none'} to ${now.leader} (a switchover or failover)`;
  if (before.timeline !== null && now.timeline !== null && before.timeline !== now.timeline) {
    return `the timeline moved from ${before.timeline} to ${now.timeline} on ${now.leader} (a failover or a promotion)`;
  }
  return null;
}

export interface ReplicaHealth {
  name: string;
  /** Bytes behind the leader's current WAL position (replay), from the leader's pg_stat_replication. */
  lagBytes: number | null;
  streaming: boolean;
}

/** Each replica's replication as the leader sees it (pg_stat_replication, by application_name,
 * which Patroni sets to the member's name). A replica absent from it does not stream. */
export async function replicaHealth(api: PatroniApi, sessions: MemberSessions): Promise<ReplicaHealth[]> {
  const cluster = await api.cluster();
  const leader = cluster.members.find(isLeader);
  if (!leader) throw new Error('the cluster has no leader');
  const db = await sessions.of(leader);
  const rows = await db.query<{ name: string; state: string; lag: string | null }>(
    `SELECT application_name AS name, state, pg_wal_lsn_diff(pg_current_wal_lsn(), replay_lsn)::text AS lag FROM pg_stat_replication`,
  );
  return cluster.members
    .filter((m) => !isLeader(m))
    .map((m) => {
      const row = rows.find((r) => r.name === m.name);
      return { name: m.name, streaming: row?.state === 'streaming', lagBytes: row?.lag != null ? Number(row.lag) : null };
    });
}

/** Guardrail reasons on a replicated cluster: a replica that does not stream, or lags more than
 * `maxLagBytes` behind the leader. Empty when every replica is fine. */
export function replicationBreaches(replicas: readonly ReplicaHealth[], maxLagBytes: number): string[] {
  const reasons: string[] = [];
  for (const r of replicas) {
    if (!r.streaming) reasons.push(`replica ${r.name} is not streaming from the leader`);
    else if (r.lagBytes !== null && r.lagBytes > maxLagBytes) {
      reasons.push(
        `replica ${r.name} lags ${Math.round(r.lagBytes / MiB)} MB behind the leader (bound ${Math.round(maxLagBytes / MiB)} MB)`,
      );
    }
  }
  return reasons;
}

/**
 * Why tuning is blocked because a member does not run the dynamic configuration for `names`
 * (ALTER SYSTEM on a member, a parameter in one member's patroni.yml), or null when every
 * reachable member agrees. A value waiting for a restart is not a disagreement.
 *
 * A member can also differ because it missed a change: one restarting when the change came (a
 * leader just demoted by a switchover) keeps its old postgresql.conf, and Patroni writes the file
 * again only at the next change of the dynamic configuration. Refusing every change would make
 * sure that next change never comes, and tuning would stay blocked for good. So a member that
 * differs is first asked to reload (POST /reload makes Patroni write its file anew) after one of
 * Patroni's loops, then has what its file holds beyond the dynamic configuration rewritten
 * (settleMembers), within four loops; only what neither mends (a local override) blocks tuning.
 */
export async function disagreementReason(
  api: PatroniApi,
  sessions: MemberSessions,
  names: readonly string[],
  log?: Logger,
): Promise<string | null> {
  let settled;
  try {
    const dynamic = await api.dynamicConfig();
    const params = parametersOf(dynamic);
    const wanted: Wanted = Object.fromEntries(names.map((n) => [n, params.get(n.toLowerCase())]));
    const state = await readMembers(api, sessions, wanted);
    if (state.differs.length === 0) return null;
    settled =
      state.lagging.length === 0
        ? { agreed: false as const, last: state }
        : await settleMembers(api, sessions, wanted, { timeoutMs: 4 * loopMs(dynamic), nudgeAfterMs: loopMs(dynamic), log });
  } catch (err) {
    return `the Patroni cluster's members cannot be compared with its dynamic configuration: ${errorMessage(err)}`;
  }
  if (settled.agreed) return null;
  if (!settled.last) {
    return `the Patroni cluster's members cannot be compared with its dynamic configuration: ${errorMessage(settled.error)}`;
  }
  return (
    `a member does not run Patroni's dynamic configuration, so a change could not be verified there: ${settled.last.differs.join('; ')}. ` +
    `Tuning waits until it agrees: remove the local override (ALTER SYSTEM RESET <name> and a reload on that member, ` +
    `or the parameter in that member's patroni.yml postgresql.parameters)`
  );
}

// Changes through Patroni, never around it: the override layer is the dynamic configuration's
// postgresql.parameters (absent = unset), written with PATCH /config (null removes a key, so an
// unset parameter is never written as its default). Patroni's loop then applies it on every
// member; the agent waits, with a bound, until every member it can reach runs the values in
// pg_settings (the leader at least), else puts back exactly what it found and throws.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Db } from '../../database/db.ts';
import { errorMessage, type Logger } from '../../base/log.ts';
import { EnvironmentChangedError, UndoFailedError, type Overrides } from '../../../target/target.ts';
import {
  PatroniApiError,
  apiRootOf,
  type ClusterMember,
  type ClusterView,
  type DynamicConfig,
  type ParameterValue,
  type PatroniApi,
} from './api.ts';
import { agreement, fromPatroniFile, type MemberSessions } from './members.ts';

const POLL_MS = 500;
const RESTART_WAIT_MS = 300_000;

/** Parameter → value as the dynamic configuration holds it; undefined = absent. */
export type Wanted = Record<string, ParameterValue | undefined>;

/** The dynamic configuration's parameters, keyed in lower case (PostgreSQL's names are). */
export function parametersOf(config: DynamicConfig): Map<string, ParameterValue> {
  const found = new Map<string, ParameterValue>();
  for (const [name, value] of Object.entries(config.postgresql?.parameters ?? {})) {
    if (value !== null) found.set(name.toLowerCase(), value);
  }
  return found;
}

/** A value in the Override's spelling: Patroni keeps YAML scalars (4MB, 100, true). */
export function overrideValue(value: ParameterValue): string {
  if (typeof value === 'boolean') return value ? 'on' : 'off';
  return String(value);
}

export function overridesOf(config: DynamicConfig, names: readonly string[]): Overrides {
  const params = parametersOf(config);
  return Object.fromEntries(
    names.map((n) => {
      const v = params.get(n.toLowerCase());
      return [n, v === undefined ? { set: false } : { set: true, value: overrideValue(v) }];
    }),
  );
}

export function isLeader(m: ClusterMember): boolean {
  return m.role === 'leader' || m.role === 'master' || m.role === 'primary' || m.role === 'standby_leader';
}

export interface MembersState {
  cluster: ClusterView;
  /** member: why it differs, one per parameter. */
  differs: string[];
  /** Names of the members that answer and do not run the values yet. */
  lagging: string[];
  /** member names with a parameter waiting for a restart. */
  pending: string[];
  /** member names whose PostgreSQL could not be read. */
  unreachable: string[];
  /** Member → parameters the dynamic configuration lacks but its postgresql.conf still sets
   * (a removal it missed, or its own patroni.yml). */
  leftInFile: Map<string, string[]>;
}

/** Each reachable member's pg_conf_load_time before a change: a member that has not reloaded
 * since has not applied it, whatever pg_settings shows (a value left waiting for a restart by
 * the change before looks the same before and after Patroni applies its removal). */
export async function loadTimes(api: PatroniApi, sessions: MemberSessions): Promise<Map<string, number>> {
  const times = new Map<string, number>();
  for (const member of (await api.cluster()).members) {
    const t = await sessions.confLoadTime(member).catch(() => null);
    if (t !== null) times.set(member.name, t);
  }
  return times;
}

/** Reads every member's pg_settings for `wanted` once; with `loadedBefore`, a member that has
 * not reloaded its configuration since then differs. */
export async function readMembers(
  api: PatroniApi,
  sessions: MemberSessions,
  wanted: Wanted,
  loadedBefore?: ReadonlyMap<string, number>,
): Promise<MembersState> {
  const cluster = await api.cluster();
  const names = Object.keys(wanted);
  const state: MembersState = { cluster, differs: [], lagging: [], pending: [], unreachable: [], leftInFile: new Map() };
  if (!cluster.members.some(isLeader)) state.differs.push('the cluster has no leader');
  for (const member of cluster.members) {
    let rows;
    try {
      rows = await sessions.settings(member, names);
    } catch (err) {
      state.unreachable.push(member.name);
      if (isLeader(member)) state.differs.push(`${member.name} (leader) cannot be read: ${errorMessage(err)}`);
      continue;
    }
    const before = loadedBefore?.get(member.name);
    if (before !== undefined && (await sessions.confLoadTime(member)) <= before) {
      state.differs.push(`${member.name}: Patroni has not reloaded it since the change`);
      state.lagging.push(member.name);
      continue;
    }
    for (const name of names) {
      const row = rows.get(name.toLowerCase());
      if (!row) {
        state.differs.push(`${member.name}: ${name} is not in pg_settings`);
        continue;
      }
      const a = agreement(row, wanted[name]);
      if (a === 'pending-restart') {
        if (!state.pending.includes(member.name)) state.pending.push(member.name);
      } else if (a !== 'agrees') {
        state.differs.push(`${member.name}: ${a.differs}`);
        if (!state.lagging.includes(member.name)) state.lagging.push(member.name);
        if (wanted[name] === undefined && fromPatroniFile(row))
          state.leftInFile.set(member.name, [...(state.leftInFile.get(member.name) ?? []), name]);
      }
    }
  }
  return state;
}

/** When to ask a member that has not applied a change to reload: Patroni applies a change of the
 * dynamic configuration within one loop (loop_wait), so a member still behind after two has
 * missed it. A member that was restarting when the change came (just demoted by a switchover,
 * say) logs "No PostgreSQL configuration items changed, nothing to reload" and keeps its old
 * postgresql.conf until the next change; POST /reload makes it write the file and reload. */
export function reloadNudgeMs(config: DynamicConfig): number {
  return 2 * loopMs(config);
}

/** One of Patroni's loops (loop_wait; Patroni's default 10 s). */
export function loopMs(config: DynamicConfig): number {
  return (config.loop_wait ?? 10) * 1000;
}

/** Asks each member in `names` to reload, through its own REST API; one that cannot be asked is
 * waited for like the others. */
async function askToReload(api: PatroniApi, cluster: ClusterView, names: readonly string[]): Promise<void> {
  for (const member of cluster.members.filter((m) => names.includes(m.name))) {
    const root = apiRootOf(member);
    if (root) await api.reloadMember(root).catch(() => undefined);
  }
}

export interface SettleOptions {
  timeoutMs: number;
  /** Each member's pg_conf_load_time before the change: one that has not reloaded since differs. */
  loadedBefore?: ReadonlyMap<string, number> | undefined;
  /** When to ask a member still behind to reload, and again (default: never). */
  nudgeAfterMs?: number;
  /** Rewrite what a member's file holds beyond the dynamic configuration (default: yes). */
  rewrite?: boolean;
  /** Where the rewrite is said (the agent's log). */
  log?: Logger | undefined;
}

/** How waiting for the members ended: every reachable member agrees, or not by the deadline
 * (`last`: what was read last, if anything could be; `error`: why not). */
export type Settled = { agreed: true; state: MembersState } | { agreed: false; last?: MembersState; error?: unknown };

/**
 * Makes Patroni write its file anew on the members that still set parameters the dynamic
 * configuration dropped. Patroni compares with pg_settings only the parameters it knows of, those
 * of the configuration it applies and of the one before; a member whose PostgreSQL was restarting
 * when a parameter was removed (a leader demoted by a switchover) took the removal into its own
 * view without writing the file, and keeps running the old value until that parameter changes
 * again: POST /reload compares the same lists and changes nothing. A round trip through the
 * dynamic configuration makes the parameter change: set to the value the leader runs (so a
 * member that agrees runs nothing new), then removed again. Leaves the configuration as found
 * when the leader does not agree itself, or the first patch fails.
 */
async function rewriteLeftInFile(
  api: PatroniApi,
  sessions: MemberSessions,
  state: MembersState,
  { timeoutMs, log }: Pick<SettleOptions, 'timeoutMs' | 'log'>,
): Promise<void> {
  const names = [...new Set([...state.leftInFile.values()].flat())];
  const leader = state.cluster.members.find(isLeader);
  if (!leader || names.length === 0) return;
  const rows = await sessions.settings(leader, names);
  const values: Record<string, string> = {};
  for (const name of names) {
    const row = rows.get(name.toLowerCase());
    if (row && agreement(row, undefined) === 'agrees') values[name] = row.setting;
  }
  if (Object.keys(values).length === 0) return;
  const members = [...state.leftInFile.keys()].join(', ');
  log?.info(
    `Patroni: ${members} still set ${Object.keys(values).join(', ')} in postgresql.conf though the dynamic configuration dropped them; ` +
      `setting them to the leader's values and removing them again, so that Patroni writes the file anew`,
  );
  await api.patchConfig({ postgresql: { parameters: values } });
  try {
    await settleMembers(api, sessions, values, { timeoutMs, rewrite: false });
  } finally {
    await api.patchConfig({ postgresql: { parameters: Object.fromEntries(Object.keys(values).map((n) => [n, null])) } });
  }
}

/** Polls the members until none differs from `wanted` (a value waiting for a restart counts as
 * applied) or `timeoutMs` passes. A member still behind `nudgeAfterMs` after the start is asked
 * to reload, and asked again every `nudgeAfterMs` while it stays behind: one asked while its
 * Patroni was still starting (a member just demoted) may not have taken the first request. A
 * member still behind after that whose file sets a parameter the dynamic configuration dropped
 * has it rewritten once (`rewrite`; rewriteLeftInFile). */
export async function settleMembers(
  api: PatroniApi,
  sessions: MemberSessions,
  wanted: Wanted,
  { timeoutMs, loadedBefore, nudgeAfterMs = Infinity, rewrite = true, log }: SettleOptions,
): Promise<Settled> {
  const started = Date.now();
  const deadline = started + timeoutMs;
  const askedAt = new Map<string, number>();
  let rewritten = !rewrite;
  let last: MembersState | undefined;
  let error: unknown;
  for (;;) {
    try {
      last = await readMembers(api, sessions, wanted, loadedBefore);
      if (last.differs.length === 0) return { agreed: true, state: last };
      const now = Date.now();
      const behind =
        now - started >= nudgeAfterMs ? last.lagging.filter((name) => now - (askedAt.get(name) ?? -Infinity) >= nudgeAfterMs) : [];
      const askedBefore = behind.filter((name) => askedAt.has(name) && last!.leftInFile.has(name));
      for (const name of behind) askedAt.set(name, now);
      if (!rewritten && askedBefore.length > 0) {
        rewritten = true;
        await rewriteLeftInFile(api, sessions, last, { timeoutMs: Math.max(0, deadline - Date.now()), ...(log && { log }) });
      } else if (behind.length > 0) {
        await askToReload(api, last.cluster, behind);
      }
    } catch (err) {
      error = err;
    }
    if (Date.now() > deadline) return { agreed: false, ...(last && { last }), error };
    await sleep(POLL_MS);
  }
}

/** Waits until no reachable member differs from `wanted` (settleMembers); throws after
 * `timeoutMs` naming what still differs. */
export async function waitForMembers(
  api: PatroniApi,
  sessions: MemberSessions,
  wanted: Wanted,
  options: SettleOptions,
): Promise<MembersState> {
  const settled = await settleMembers(api, sessions, wanted, options);
  if (settled.agreed) return settled.state;
  const why = settled.last ? settled.last.differs.join('; ') : errorMessage(settled.error);
  throw new Error(`Patroni did not apply the change on every member within ${Math.round(options.timeoutMs / 1000)} s: ${why}`);
}

/**
 * Restarts the members that wait for a restart, through Patroni (POST /restart, never pg_ctl):
 * the replicas first, then the leader. The leader's restart is the only one that stops writes,
 * so it comes last, once every replica came back with the new values: a value a replica cannot
 * start with stops the restart there, with the leader untouched. Replicas first is also
 * PostgreSQL's order for raising max_connections and its kin, which a standby needs at least as
 * high as its primary's (Patroni itself keeps them no lower on a replica when lowering them).
 * Restarting the leader in place keeps the leader key: no switchover, no new timeline.
 */
export async function restartPending(api: PatroniApi, sessions: MemberSessions, pending: readonly string[]): Promise<void> {
  const cluster = await api.cluster();
  const ordered = [...cluster.members.filter((m) => !isLeader(m)), ...cluster.members.filter(isLeader)].filter((m) =>
    pending.includes(m.name),
  );
  for (const member of ordered) {
    const root = apiRootOf(member);
    if (!root) throw new Error(`Patroni does not give ${member.name}'s REST API address (api_url), so it cannot be restarted`);
    await api.restartMember(root);
    const deadline = Date.now() + RESTART_WAIT_MS;
    for (;;) {
      const now = await api.cluster().catch(() => null);
      const seen = now?.members.find((m) => m.name === member.name);
      if (seen?.state === 'running' || seen?.state === 'streaming') break;
      if (Date.now() > deadline) throw new Error(`${member.name} did not come back within ${RESTART_WAIT_MS / 1000} s of its restart`);
      await sleep(POLL_MS);
    }
    const db = await sessions.of(member);
    await db.waitUntilReachable(RESTART_WAIT_MS);
  }
}

export interface PatroniWrite {
  api: PatroniApi;
  sessions: MemberSessions;
  /** The agent's own session (postgresql.connection_url), waited for after a restart. */
  db: Db;
  timeoutMs: number;
  /** The raw values last read, so that a value read as "on" is written back as Patroni had it. */
  lastRead: Map<string, ParameterValue>;
  log?: Logger | undefined;
}

/** What to PATCH for `overrides`: the raw value last read when it spells the same value. */
function patchOf(overrides: Overrides, lastRead: ReadonlyMap<string, ParameterValue>): Record<string, ParameterValue | null> {
  return Object.fromEntries(
    Object.entries(overrides).map(([name, o]) => {
      if (!o.set) return [name, null];
      const raw = lastRead.get(name.toLowerCase());
      return [name, raw !== undefined && overrideValue(raw) === o.value ? raw : o.value];
    }),
  );
}

/** The leader, its timeline and every member's PostgreSQL start: what a switchover, a failover or
 * a member's restart changes. */
interface ClusterEpoch {
  leader: string | null;
  timeline: number | null;
  startedAt: Map<string, number>;
}

async function clusterEpoch(api: PatroniApi, sessions: MemberSessions): Promise<ClusterEpoch> {
  const cluster = await api.cluster();
  const leader = cluster.members.find(isLeader);
  const startedAt = new Map<string, number>();
  for (const member of cluster.members) {
    const t = await sessions.startTime(member).catch(() => null);
    if (t !== null) startedAt.set(member.name, t);
  }
  return { leader: leader?.name ?? null, timeline: leader?.timeline ?? null, startedAt };
}

/**
 * What changed in the cluster since `before` was read at `readAt`, or null: a new leader or
 * timeline; a member whose PostgreSQL started again or stopped answering since (`ownRestarts`:
 * not when the write restarts members itself), or had started only `recentMs` before (a replica
 * just demoted by a switchover, which may have missed the change).
 */
async function epochChange(
  api: PatroniApi,
  sessions: MemberSessions,
  before: ClusterEpoch,
  readAt: number,
  { ownRestarts, recentMs }: { ownRestarts: boolean; recentMs: number },
): Promise<string | null> {
  const now = await clusterEpoch(api, sessions).catch(() => null);
  if (!now) return 'the cluster could not be read';
  if (now.leader !== before.leader) return `the leader changed from ${before.leader ?? 'none'} to ${now.leader ?? 'none'}`;
  if (before.timeline !== null && now.timeline !== null && now.timeline !== before.timeline)
    return `the timeline moved from ${before.timeline} to ${now.timeline}`;
  for (const [name, t] of before.startedAt) {
    if (t > readAt - recentMs) return `${name} had started ${Math.max(0, Math.round((readAt - t) / 1000))} s before the change`;
    if (ownRestarts) continue;
    const later = now.startedAt.get(name);
    if (later === undefined) return `${name} stopped answering`;
    if (later !== t) return `${name} restarted`;
  }
  return null;
}

export async function writeParameters(w: PatroniWrite, overrides: Overrides, allowRestart: boolean): Promise<{ restarted: boolean }> {
  const names = Object.keys(overrides);
  const dynamic = await w.api.dynamicConfig();
  const found = parametersOf(dynamic);
  const nudgeAfterMs = reloadNudgeMs(dynamic);
  const settle: SettleOptions = { timeoutMs: w.timeoutMs, nudgeAfterMs, log: w.log };
  const epochReadAt = Date.now();
  const epoch = await clusterEpoch(w.api, w.sessions);
  const before: Record<string, ParameterValue | null> = Object.fromEntries(names.map((n) => [n, found.get(n.toLowerCase()) ?? null]));
  const patch = patchOf(overrides, w.lastRead);
  const wanted: Wanted = Object.fromEntries(Object.entries(patch).map(([n, v]) => [n, v ?? undefined]));
  // Patroni reloads a member only when its file changes: a patch that changes nothing is not
  // waited for by reload.
  const changes = Object.entries(patch).some(([n, v]) => String(v) !== String(before[n]));
  const loadedBefore = changes ? await loadTimes(w.api, w.sessions) : undefined;
  try {
    await w.api.patchConfig({ postgresql: { parameters: patch } });
    const state = await waitForMembers(w.api, w.sessions, wanted, { ...settle, loadedBefore });
    if (state.pending.length === 0 || !allowRestart) return { restarted: false };
    await restartPending(w.api, w.sessions, state.pending);
    await w.db.waitUntilReachable(RESTART_WAIT_MS);
    const after = await waitForMembers(w.api, w.sessions, wanted, settle);
    if (after.pending.length > 0) throw new Error(`still waiting for a restart after Patroni restarted them: ${after.pending.join(', ')}`);
    return { restarted: true };
  } catch (caught) {
    // Refused by every member (503 while Patroni cannot reach its DCS, 409 on a concurrent
    // change): the dynamic configuration is as found, there is nothing to put back.
    if (caught instanceof PatroniApiError && caught.refusedEverywhere) throw caught;
    // A switchover or a member's restart around the change is the environment's doing, not the
    // values': said so, for the service to measure the configuration again.
    const changed = await epochChange(w.api, w.sessions, epoch, epochReadAt, { ownRestarts: allowRestart, recentMs: nudgeAfterMs });
    const err = changed
      ? new EnvironmentChangedError(`the cluster changed during the apply (${changed}): ${errorMessage(caught)}`, { cause: caught })
      : caught;
    // Put back exactly what the dynamic configuration held for these parameters (null removes
    // the ones that were absent), then give Patroni the same bound to apply it.
    const loadedBeforeUndo = loadedBefore && (await loadTimes(w.api, w.sessions).catch(() => undefined));
    try {
      await w.api.patchConfig({ postgresql: { parameters: before } });
    } catch (undoErr) {
      throw new UndoFailedError(`${errorMessage(err)}; putting the dynamic configuration back failed: ${errorMessage(undoErr)}`, {
        cause: err,
      });
    }
    const undone: Wanted = Object.fromEntries(Object.entries(before).map(([n, v]) => [n, v ?? undefined]));
    const state = await waitForMembers(w.api, w.sessions, undone, { ...settle, loadedBefore: loadedBeforeUndo }).catch(() => null);
    // Members restarted with the new values now wait for a restart to run the old ones again.
    if (state && state.pending.length > 0 && allowRestart) {
      await restartPending(w.api, w.sessions, state.pending).catch(() => undefined);
    }
    throw err;
  }
}

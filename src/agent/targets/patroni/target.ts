// The Patroni target: a highly available cluster whose configuration Patroni keeps in its DCS
// and applies on every member. The override layer is the dynamic configuration's
// postgresql.parameters (write.ts); statistics come from postgresql.connection_url, which points
// to the leader or to a service that follows it.
import { catalogFor } from '../../../knobs/index.ts';
import { SELF_HOSTED_CAPABILITIES } from '../self-hosted.ts';
import { describeConnection } from '../../../postgres/connect.ts';
import { tuningModeOf, type TargetMetric } from '../../../protocol/v1.ts';
import type { TargetAgentConfig } from '../../../target/config.ts';
import type { Db } from '../../database/db.ts';
import type { Logger } from '../../base/log.ts';
import type { MachineInfo, Overrides, PreflightCheck, Target, TrialWatch, WriteOptions, WriteResult } from '../../../target/target.ts';
import { PatroniApi, type ParameterValue } from './api.ts';
import type { PatroniConfig } from './config.ts';
import { machineSizeCheck, patroniMachine } from './machine.ts';
import { MemberSessions } from './members.ts';
import { patroniMetrics } from './metrics.ts';
import { patroniPreflight } from './preflight.ts';
import { disagreementReason, readTopology, replicaHealth, replicationBreaches, topologyChangedSince } from './topology.ts';
import { MiB } from '../../../knobs/units.ts';
import { isLeader, overridesOf, parametersOf, writeParameters } from './write.ts';

/** Parameters Patroni sets itself on every member and will not take from the dynamic
 * configuration (its command-line options it always overrides, and replication's own). */
const PATRONI_OWNED = new Map<string, string>([
  ['listen_addresses', "Patroni sets it from each member's postgresql.listen"],
  ['port', "Patroni sets it from each member's postgresql.listen"],
  ['cluster_name', "Patroni sets it to the cluster's scope"],
  ['hot_standby', 'Patroni keeps it on'],
  ['wal_log_hints', 'Patroni keeps it on (pg_rewind needs it)'],
  ['primary_conninfo', 'Patroni writes it on each replica'],
  ['primary_slot_name', 'Patroni writes it on each replica'],
  ['recovery_target_timeline', 'Patroni writes it on each replica'],
]);

export interface PatroniTargetDeps {
  db: Db;
  config: Pick<TargetAgentConfig, 'postgresql' | 'targets'>;
  patroni: PatroniConfig;
  /** Says what the target does to the cluster beyond a write it was asked for. */
  log?: Logger;
}

export interface PatroniTarget extends Target {
  /** The REST API client and the member sessions, for the failover hooks (topology.ts). */
  readonly api: PatroniApi;
  readonly sessions: MemberSessions;
}

export function createPatroniTarget({ db, config, patroni, log }: PatroniTargetDeps): PatroniTarget {
  const api = new PatroniApi(patroni);
  const sessions = new MemberSessions(config.postgresql.connectionUrl);
  const where = describeConnection(config.postgresql.connectionUrl);
  const mode = tuningModeOf(config.postgresql.allowRestart);
  const lastRead = new Map<string, ParameterValue>();

  const leaderHost = async (): Promise<string | undefined> => {
    const cluster = await api.cluster().catch(() => null);
    return cluster?.members.find(isLeader)?.host ?? where.host;
  };

  return {
    kind: 'patroni',
    identity: `patroni ${patroni.restApiUrls[0] ?? ''} (statistics from ${where.host}:${where.port}/${where.database})`,
    api,
    sessions,

    async machine(): Promise<MachineInfo> {
      return patroniMachine(config, await leaderHost());
    },

    /** A member that disagrees with the dynamic configuration blocks tuning until it agrees. */
    applyBlockedReason: () =>
      disagreementReason(
        api,
        sessions,
        catalogFor(SELF_HOSTED_CAPABILITIES, mode).map((k) => k.name),
        log,
      ),

    async readOverrides(names: readonly string[]): Promise<Overrides> {
      const dynamic = await api.dynamicConfig();
      for (const [name, value] of parametersOf(dynamic)) lastRead.set(name, value);
      return overridesOf(dynamic, names);
    },

    writeOverrides(overrides: Overrides, options: WriteOptions): Promise<WriteResult> {
      for (const name of Object.keys(overrides)) {
        const owned = PATRONI_OWNED.get(name.toLowerCase());
        if (owned) return Promise.reject(new Error(`refused: ${name} cannot be set through Patroni's dynamic configuration (${owned})`));
      }
      return writeParameters(
        { api, sessions, db, timeoutMs: patroni.applyTimeoutSeconds * 1000, lastRead, log },
        overrides,
        options.allowRestart,
      );
    },

    metrics: (): Promise<TargetMetric[]> => patroniMetrics(api, sessions),

    async preflight(): Promise<PreflightCheck[]> {
      return [...(await patroniPreflight(api, patroni)), machineSizeCheck(config, await leaderHost())];
    },

    unwritable(names: readonly string[]): Promise<Map<string, string>> {
      return Promise.resolve(
        new Map(names.flatMap((n) => (PATRONI_OWNED.has(n.toLowerCase()) ? [[n, PATRONI_OWNED.get(n.toLowerCase())!] as const] : []))),
      );
    },

    /** A failover or switchover during a trial ends it, its window contaminated (the
     * environment's doing); a replica that stops streaming or lags past the bound ends it too.
     * A replica that did not stream when the trial began (a leader just demoted by a switchover,
     * catching up) ends it as the environment's doing as well: the trial did not stop it. */
    async watchTrial(): Promise<TrialWatch> {
      const before = await readTopology(api);
      const notStreamingAtStart = new Set(
        (await replicaHealth(api, sessions).catch(() => [])).filter((r) => !r.streaming).map((r) => r.name),
      );
      return {
        async check() {
          const changed = topologyChangedSince(before, await readTopology(api));
          if (changed) return [{ reason: `the Patroni cluster changed during the trial: ${changed}`, environment: true }];
          const replicas = await replicaHealth(api, sessions);
          return replicas.flatMap((replica) =>
            replicationBreaches([replica], patroni.maxReplicaLagMb * MiB).map((reason) =>
              notStreamingAtStart.has(replica.name)
                ? { reason: `${reason} (it did not stream when the trial began)`, environment: true }
                : { reason, environment: false },
            ),
          );
        },
      };
    },

    async close(): Promise<void> {
      await sessions.close();
      await api.close();
    },
  };
}

// The Cloud A target put together: clients made once, the placement (instance, or the cluster's
// current writer) found again at every call, and the parts that read, write, size and measure.
import type { TargetKind } from '../../../knobs/index.ts';
import { tuningModeOf, type TargetMetric } from '../../../protocol/v1.ts';
import { errorMessage } from '../../base/log.ts';
import { ParameterApplier } from './write.ts';
import { createAwsClients } from './aws.ts';
import { Capabilities } from './capabilities.ts';
import { ParameterGroups, groupLabel } from './groups.ts';
import { familyOf, readLayerValues, route } from './layers.ts';
import { MachineSizer } from './machine.ts';
import { MetricsReader } from './metrics.ts';
import { managedAPreflight } from './preflight.ts';
import { isDefaultGroup, Topology, type Placement } from './topology.ts';
import { DEFAULT_TIMINGS, type ManagedATimings } from './wait.ts';
import type { MachineInfo, Overrides, PreflightCheck, Target, TargetDeps, WriteOptions, WriteResult } from '../../../target/target.ts';
import { managedAConfig } from './config.ts';
import { localConfig } from '../local/config.ts';

export interface ManagedADeps extends TargetDeps {
  /** --managed-a-cluster: the target is the cluster's writer, found again on every call. */
  cluster: boolean;
  /** Poll intervals and time limits; the defaults suit Cloud A, tests shorten them. */
  timings?: Partial<ManagedATimings>;
}

/** Why no parameter change can be applied to this placement (a default DB parameter group on
 * the instance), or null. A default cluster group of an Aurora writer with a custom group of its
 * own blocks only the cluster-level parameters (layers.ts, clusterLayerProblem). */
export function blockedReason({ instance }: Placement): string | null {
  const group = instance.parameterGroup.name;
  if (isDefaultGroup(group)) {
    return (
      `the DB parameter group ${group} attached to ${instance.id} is a default group, which Cloud A lets no one modify, ` +
      'so the agent applies no parameter changes (everything else keeps working): ' +
      `create a custom DB parameter group of family ${familyOf(group)}, attach it to ${instance.id} (modify the instance), then reboot ${instance.id}`
    );
  }
  return null;
}

/** Makes the target; a missing identifier or unusable credentials come back as a rejection. */
export function createManagedATarget(deps: ManagedADeps): Promise<Target> {
  try {
    return Promise.resolve(buildTarget(deps));
  } catch (err) {
    return Promise.reject(err instanceof Error ? err : new Error(String(err)));
  }
}

function buildTarget({ db, config, log, outbound, cluster, timings: timingOverrides }: ManagedADeps): Target {
  const kind: TargetKind = cluster ? 'managed-a-cluster' : 'managed-a';
  const identifier = managedAConfig.of(config).databaseIdentifier;
  if (!identifier) {
    throw new Error(
      `managed_a.DATABASE_IDENTIFIER is missing (required with --${kind}): set it in agent.yaml or AGENT_MANAGEDA_DATABASE_IDENTIFIER`,
    );
  }
  const timings = { ...DEFAULT_TIMINGS, ...timingOverrides };
  const clients = createAwsClients(managedAConfig.of(config), outbound);
  log.debug(`Cloud A: region ${clients.region}, credentials from ${clients.credentialSource}`);
  const caps = new Capabilities(log);
  const topology = new Topology({ rds: clients.rds, region: clients.region, identifier, cluster, log, caps, db });
  const groups = new ParameterGroups(clients.rds, timings, caps, db);
  const sizer = new MachineSizer(clients.ec2, localConfig.of(config));
  const metricsReader = new MetricsReader(clients.cloudwatch, clients.pi, log, caps);
  const applier = new ParameterApplier({ rds: clients.rds, topology, groups, db, log, timings, caps });

  /** Groups already looked at for sharing, and whether the default-group notice was given. */
  const sharingChecked = new Set<string>();
  let blockedSaid = false;

  const sharedWith = async ({ instance, cluster: c }: Placement): Promise<string[]> => {
    const found: string[] = [];
    const members = new Set(c?.members.map((m) => m.id));
    const instances = await topology.instancesUsingGroup(instance.parameterGroup.name, instance.id);
    if (instances.length > 0) {
      const inCluster = instances.filter((i) => members.has(i));
      const outside = instances.filter((i) => !members.has(i));
      const who = [
        ...(outside.length > 0 ? [`DB instance${outside.length > 1 ? 's' : ''} ${outside.join(', ')}`] : []),
        ...(inCluster.length > 0 ? [`${inCluster.join(', ')} of this cluster`] : []),
      ];
      found.push(`${groupLabel({ kind: 'instance', name: instance.parameterGroup.name })}: ${who.join(' and ')}`);
    }
    if (c?.parameterGroup) {
      const clusters = await topology.clustersUsingGroup(c.parameterGroup, c.id);
      if (clusters.length > 0)
        found.push(
          `${groupLabel({ kind: 'cluster', name: c.parameterGroup })}: DB cluster${clusters.length > 1 ? 's' : ''} ${clusters.join(', ')}`,
        );
    }
    return found;
  };

  /** The placement now; the first time a group is seen, a warning if it is shared. */
  const placement = async (): Promise<Placement> => {
    const now = await topology.resolve();
    const key = `${now.instance.parameterGroup.name}|${now.cluster?.parameterGroup ?? ''}`;
    if (!sharingChecked.has(key)) {
      sharingChecked.add(key);
      try {
        const others = await sharedWith(now);
        if (others.length > 0)
          log.warn(
            `the parameter group is shared, so every change the agent makes applies to the others too: ${others.join('; ')}. One parameter group per database is recommended`,
          );
      } catch (err) {
        log.debug(`could not check whether the parameter group is shared: ${errorMessage(err)}`);
      }
    }
    return now;
  };

  const blocked = (p: Placement): string | null => {
    const reason = blockedReason(p);
    if (reason && !blockedSaid) {
      blockedSaid = true;
      log.warn(reason);
    }
    return reason;
  };

  return {
    kind,
    identity: `${kind} ${identifier} (${clients.region})`,

    async machine(): Promise<MachineInfo> {
      return sizer.size(await placement());
    },

    async applyBlockedReason(): Promise<string | null> {
      return blocked(await placement());
    },

    async readOverrides(names: readonly string[]): Promise<Overrides> {
      return (await readLayerValues(groups, await placement(), names, caps)).overrides;
    },

    async writeOverrides(overrides: Overrides, options: WriteOptions): Promise<WriteResult> {
      const now = await placement();
      const reason = blocked(now);
      if (reason) throw new Error(reason);
      return applier.write(now, overrides, options.allowRestart);
    },

    async metrics(): Promise<TargetMetric[]> {
      let now: Placement;
      try {
        now = await placement();
      } catch (err) {
        log.debug(`no Cloud A metrics this time: ${errorMessage(err)}`);
        return [];
      }
      const memory = await sizer.size(now).then(
        (m) => m.machine.memoryBytes,
        () => undefined,
      );
      return metricsReader.read(now.instance, memory);
    },

    async unwritable(names: readonly string[]): Promise<Map<string, string>> {
      const found = new Map<string, string>();
      try {
        for (const [name, { group, meta, excluded }] of await route(groups, await placement(), names, caps)) {
          if (excluded) found.set(name, excluded);
          else if (meta && !meta.modifiable) found.set(name, `not modifiable in ${groupLabel(group)} (IsModifiable is false)`);
        }
      } catch (err) {
        // The write path checks again (write.ts), so an unread group only costs a refused trial.
        log.debug(`Cloud A: could not tell which parameters the group lets change: ${errorMessage(err)}`);
      }
      return found;
    },

    preflight(): Promise<PreflightCheck[]> {
      return managedAPreflight({
        kind: cluster ? 'managed-a-cluster' : 'managed-a',
        mode: tuningModeOf(config.postgresql.allowRestart),
        allowRestart: config.postgresql.allowRestart,
        resolve: () => topology.resolve(),
        blockedReason,
        sharedWith,
        machine: (p) => sizer.size(p),
        groups,
        metrics: metricsReader,
        caps,
        unwritable: (p, names) => route(groups, p, names, caps),
      });
    },

    close(): Promise<void> {
      clients.destroy();
      return Promise.resolve();
    },
  };
}

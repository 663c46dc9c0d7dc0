// The Cloud C target put together: Google's clients made once, the instance re-read for each
// change (its flags and settings version must be current), and the parts that read, write, size
// and measure (see index.ts).
import type { TargetMetric } from '../../../protocol/v1.ts';
import { errorMessage } from '../../base/log.ts';
import type { MachineInfo, Overrides, Target, TargetDeps, WriteOptions, WriteResult } from '../../../target/target.ts';
import { localConfig } from '../local/config.ts';
import { ManagedCApi, type Instance } from './api.ts';
import { managedCConfig } from './config.ts';
import { CLOUD_SQL_FLAGS } from './flags.ts';
import { machineOfInstance } from './machine.ts';
import { monitoringMetrics } from './metrics.ts';
import { managedCPreflight } from './preflight.ts';
import { overrideOf, writeFlags } from './write.ts';

export function createManagedCTarget({ db, config, log }: TargetDeps): Promise<Target> {
  const c = managedCConfig.of(config);
  const missing = (['project', 'region', 'instance'] as const).filter((k) => !c[k]);
  if (missing.length > 0)
    return Promise.reject(new Error(`--managed-c needs managed_c.project, region and instance; missing: ${missing.join(', ')}`));
  const api = new ManagedCApi({ ...c, project: c.project!, instance: c.instance! }, log);
  const machine = (instance: Instance): MachineInfo => machineOfInstance(instance, localConfig.of(config));
  const memoryOf = (instance: Instance): number | undefined => {
    try {
      return machine(instance).machine.memoryBytes;
    } catch {
      return undefined;
    }
  };
  log.debug(`Cloud C: ${c.project}:${c.instance} as ${api.credentials}`);

  return Promise.resolve({
    kind: 'managed-c',
    identity: `managed-c ${c.project}:${c.region}:${c.instance}`,

    async machine(): Promise<MachineInfo> {
      return machine(await api.getInstance());
    },

    async applyBlockedReason(): Promise<string | null> {
      try {
        const { state } = await api.getInstance();
        return state === 'RUNNABLE'
          ? null
          : `the Cloud SQL instance ${c.instance} is ${state}: its flags cannot be changed until it is RUNNABLE`;
      } catch (err) {
        return `cannot tell whether the Cloud SQL instance can take a change, so no change is made: ${errorMessage(err)}`;
      }
    },

    async readOverrides(names: readonly string[]): Promise<Overrides> {
      await api.settle();
      const flags = (await api.getInstance()).settings.databaseFlags;
      return Object.fromEntries(names.map((name) => [name, overrideOf(flags, name)]));
    },

    writeOverrides: (overrides: Overrides, options: WriteOptions): Promise<WriteResult> =>
      writeFlags({ api, db, log, memoryBytes: memoryOf }, overrides, options),

    async metrics(): Promise<TargetMetric[]> {
      try {
        const memory = await api.getInstance().then(memoryOf, () => undefined);
        return await monitoringMetrics(api, memory);
      } catch (err) {
        log.debug(`Cloud Monitoring metrics not read: ${errorMessage(err)}`);
        return [];
      }
    },

    preflight: () => managedCPreflight({ api, config, machine }),

    unwritable(names: readonly string[]): Promise<Map<string, string>> {
      const found = new Map<string, string>();
      for (const name of names) {
        const flag = CLOUD_SQL_FLAGS[name];
        if (!flag) found.set(name, 'not a Cloud SQL flag the agent tunes');
        else if (flag.restart && !config.postgresql.allowRestart)
          found.set(name, 'Cloud SQL restarts the instance to apply it, and restarts are not allowed');
      }
      return Promise.resolve(found);
    },

    close: () => api.close(),
  });
}

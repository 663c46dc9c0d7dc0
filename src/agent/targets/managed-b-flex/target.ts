// The Cloud B target put together: the API client made once, the server (and so the machine)
// re-read now and then, and the parts that read, write, size and measure (see index.ts).
import type { TargetMetric } from '../../../protocol/v1.ts';
import { errorMessage } from '../../base/log.ts';
import { ManagedBFlexApi, type FlexibleServer } from './api.ts';
import { createIdentity, resourceManager } from './identity.ts';
import { azureTunesReason, intelligentTuningOf } from './intelligent-tuning.ts';
import { machineOfServer, type ServerMachine } from './machine.ts';
import { monitorMetrics } from './metrics.ts';
import { managedBFlexKinds } from './kinds.ts';
import { managedBFlexPreflight } from './preflight.ts';
import { isPassingState, settledState } from './ready.ts';
import { overrideOf, writeServerParameters } from './write.ts';
import type { MachineInfo, Overrides, Target, TargetDeps, WriteResult } from '../../../target/target.ts';
import { managedBFlexConfig } from './config.ts';
import { localConfig } from '../local/config.ts';

/** The SKU (and so the machine) changes only with a scale operation: re-read now and then. */
const SERVER_TTL_MS = 5 * 60_000;

/** States in which the server cannot take a parameter change. */
const UNAVAILABLE_STATES = new Set(['stopped', 'stopping', 'disabled', 'dropping', 'inaccessible', 'starting', 'provisioning']);
/** How long a change waits for someone else's operation (a restart takes about a minute). */
const READY_WAIT_MS = 3 * 60_000;

export function createManagedBFlexTarget({ db, config, log }: TargetDeps): Promise<Target> {
  try {
    return Promise.resolve(buildTarget({ db, config, log }));
  } catch (err) {
    return Promise.reject(err instanceof Error ? err : new Error(String(err)));
  }
}

function buildTarget({ db, config, log }: TargetDeps): Target {
  // The CLI refuses this before it connects; a second line for any other caller.
  const restart = managedBFlexKinds['managed-b-flex']!.capabilities.restart;
  if (config.postgresql.allowRestart && restart.mode === 'never') throw new Error(restart.refusal);
  const b = managedBFlexConfig.of(config);
  const missing = (['subscriptionId', 'resourceGroupName', 'serverName'] as const).filter((k) => !b[k]);
  if (missing.length > 0) {
    throw new Error(
      `--managed-b-flex needs managed_b_flex.subscription_id, resource_group_name and server_name; missing: ${missing.join(', ')}`,
    );
  }
  const identity = createIdentity(b);
  const api = new ManagedBFlexApi({ config: b, identity, resourceManager: resourceManager(b), log });
  log.debug(`Cloud B: ${api.server} at ${api.endpoint} as the ${identity.description}`);

  let cached: { server: FlexibleServer; at: number } | undefined;
  const server = async (): Promise<FlexibleServer> => {
    if (cached && Date.now() - cached.at < SERVER_TTL_MS) return cached.server;
    cached = { server: await api.getServer(), at: Date.now() };
    return cached.server;
  };

  const warned = new Set<string>();
  const machineOf = (s: FlexibleServer): ServerMachine => {
    const result = machineOfServer(s, localConfig.of(config));
    if (result.warning && !warned.has(result.warning)) {
      warned.add(result.warning);
      log.warn(result.warning);
    }
    return result;
  };

  return {
    kind: 'managed-b-flex',
    identity: `managed-b-flex ${b.subscriptionId}/${b.resourceGroupName}/${b.serverName}`,

    async machine(): Promise<MachineInfo> {
      return machineOf(await server()).info;
    },

    async applyBlockedReason(): Promise<string | null> {
      let state: string;
      try {
        state = await settledState({ api, db, log, serverName: b.serverName! }, READY_WAIT_MS);
      } catch (err) {
        return `cannot tell whether the flexible server can take a change, so no change is made: ${errorMessage(err)}`;
      }
      if (isPassingState(state))
        return `the flexible server ${b.serverName} is still ${state} after ${READY_WAIT_MS / 60_000} minutes (another operation runs on it): no change is made until it is Ready`;
      return UNAVAILABLE_STATES.has(state.toLowerCase())
        ? `the flexible server ${b.serverName} is ${state}: its server parameters cannot be changed until it is Ready`
        : null;
    },

    async readOverrides(names: readonly string[]): Promise<Overrides> {
      const params = await api.listParameters();
      return Object.fromEntries(names.map((name) => [name, overrideOf(params.get(name))]));
    },

    async writeOverrides(overrides: Overrides): Promise<WriteResult> {
      // Whatever the options say, Cloud B is never restarted by the agent.
      await writeServerParameters({ api, db, log }, overrides);
      return { restarted: false };
    },

    async metrics(): Promise<TargetMetric[]> {
      try {
        const memory = await server().then(
          (s) => machineOf(s).info.machine.memoryBytes,
          () => undefined,
        );
        return await monitorMetrics(api, memory);
      } catch (err) {
        log.debug(`Azure Monitor metrics not read: ${errorMessage(err)}`);
        return [];
      }
    },

    preflight: () => managedBFlexPreflight({ api, config, machine: machineOf }),

    async unwritable(names: readonly string[]): Promise<Map<string, string>> {
      const found = new Map<string, string>();
      try {
        const params = await api.listParameters();
        for (const name of names) if (params.get(name)?.isReadOnly) found.set(name, `read-only on the ${api.server}`);
        // Read at every report, so that intelligent tuning turned on later is seen too.
        const tuning = intelligentTuningOf(params);
        for (const name of tuning.parameters) if (names.includes(name) && !found.has(name)) found.set(name, azureTunesReason(tuning));
      } catch (err) {
        // The write path checks again (write.ts), so an unread list only costs a refused trial.
        log.debug(`Cloud B: could not tell which server parameters are read-only: ${errorMessage(err)}`);
      }
      return found;
    },

    close: () => Promise.resolve(),
  };
}

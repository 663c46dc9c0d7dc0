// The machine of a Cloud SQL instance, from its tier (settings.tier): db-custom-<vCPUs>-<MB> and
// db-perf-optimized-N-<vCPUs> name their size; the shared-core and legacy tiers are a table. For
// a tier it does not know, local.memory_mb and local.vcpus from agent.yaml, else an error saying
// so: the bounds depend on it.
import { GiB, MiB } from '../../../knobs/units.ts';
import type { MachineInfo } from '../../../target/target.ts';
import type { LocalConfig } from '../local/config.ts';
import type { Instance } from './api.ts';

/** Tiers whose name does not give their size (Google's machine types page). */
const TIERS: Readonly<Record<string, { vcpus: number; memoryBytes: number }>> = {
  'db-f1-micro': { vcpus: 1, memoryBytes: 0.6 * GiB },
  'db-g1-small': { vcpus: 1, memoryBytes: 1.7 * GiB },
};

/** Size from the tier's name, or undefined. */
export function sizeOfTier(tier: string): { vcpus: number; memoryBytes: number } | undefined {
  const known = TIERS[tier];
  if (known) return known;
  const custom = /^db-custom-(\d+)-(\d+)$/.exec(tier);
  if (custom) return { vcpus: Number(custom[1]), memoryBytes: Number(custom[2]) * MiB };
  // Enterprise Plus: 8 GiB per vCPU.
  const perf = /^db-perf-optimized-N-(\d+)$/.exec(tier);
  if (perf) return { vcpus: Number(perf[1]), memoryBytes: Number(perf[1]) * 8 * GiB };
  const legacy = /^db-n1-(standard|highmem)-(\d+)$/.exec(tier);
  if (legacy) return { vcpus: Number(legacy[2]), memoryBytes: Number(legacy[2]) * (legacy[1] === 'standard' ? 3.75 : 6.5) * GiB };
  return undefined;
}

export function machineOfInstance(instance: Instance, local: LocalConfig): MachineInfo {
  const { tier, dataDiskSizeGb, dataDiskType } = instance.settings;
  const storage = {
    storage: dataDiskType === 'PD_HDD' ? ('hdd' as const) : ('ssd' as const),
    ...(dataDiskSizeGb !== undefined && { storageBytes: Number(dataDiskSizeGb) * GiB }),
  };
  const size = sizeOfTier(tier);
  if (size) return { machine: { ...size, ...storage }, source: `tier ${tier}` };
  if (local.memoryMb !== undefined && local.vcpus !== undefined)
    return {
      machine: { memoryBytes: local.memoryMb * MiB, vcpus: local.vcpus, ...storage },
      source: `agent.yaml local.memory_mb and local.vcpus (tier ${tier} is not one tuner-agent knows)`,
    };
  throw new Error(
    `tier ${tier} is not one tuner-agent knows: set local.memory_mb and local.vcpus in agent.yaml (or AGENT_LOCAL_MEMORY_MB and AGENT_LOCAL_VCPUS) to the instance's memory and vCPUs`,
  );
}

// The machine a flexible server runs on, from its SKU: the table first; for a size the table
// does not know, the operator's figures in agent.yaml (local.memory_mb, local.vcpus), else a
// deliberately small estimate. Either way the agent says so, because the bounds depend on it.
import type { Machine } from '../../../knobs/index.ts';
import type { FlexibleServer } from './api.ts';
import { estimateComputeSize, knownComputeSize } from './skus.ts';
import type { MachineInfo } from '../../../target/target.ts';
import { formatBytes, GiB, MiB } from '../../../knobs/units.ts';
import type { LocalConfig } from '../local/config.ts';

export interface ServerMachine {
  info: MachineInfo;
  /** Set when the SKU is not in the table: what the agent did about it. */
  warning?: string;
}

/** "SKU Standard_D4ds_v4 (GeneralPurpose), PostgreSQL 16.4, 128 GiB Premium_LRS storage, high availability ZoneRedundant" */
export function describeServer(server: FlexibleServer): string {
  const parts = [`SKU ${server.sku.name}${server.sku.tier ? ` (${server.sku.tier})` : ''}`];
  if (server.version) {
    // minorVersion is "6" on some api-versions and "16.6" on others.
    const minor = server.minorVersion;
    parts.push(`PostgreSQL ${!minor ? server.version : minor.includes('.') ? minor : `${server.version}.${minor}`}`);
  }
  if (server.storage?.storageSizeGB)
    parts.push(`${server.storage.storageSizeGB} GiB ${server.storage.type ?? ''} storage`.replace('  ', ' '));
  if (server.highAvailability?.mode) parts.push(`high availability ${server.highAvailability.mode}`);
  return parts.join(', ');
}

export function machineOfServer(server: FlexibleServer, local: LocalConfig): ServerMachine {
  const storage: Pick<Machine, 'storage' | 'storageBytes'> = {
    // Every Cloud B storage type (Premium_LRS, PremiumV2_LRS, UltraSSD_LRS) is SSD.
    storage: 'ssd',
    ...(server.storage?.storageSizeGB !== undefined && { storageBytes: server.storage.storageSizeGB * GiB }),
  };
  const sku = server.sku.name;
  const known = knownComputeSize(sku);
  if (known) {
    return {
      info: {
        machine: { ...known, ...storage },
        source: `SKU ${sku}${server.sku.tier ? ` (${server.sku.tier})` : ''} in tuner-agent's table of Cloud B sizes`,
      },
    };
  }
  const unknown = `SKU ${sku} is not in tuner-agent's table of Cloud B compute sizes`;
  if (local.memoryMb !== undefined && local.vcpus !== undefined) {
    return {
      info: {
        machine: { memoryBytes: local.memoryMb * MiB, vcpus: local.vcpus, ...storage },
        source: `agent.yaml local.memory_mb and local.vcpus (${unknown})`,
      },
      warning: `${unknown}: using local.memory_mb = ${local.memoryMb} and local.vcpus = ${local.vcpus} from the configuration`,
    };
  }
  const estimate = estimateComputeSize(sku, server.sku.tier);
  if (!estimate) {
    throw new Error(
      `${unknown}, and its name gives no vCPU count: set local.memory_mb and local.vcpus in agent.yaml (or AGENT_LOCAL_MEMORY_MB and AGENT_LOCAL_VCPUS) to the server's memory and vCPUs`,
    );
  }
  const figures = `${estimate.vcpus} vCPUs and ${formatBytes(estimate.memoryBytes)}`;
  return {
    info: {
      machine: { ...estimate, ...storage },
      source: `estimate for ${sku}: ${figures} (vCPUs from its name, the least memory per vCPU of its tier)`,
    },
    warning: `${unknown}: the agent assumes ${figures}, on the small side so that its bounds stay safe; set local.memory_mb and local.vcpus in agent.yaml to the server's real size for exact bounds`,
  };
}

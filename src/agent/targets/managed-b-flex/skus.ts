// Cloud B compute sizes: SKU name → vCPUs and memory, as the service's own limits page lists
// them (Burstable B-series, General Purpose D-series, Memory Optimized E-series). The agent's
// bounds are functions of these figures, so a size that is not here is estimated on the safe
// (smaller) side, or taken from agent.yaml, and said so.
import { GiB } from '../../../knobs/units.ts';

export interface ComputeSize {
  vcpus: number;
  memoryBytes: number;
}

const table = new Map<string, ComputeSize>();

function add(names: readonly string[], vcpus: number, memoryGiB: number): void {
  for (const name of names) table.set(name.toLowerCase(), { vcpus, memoryBytes: memoryGiB * GiB });
}

// Burstable
add(['B1ms'], 1, 2);
add(['B2s'], 2, 4);
add(['B2ms'], 2, 8);
add(['B4ms'], 4, 16);
add(['B8ms'], 8, 32);
add(['B12ms'], 12, 48);
add(['B16ms'], 16, 64);
add(['B20ms'], 20, 80);
// General Purpose: 4 GiB per vCPU in every generation.
for (const n of [2, 4, 8, 16, 32, 48, 64]) add([`D${n}s_v3`, `D${n}ds_v4`, `D${n}ds_v5`, `D${n}ads_v5`], n, 4 * n);
add(['D96ds_v5', 'D96ads_v5'], 96, 384);
// Memory Optimized: 8 GiB per vCPU, except the two largest sizes.
for (const n of [2, 4, 8, 16, 32, 48]) add([`E${n}s_v3`, `E${n}ds_v4`, `E${n}ds_v5`, `E${n}ads_v5`], n, 8 * n);
add(['E20ds_v4', 'E20ds_v5', 'E20ads_v5'], 20, 160);
add(['E64s_v3', 'E64ds_v4', 'E64ds_v5', 'E64ads_v5'], 64, 432);
add(['E96ds_v5', 'E96ads_v5'], 96, 672);

/** "Standard_D4ds_v4", "GP_Standard_D4ds_v4" and "D4ds_v4" all name the same size. */
function sizeName(skuName: string): string {
  return skuName
    .trim()
    .replace(/^(B|GP|MO)_/i, '')
    .replace(/^Standard_/i, '')
    .toLowerCase();
}

/** The size of a SKU in the table, or undefined. */
export function knownComputeSize(skuName: string): ComputeSize | undefined {
  return table.get(sizeName(skuName));
}

/** The smallest memory per vCPU of each tier in the table: an estimate never larger than a
 * real server of that tier has. */
const LEAST_GIB_PER_VCPU: Record<string, number> = { burstable: 2, generalpurpose: 4, memoryoptimized: 8 };

/**
 * An estimate for a SKU the table does not know: its vCPUs from the size number in its name
 * (Azure names carry it: D4ds_v4 has 4), its memory from the least memory per vCPU of its tier
 * (2 GiB when the tier is unknown too). Undefined when the name carries no number.
 */
export function estimateComputeSize(skuName: string, tier: string | undefined): ComputeSize | undefined {
  const match = /^[a-z]+?(\d+)/.exec(sizeName(skuName));
  const vcpus = match ? Number(match[1]) : NaN;
  if (!Number.isInteger(vcpus) || vcpus < 1 || vcpus > 4096) return undefined;
  const perVcpu = LEAST_GIB_PER_VCPU[(tier ?? '').toLowerCase()] ?? 2;
  return { vcpus, memoryBytes: vcpus * perVcpu * GiB };
}

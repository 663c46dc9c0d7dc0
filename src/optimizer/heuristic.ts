// pgtune's recommendation projected into the search space, on top of a base configuration (the
// incumbent; by default the current settings). Knobs pgtune does not set, and those in `keep`
// (knobs a diagnosis already argued about, whose measured value stands), keep the base's value;
// everything is clipped to the bounds and repaired against the constraints, as any other
// suggestion is.
import { isFeasible, repair, validateSuggestion } from './feasibility.ts';
import { pgtune, type PgtuneWorkload } from './pgtune.ts';
import { clipNumber, currentValue } from './space.ts';
import type { Config, SearchSpace } from './types.ts';

export function heuristicConfig(
  space: SearchSpace,
  workload: PgtuneWorkload = 'mixed',
  base: Readonly<Config> = {},
  keep: ReadonlySet<string> = new Set(),
): Config | undefined {
  const connections = Number(space.settings['max_connections']?.setting);
  const recommended: Readonly<Record<string, number | undefined>> = {
    ...pgtune({
      memoryBytes: space.machine.memoryBytes,
      vcpus: space.machine.vcpus,
      workload,
      storage: space.machine.storage ?? 'ssd',
      ...(Number.isFinite(connections) && connections > 0 ? { maxConnections: connections } : {}),
    }),
  };
  const config: Config = {};
  for (const dim of space.dimensions) {
    const now = base[dim.name] ?? currentValue(space, dim);
    if (dim.kind === 'numeric') {
      config[dim.name] = clipNumber(dim, keep.has(dim.name) ? (now as number) : (recommended[dim.name] ?? (now as number)));
    } else {
      config[dim.name] = dim.values.includes(String(now)) ? now : (dim.values[0] as string);
    }
  }
  const repaired = repair(space, config);
  if (!isFeasible(space, repaired) || !validateSuggestion(space, repaired).ok) return undefined;
  return repaired;
}

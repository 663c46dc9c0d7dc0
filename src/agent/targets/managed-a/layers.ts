// Which parameter group holds which parameter. An RDS instance has one layer, its DB parameter
// group. An Aurora writer has two: its own DB parameter group (instance-level parameters, which
// take precedence) and the cluster parameter group (cluster-level parameters). A parameter goes
// to the first group that lists it, so the split follows the engine's own parameter lists
// instead of a table that could go stale.
import type { Override, Overrides } from '../target.ts';
import { groupLabel, type GroupRef, type ParameterGroups, type ParameterMeta } from './groups.ts';
import type { Placement } from './topology.ts';

export interface Layer {
  group: GroupRef;
  /** What the group says about the parameter; undefined when no group lists it. */
  meta: ParameterMeta | undefined;
}

/** The groups of a placement, the one that wins first. */
export function layersOf(placement: Placement): GroupRef[] {
  const instance: GroupRef = { kind: 'instance', name: placement.instance.parameterGroup.name };
  return placement.cluster ? [instance, { kind: 'cluster', name: placement.cluster.parameterGroup }] : [instance];
}

export async function route(groups: ParameterGroups, placement: Placement, names: readonly string[]): Promise<Map<string, Layer>> {
  const layers = layersOf(placement);
  const metas = await Promise.all(layers.map((g) => groups.metadata(g)));
  const routes = new Map<string, Layer>();
  for (const name of names) {
    const at = metas.findIndex((m) => m.has(name));
    routes.set(name, at < 0 ? { group: layers[0]!, meta: undefined } : { group: layers[at]!, meta: metas[at]!.get(name) });
  }
  return routes;
}

/** The override layer of `names`: the group's exact stored value when it is set there (`user`). */
export async function readLayerValues(
  groups: ParameterGroups,
  placement: Placement,
  names: readonly string[],
): Promise<{ overrides: Overrides; routes: Map<string, Layer> }> {
  const routes = placement.cluster
    ? await route(groups, placement, names)
    : new Map(names.map((n) => [n, { group: layersOf(placement)[0]!, meta: undefined }] as const));
  const byGroup = new Map<string, GroupRef>();
  for (const { group } of routes.values()) byGroup.set(groupLabel(group), group);
  const values = new Map<string, Map<string, string>>();
  await Promise.all([...byGroup].map(async ([label, group]) => values.set(label, await groups.userValues(group))));
  const overrides: Overrides = {};
  for (const name of names) {
    const value = values.get(groupLabel(routes.get(name)!.group))?.get(name);
    overrides[name] = value === undefined ? ({ set: false } satisfies Override) : { set: true, value };
  }
  return { overrides, routes };
}

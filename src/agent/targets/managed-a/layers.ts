// Which parameter group holds which parameter. An RDS instance has one layer, its DB parameter
// group. An Aurora writer has two: its own DB parameter group (instance-level parameters, which
// take precedence) and the cluster parameter group (cluster-level parameters). A parameter goes
// to the first group that lists it, so the split follows the engine's own parameter lists
// instead of a table that could go stale; only when the policy does not let the agent read the
// lists (rds:DescribeDBParameters) does it fall back to its own list of cluster-level ones.
//
// A custom DB parameter group on the writer is enough to tune the instance-level parameters;
// the cluster-level ones are excluded, with the reason, while the cluster layer cannot be
// written (a default.* cluster group, a group the agent cannot see, a policy without its modify).
import type { Capabilities } from './capabilities.ts';
import { AURORA_CLUSTER_LEVEL, groupLabel, type GroupRef, type ParameterGroups, type ParameterMeta } from './groups.ts';
import { isDefaultGroup, type Placement } from './topology.ts';
import type { Override, Overrides } from '../../../target/target.ts';

export interface Layer {
  group: GroupRef;
  /** What the group says about the parameter; undefined when no group lists it. */
  meta: ParameterMeta | undefined;
  /** Why the agent does not write this parameter here (a cluster-level one it cannot write). */
  excluded?: string;
}

/** The groups of a placement, the one that wins first (the cluster's only when it is known). */
export function layersOf(placement: Placement): GroupRef[] {
  const aurora = placement.instance.engine.startsWith('aurora');
  const instance: GroupRef = { kind: 'instance', name: placement.instance.parameterGroup.name, aurora };
  const clusterGroup = placement.cluster?.parameterGroup;
  return clusterGroup ? [instance, { kind: 'cluster', name: clusterGroup, aurora }] : [instance];
}

/** `default.aurora-postgresql15` → `aurora-postgresql15`. */
export function familyOf(defaultGroup: string): string {
  return defaultGroup.replace(/^default\./, '');
}

/** Why the agent cannot write the cluster layer of `placement` now, or null. */
export function clusterLayerProblem({ instance, cluster }: Placement, caps: Capabilities): string | null {
  if (!cluster) return null;
  const group = cluster.parameterGroup;
  if (group === null)
    return `the agent cannot see the DB cluster parameter group of cluster ${cluster.id} without rds:DescribeDBClusters (tuner-agent permissions --managed-a-cluster --extended adds it)`;
  if (isDefaultGroup(group))
    return (
      `the DB cluster parameter group ${group} of cluster ${cluster.id} is a default group, which Cloud A lets no one modify: ` +
      `create a custom DB cluster parameter group of family ${familyOf(group)}, attach it to ${cluster.id} (modify the cluster), then reboot its writer ${instance.id}`
    );
  if (!caps.allows('rds:ModifyDBClusterParameterGroup'))
    return 'the policy does not allow rds:ModifyDBClusterParameterGroup (tuner-agent permissions --managed-a-cluster --extended adds it)';
  return null;
}

export async function route(
  groups: ParameterGroups,
  placement: Placement,
  names: readonly string[],
  caps: Capabilities,
): Promise<Map<string, Layer>> {
  const layers = layersOf(placement);
  const metas = await Promise.all(layers.map((g) => groups.metadata(g)));
  const problem = clusterLayerProblem(placement, caps);
  const routes = new Map<string, Layer>();
  for (const name of names) {
    const at = metas.findIndex((m) => m.has(name));
    const layer: Layer = at < 0 ? { group: layers[0]!, meta: undefined } : { group: layers[at]!, meta: metas[at]!.get(name) };
    const clusterLevel = placement.cluster && (layer.group.kind === 'cluster' || (at < 0 && AURORA_CLUSTER_LEVEL.has(name)));
    if (clusterLevel && problem)
      layer.excluded = `${name} is a cluster-level parameter (set in the DB cluster parameter group, not in ${groupLabel(layers[0]!)}): ${problem}`;
    routes.set(name, layer);
  }
  return routes;
}

/** The override layer of `names`: the group's exact stored value when it is set there (`user`);
 * without the right to read the group, the value the server runs (pg_settings), as found. */
export async function readLayerValues(
  groups: ParameterGroups,
  placement: Placement,
  names: readonly string[],
  caps: Capabilities,
): Promise<{ overrides: Overrides; routes: Map<string, Layer> }> {
  const routes = placement.cluster
    ? await route(groups, placement, names, caps)
    : new Map(names.map((n) => [n, { group: layersOf(placement)[0]!, meta: undefined }] as const));
  const byGroup = new Map<string, GroupRef>();
  for (const { group } of routes.values()) byGroup.set(groupLabel(group), group);
  const values = new Map<string, Map<string, string>>();
  await Promise.all(
    [...byGroup].map(async ([label, group]) => {
      const held = await caps.use(
        groups.describeAction(group),
        () => groups.userValues(group),
        () => groups.foundValues(names),
      );
      values.set(label, held);
    }),
  );
  const overrides: Overrides = {};
  for (const name of names) {
    const label = groupLabel(routes.get(name)!.group);
    const value = values.get(label)?.get(name);
    overrides[name] = value === undefined ? ({ set: false } satisfies Override) : { set: true, value };
  }
  return { overrides, routes };
}

// --check for Cloud A: the instance (or the cluster's writer) is found, its parameter groups are
// custom, readable, modifiable and not shared, its size is known, and every call the agent
// reads with is permitted. Calls that change something (modify, reset, reboot) cannot be tried
// without changing something; when one is refused later, its error names the action. An
// optional action (beyond the spec's policy) that Cloud A refuses is one WARN line saying what
// the agent does without it.
import { catalogFor, type TuningMode } from '../../../knobs/index.ts';
import { managedAKinds } from './kinds.ts';
import { errorMessage } from '../../base/log.ts';
import { errorCodes, hasCode, isAccessDenied } from './aws.ts';
import { withoutLine, type Capabilities } from './capabilities.ts';
import { groupLabel, type ParameterGroups } from './groups.ts';
import { clusterLayerProblem, layersOf, type Layer } from './layers.ts';
import type { MetricsReader } from './metrics.ts';
import type { Placement } from './topology.ts';
import type { MachineInfo, PreflightCheck } from '../../../target/target.ts';
import { describeMachineInfo } from '../machine-size.ts';

export const POLICY_FIX =
  'attach the policy printed by tuner-agent permissions --managed-a to the role of this host or to the IAM user whose keys the agent uses';

export interface PreflightDeps {
  kind: 'managed-a' | 'managed-a-cluster';
  mode: TuningMode;
  allowRestart: boolean;
  resolve: () => Promise<Placement>;
  blockedReason: (placement: Placement) => string | null;
  sharedWith: (placement: Placement) => Promise<string[]>;
  machine: (placement: Placement) => Promise<MachineInfo>;
  groups: ParameterGroups;
  metrics: MetricsReader;
  caps: Capabilities;
  /** Where each parameter goes, and which are excluded (cluster-level ones it cannot write). */
  unwritable: (placement: Placement, names: readonly string[]) => Promise<Map<string, Layer>>;
}

const NETWORK_FIX = 'this host must reach the Cloud A API endpoints of the region over HTTPS (outbound 443, a proxy or VPC endpoints)';

function failed(name: string, err: unknown, fix?: string): PreflightCheck {
  const unreachable = errorCodes(err).some((c) => /^E[A-Z]+$/.test(c));
  const why = fix ?? (isAccessDenied(err) ? POLICY_FIX : unreachable ? NETWORK_FIX : undefined);
  return { name, ok: false, detail: errorMessage(err), ...(why && { fix: why }) };
}

function describePlacement({ instance, cluster }: Placement): string {
  const where = cluster ? `writer of cluster ${cluster.id}: ` : '';
  return (
    `${where}${instance.id}, ${instance.instanceClass}, ${instance.engine} ${instance.engineVersion}, ${instance.status}, ` +
    `Multi-AZ ${instance.multiAz ? 'yes' : 'no'}, Performance Insights ${instance.performanceInsights ? 'on' : 'off'}`
  );
}

export async function managedAPreflight(d: PreflightDeps): Promise<PreflightCheck[]> {
  const checks: PreflightCheck[] = [];
  const found = d.kind === 'managed-a-cluster' ? 'Cloud A: DB cluster and its writer instance found' : 'Cloud A: DB instance found';
  let placement: Placement;
  try {
    placement = await d.resolve();
  } catch (err) {
    const notFound = hasCode(err, 'DBInstanceNotFound', 'DBClusterNotFound');
    checks.push(
      failed(
        found,
        err,
        notFound
          ? 'set managed_a.DATABASE_IDENTIFIER to the DB instance identifier (for a cluster, its writer) and managed_a.REGION to its region'
          : undefined,
      ),
    );
    return checks;
  }
  checks.push({ name: found, ok: true, detail: describePlacement(placement) });
  if (placement.instance.status !== 'available') {
    checks.push({
      name: 'Cloud A: instance status',
      ok: false,
      severity: 'warning',
      detail: `${placement.instance.id} is ${placement.instance.status}`,
      fix: 'changes wait until the instance is available again',
    });
  }

  const blocked = d.blockedReason(placement);
  checks.push({
    name: 'parameter group is custom (not default.*)',
    ok: blocked === null,
    severity: 'warning',
    detail:
      blocked ??
      layersOf(placement)
        .map((g) => `${groupLabel(g)} is custom`)
        .join('; '),
    ...(blocked && {
      fix: 'attach a custom parameter group to the instance, then reboot it (docs/cloud-a.md); until then the agent applies no parameter changes and everything else keeps working',
    }),
  });

  const wanted = catalogFor(managedAKinds[d.kind]!.capabilities, d.mode).map((k) => k.name);
  for (const group of layersOf(placement)) {
    const name = `${groupLabel(group)} is readable`;
    try {
      const meta = await d.groups.metadata(group);
      const action = d.groups.describeAction(group);
      checks.push({
        name,
        ok: true,
        detail: d.caps.allows(action)
          ? `${meta.size} parameters`
          : `${meta.size} parameters, told by pg_settings (the policy does not allow ${action})`,
      });
    } catch (err) {
      checks.push(failed(name, err));
    }
  }
  if (placement.cluster) {
    const problem = clusterLayerProblem(placement, d.caps);
    try {
      const excluded = [...(await d.unwritable(placement, wanted)).entries()].filter(([, l]) => l.excluded).map(([n]) => n);
      checks.push({
        name: 'cluster-level parameters',
        ok: excluded.length === 0,
        severity: 'warning',
        detail:
          excluded.length === 0
            ? `tuned in ${placement.cluster.parameterGroup === null ? 'the DB cluster parameter group' : groupLabel({ kind: 'cluster', name: placement.cluster.parameterGroup })}`
            : `${excluded.join(', ')} not tuned (instance-level parameters are, in the writer's DB parameter group): ${problem}`,
      });
    } catch {
      // Reported by the readable checks above.
    }
  }
  try {
    const metas = await Promise.all(layersOf(placement).map((g) => d.groups.metadata(g)));
    // Cluster-level parameters the agent cannot write have their own line above.
    const routes = await d.unwritable(placement, wanted);
    const missing = wanted.filter((n) => !routes.get(n)?.excluded && !metas.some((m) => m.has(n)));
    const fixed = wanted.filter(
      (n) => metas.some((m) => m.get(n)?.modifiable === false) && !metas.some((m) => m.get(n)?.modifiable === true),
    );
    const problems = [...missing.map((n) => `${n} not listed`), ...fixed.map((n) => `${n} not modifiable`)];
    checks.push({
      name: 'tuned parameters are modifiable in the parameter group',
      ok: problems.length === 0,
      severity: 'warning',
      detail:
        problems.length === 0
          ? `all ${wanted.length} of ${d.mode} mode`
          : `${problems.join(', ')}: the agent cannot change ${problems.length === 1 ? 'it' : 'them'}`,
    });
  } catch {
    // Already reported by the readable checks above.
  }
  if (placement.instance.parameterGroup.applyStatus === 'pending-reboot') {
    checks.push({
      name: 'parameter group has nothing waiting for a reboot',
      ok: false,
      severity: 'warning',
      detail: `${placement.instance.parameterGroup.name} is pending-reboot`,
      fix: `the agent never reboots over changes it did not make: reboot ${placement.instance.id} at a good time so that restart-mode changes can be applied`,
    });
  }

  try {
    const others = await d.sharedWith(placement);
    checks.push({
      name: 'parameter group is used by this database only',
      ok: others.length === 0,
      severity: 'warning',
      detail: others.length === 0 ? 'not shared' : `also used by ${others.join('; ')}: the agent's changes apply to them too`,
      ...(others.length > 0 && {
        fix: 'give this database its own custom parameter group (one per database is recommended), attach it, then reboot',
      }),
    });
  } catch (err) {
    checks.push({
      name: 'parameter group is used by this database only',
      ok: false,
      severity: 'warning',
      detail: `could not be checked: ${errorMessage(err)}`,
    });
  }

  try {
    const info = await d.machine(placement);
    checks.push({
      name: 'machine size',
      ok: true,
      detail: describeMachineInfo(info),
    });
  } catch (err) {
    checks.push(failed('machine size', err));
  }

  try {
    const series = await d.metrics.cloudwatch(placement.instance);
    checks.push({
      name: `CloudWatch metrics (${d.metrics.cloudwatchAction})`,
      ok: true,
      detail: `${series.length} series with recent points`,
    });
  } catch (err) {
    checks.push(failed(`CloudWatch metrics (${d.metrics.cloudwatchAction})`, err));
  }
  if (placement.instance.performanceInsights && placement.instance.resourceId) {
    try {
      const series = await d.metrics.performanceInsights(placement.instance.resourceId);
      checks.push({
        name: 'Performance Insights metrics (pi:GetResourceMetrics)',
        ok: true,
        detail: `${series.length} series with recent points`,
      });
    } catch (err) {
      checks.push(failed('Performance Insights metrics (pi:GetResourceMetrics)', err));
    }
  } else {
    checks.push({
      name: 'Performance Insights metrics (pi:GetResourceMetrics)',
      ok: true,
      detail: 'Performance Insights is off for this instance: its metrics are not read',
    });
  }

  const optionalWrites = placement.cluster
    ? 'rds:ResetDBParameterGroup, rds:ModifyDBClusterParameterGroup, rds:ResetDBClusterParameterGroup'
    : 'rds:ResetDBParameterGroup';
  checks.push({
    name: 'apply rights',
    ok: true,
    detail:
      `rds:ModifyDBParameterGroup${d.allowRestart ? ' and rds:RebootDBInstance' : ''} cannot be tried without a change; if one is refused, the change fails with nothing kept and the error names the action. ` +
      `Optional, learned at the first change that needs ${placement.cluster ? 'them' : 'it'}: ${optionalWrites}; without ${placement.cluster ? 'them' : 'it'} the agent writes values instead of resets${placement.cluster ? ' and leaves cluster-level parameters alone' : ''}`,
  });
  for (const action of d.caps.refused()) {
    checks.push({
      name: `optional ${action}`,
      ok: false,
      severity: 'warning',
      detail: `not allowed by the policy: ${withoutLine(action)}`,
      fix: `nothing is needed to tune; to have it, use the policy of tuner-agent permissions --${d.kind} --extended`,
    });
  }
  if (d.allowRestart) {
    checks.push({
      name: 'restart mode: reboots',
      ok: true,
      detail: `the agent reboots ${placement.instance.id} (RebootDBInstance${placement.instance.multiAz ? ', without failover' : ''}) when a static parameter it changes needs it`,
    });
  }
  return checks;
}

// Cloud A's definition (AWS): an RDS for PostgreSQL instance (--managed-a) or the writer of an
// Aurora PostgreSQL cluster (--managed-a-cluster). The override layer is the attached DB
// parameter group (and, for a cluster, the cluster parameter group). See docs/cloud-a.md.
// Its files: target.ts (the Target), write.ts, machine.ts, metrics.ts, preflight.ts,
// permissions.ts, and Cloud A's own: aws.ts (clients), groups.ts, layers.ts, topology.ts,
// capabilities.ts (what this account's API allows), wait.ts (polls and busy retries).
//
// The AWS SDK clients weigh a few hundred milliseconds of start-up, so they are loaded only
// when a Cloud A target is made, not by every tuner-agent command.
import type { TargetDefinition } from '../../../target/definition.ts';
import { managedAKinds } from './kinds.ts';
import { managedAConfig } from './config.ts';

export const managedADefinition: TargetDefinition = {
  kinds: managedAKinds,
  config: managedAConfig,
  extendedPermissions: true,
  async create(kind, deps) {
    return (await import('./target.ts')).createManagedATarget({ ...deps, cluster: kind === 'managed-a-cluster' });
  },
  /** The policy (the document) and why each action is there (`note`, which the CLI writes to stderr). */
  async permissions({ kind, extended, note }) {
    const { managedAPolicyJson, managedAPolicyReasons } = await import('./permissions.ts');
    const options = { extended, cluster: kind === 'managed-a-cluster' };
    note(managedAPolicyReasons(options));
    return managedAPolicyJson(options);
  },
  peers(_kind, config, env) {
    const rds =
      env['AWS_ENDPOINT_URL_RDS'] ??
      env['AWS_ENDPOINT_URL'] ??
      `https://rds.${managedAConfig.of(config).region ?? 'us-east-1'}.amazonaws.com`;
    return [
      { name: "Cloud A's RDS API", url: rds },
      { name: 'instance metadata (credentials)', url: 'http://169.254.169.254/' },
    ];
  },
};

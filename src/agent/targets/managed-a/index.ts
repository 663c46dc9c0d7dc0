// Cloud A's definition (AWS): an RDS for PostgreSQL instance (--managed-a) or the writer of an
// Aurora PostgreSQL cluster (--managed-a-cluster). The override layer is the attached DB
// parameter group (and, for a cluster, the cluster parameter group). See docs/cloud-a.md.
// Its files: target.ts (the Target), write.ts, machine.ts, metrics.ts, preflight.ts,
// permissions.ts, and Cloud A's own: aws.ts (clients), groups.ts, layers.ts, topology.ts,
// capabilities.ts (what this account's API allows), wait.ts (polls and busy retries).
//
// The AWS SDK clients weigh a few hundred milliseconds of start-up, so they are loaded only
// when a Cloud A target is made, not by every tuner-agent command.
import type { TargetDefinition } from '../definition.ts';
import { managedAConfigKeys } from './config.ts';

const MASTER_USER = 'as the master user (it has rds_superuser, which creating the extension needs)';

export const managedADefinition: TargetDefinition = {
  kinds: {
    'managed-a': {
      label: 'Cloud A managed PostgreSQL instance',
      help: 'a Cloud A managed PostgreSQL instance (parameter group)',
      createsExtension: MASTER_USER,
      capabilities: {
        restart: { mode: 'allowed' },
        tunes: () => true,
        sharedBuffersMaxFraction: 0.4,
      },
    },
    'managed-a-cluster': {
      label: 'Cloud A managed PostgreSQL cluster (writer instance)',
      help: 'a Cloud A managed PostgreSQL cluster (its writer instance)',
      createsExtension: MASTER_USER,
      capabilities: {
        restart: { mode: 'allowed' },
        // Aurora writes pages and WAL through its own storage layer, so the checkpoint,
        // background writer and WAL settings do not do there what they do in PostgreSQL: they
        // are left out (to be confirmed against the engine's parameter list; leaving a knob out
        // is the safe direction). Its shared_buffers may take most of the memory (no double
        // buffering in the OS page cache).
        tunes: (knob) => !knob.storage,
        sharedBuffersMaxFraction: 0.8,
      },
    },
  },
  config: {
    section: 'managed_a',
    keys: managedAConfigKeys,
    allOrNone: [
      {
        keys: ['ACCESS_KEY_ID', 'SECRET_ACCESS_KEY'],
        targets: ['managed-a', 'managed-a-cluster'],
        why: 'an access key is its id and its secret together: set both, or neither to use the role attached to this host',
      },
    ],
  },
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
      env['AWS_ENDPOINT_URL_RDS'] ?? env['AWS_ENDPOINT_URL'] ?? `https://rds.${config.managedA.region ?? 'us-east-1'}.amazonaws.com`;
    return [
      { name: "Cloud A's RDS API", url: rds },
      { name: 'instance metadata (credentials)', url: 'http://169.254.169.254/' },
    ];
  },
};

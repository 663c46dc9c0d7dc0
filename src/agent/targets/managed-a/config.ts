// Cloud A's agent.yaml keys (section managed_a), with the spec's spelling.
import { compact, targetSection, type KeySpec } from '../../../target/config.ts';

export const managedAConfigKeys: readonly KeySpec[] = [
  {
    section: 'managed_a',
    key: 'ACCESS_KEY_ID',
    env: 'AGENT_CLOUDA_ACCESS_KEY_ID',
    kind: 'string',
    secret: true,
    requiredFor: [],
    help: 'access key id; leave unset on a host with an attached role',
  },
  {
    section: 'managed_a',
    key: 'SECRET_ACCESS_KEY',
    env: 'AGENT_CLOUDA_SECRET_ACCESS_KEY',
    kind: 'string',
    secret: true,
    requiredFor: [],
    help: 'secret access key; leave unset on a host with an attached role',
  },
  {
    section: 'managed_a',
    key: 'REGION',
    env: 'AGENT_CLOUDA_REGION',
    kind: 'string',
    secret: false,
    requiredFor: ['managed-a', 'managed-a-cluster'],
    help: 'region of the database, e.g. us-east-1',
  },
  {
    section: 'managed_a',
    key: 'DATABASE_IDENTIFIER',
    env: 'AGENT_MANAGEDA_DATABASE_IDENTIFIER',
    kind: 'string',
    secret: false,
    requiredFor: ['managed-a', 'managed-a-cluster'],
    help: 'DB instance identifier; for a cluster, the writer instance',
  },
];

export interface ManagedAConfig {
  accessKeyId?: string;
  secretAccessKey?: string;
  region?: string;
  databaseIdentifier?: string;
}

export const managedAConfig = targetSection<ManagedAConfig>(
  'managed_a',
  managedAConfigKeys,
  [
    {
      keys: ['ACCESS_KEY_ID', 'SECRET_ACCESS_KEY'],
      targets: ['managed-a', 'managed-a-cluster'],
      why: 'an access key is its id and its secret together: set both, or neither to use the role attached to this host',
    },
  ],
  (v) =>
    compact({
      accessKeyId: v.string('ACCESS_KEY_ID'),
      secretAccessKey: v.string('SECRET_ACCESS_KEY'),
      region: v.string('REGION'),
      databaseIdentifier: v.string('DATABASE_IDENTIFIER'),
    }),
);

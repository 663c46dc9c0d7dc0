// Cloud A's agent.yaml keys (section managed_a), with the spec's spelling.
import type { KeySpec } from '../../config/keys.ts';

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

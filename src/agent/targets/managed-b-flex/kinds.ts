// Cloud B's kinds: labels and capabilities (what the agent may tune there, whether it may
// restart), apart from index.ts so that the target's own modules can read them.
import type { TargetKindInfo } from '../../../target/definition.ts';
import { managedBFlexSetup } from './setup.ts';

export const managedBFlexKinds: Readonly<Record<string, TargetKindInfo>> = {
  'managed-b-flex': {
    label: 'Cloud B managed PostgreSQL flexible server',
    help: 'a Cloud B managed PostgreSQL flexible server',
    createsExtension: 'add pg_stat_statements to the server parameter azure.extensions (the extension allow-list), then as the admin user',
    setup: managedBFlexSetup,
    // Verified by default, against the public roots in Node's store.
    tls: { sslmode: 'verify-full' },
    capabilities: {
      restart: {
        mode: 'never',
        why: 'the agent does not restart flexible servers',
        refusal:
          'postgresql.allow_restart is true, but restart mode is not supported on Cloud B: --managed-b-flex tunes only parameters that take effect on a reload, and never restarts the flexible server; ' +
          'set postgresql.allow_restart: false in agent.yaml (or AGENT_POSTGRESQL_ALLOW_RESTART=false)',
      },
      tunes: (knob) => knob.spec,
      sharedBuffersMaxFraction: 0.4,
    },
  },
};

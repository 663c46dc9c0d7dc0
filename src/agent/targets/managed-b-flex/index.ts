// Cloud B's definition: an Azure Database for PostgreSQL flexible server. The override layer is
// the server's configurations (server parameters) with source user-override, written through
// Resource Manager; metrics come from Azure Monitor. Reload-only, always: the spec's 13
// parameters, and the agent never restarts the server (said once, in the capabilities below).
//   the target   target.ts
//   identity     identity.ts   (managed identity or service principal, endpoint)
//   API          api.ts        (clients, zod-checked answers, busy retries), errors.ts
//   machine      machine.ts + skus.ts
//   writes       write.ts      (all or nothing, pending restart undone)
//   readiness    ready.ts      (another's operation waited out before a change)
//   metrics      metrics.ts    preflight  preflight.ts
//   permissions  permissions.ts
//   Azure's own tuning  intelligent-tuning.ts
//
// The Azure SDK weighs about half a second of start-up that --version, --local and the binary
// should not pay: it is imported only when the target is made.
import type { TargetDefinition } from '../definition.ts';
import { managedBFlexConfigKeys } from './config.ts';

export const managedBFlexDefinition: TargetDefinition = {
  kinds: {
    'managed-b-flex': {
      label: 'Cloud B managed PostgreSQL flexible server',
      help: 'a Cloud B managed PostgreSQL flexible server',
      createsExtension:
        'add pg_stat_statements to the server parameter azure.extensions (the extension allow-list), then as the admin user',
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
  },
  config: {
    section: 'managed_b_flex',
    keys: managedBFlexConfigKeys,
    allOrNone: [
      {
        keys: ['CLOUDB_CLIENT_ID', 'CLOUDB_CLIENT_SECRET', 'CLOUDB_TENANT_ID'],
        targets: ['managed-b-flex'],
        why: 'a service principal is its appId, password and tenant together: set all three, or none to use the managed identity of this VM',
      },
    ],
  },
  extendedPermissions: false,
  async create(_kind, deps) {
    return (await import('./target.ts')).createManagedBFlexTarget(deps);
  },
  /** The custom role as JSON, then the setup steps as `#` lines; the scope comes from the
   * configuration when there is one (placeholders without). */
  async permissions({ config }) {
    return (await import('./permissions.ts')).managedBFlexPermissionsText(config());
  },
  peers: (_kind, config) => [
    { name: "Cloud B's Resource Manager", url: config.managedBFlex.resourceManagerEndpoint ?? 'https://management.azure.com' },
    { name: 'instance metadata (managed identity)', url: 'http://169.254.169.254/' },
  ],
};

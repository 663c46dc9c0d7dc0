// Cloud C's definition: a Google Cloud SQL for PostgreSQL instance. The override layer is the
// instance's database flags (settings.databaseFlags), written through the Cloud SQL Admin API v1;
// metrics come from Cloud Monitoring. See docs/cloud-c.md. Its files:
//   the target   target.ts          config  config.ts      kinds  kinds.ts
//   API          api.ts (clients, zod-checked answers, busy and quota retries), errors.ts
//   flags        flags.ts (Cloud SQL's flags and ranges)   writes  write.ts (read-modify-write)
//   machine      machine.ts (the tier)  metrics  metrics.ts  preflight  preflight.ts
//   permissions  permissions.ts  setup  setup.ts
//
// Google's clients are imported only when the target is made.
import type { TargetDefinition } from '../../../target/definition.ts';
import { managedCKinds } from './kinds.ts';
import { DEFAULT_ENDPOINTS, managedCConfig } from './config.ts';

export const managedCDefinition: TargetDefinition = {
  kinds: managedCKinds,
  config: managedCConfig,
  extendedPermissions: false,
  async create(_kind, deps) {
    return (await import('./target.ts')).createManagedCTarget(deps);
  },
  /** The custom role as JSON (the document); how to create and grant it as `#` notes. */
  async permissions({ config, note }) {
    const { managedCRoleJson, managedCSetupNotes } = await import('./permissions.ts');
    note(managedCSetupNotes(config()));
    return managedCRoleJson();
  },
  peers(_kind, config, env) {
    const c = managedCConfig.of(config);
    return [
      { name: "Cloud C's Cloud SQL Admin API", url: c.sqladminEndpoint ?? DEFAULT_ENDPOINTS.sqladmin },
      { name: "Cloud C's Cloud Monitoring API", url: c.monitoringEndpoint ?? DEFAULT_ENDPOINTS.monitoring },
      { name: "Cloud C's Resource Manager (permission test)", url: c.resourceManagerEndpoint ?? DEFAULT_ENDPOINTS.resourceManager },
      { name: 'metadata server (credentials)', url: `http://${env['GCE_METADATA_HOST'] ?? 'metadata.google.internal'}/` },
    ];
  },
};

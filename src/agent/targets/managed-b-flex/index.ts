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
import type { TargetDefinition } from '../../../target/definition.ts';
import { managedBFlexKinds } from './kinds.ts';
import { managedBFlexConfig } from './config.ts';

export const managedBFlexDefinition: TargetDefinition = {
  kinds: managedBFlexKinds,
  config: managedBFlexConfig,
  extendedPermissions: false,
  async create(_kind, deps) {
    return (await import('./target.ts')).createManagedBFlexTarget(deps);
  },
  /** The custom role as JSON (the document), and the setup steps as `#` lines (notes); the scope
   * comes from the configuration when there is one (placeholders without). */
  async permissions({ config, note }) {
    const { managedBFlexRoleJson, managedBFlexSetupSteps } = await import('./permissions.ts');
    const loaded = config();
    note(managedBFlexSetupSteps(loaded));
    return managedBFlexRoleJson(loaded);
  },
  peers: (_kind, config) => [
    { name: "Cloud B's Resource Manager", url: managedBFlexConfig.of(config).resourceManagerEndpoint ?? 'https://management.azure.com' },
    { name: 'instance metadata (managed identity)', url: 'http://169.254.169.254/' },
  ],
};

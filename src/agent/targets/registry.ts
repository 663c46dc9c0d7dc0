// Every target the agent knows, once. The CLI, the configuration, the setup page and the service
// find targets here; adding one is a folder (see docs/architecture.md, "Adding a target") and one
// line below.
import { TargetRegistry } from '../../target/registry.ts';
import { localDefinition } from './local/index.ts';
import { managedADefinition } from './managed-a/index.ts';
import { managedBFlexDefinition } from './managed-b-flex/index.ts';
import { managedCDefinition } from './managed-c/index.ts';
import { patroniDefinition } from './patroni/index.ts';

export { TargetRegistry };

export const TARGETS = new TargetRegistry([
  localDefinition,
  managedADefinition,
  managedBFlexDefinition,
  managedCDefinition,
  patroniDefinition,
]);

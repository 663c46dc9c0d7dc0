// Cloud A (AWS): an RDS for PostgreSQL instance (--managed-a) or the writer of an Aurora
// PostgreSQL cluster (--managed-a-cluster). The override layer is the attached DB parameter
// group (and, for a cluster, the cluster parameter group). See docs/cloud-a.md.
//
// The AWS SDK clients weigh a few hundred milliseconds of start-up, so they are loaded only
// when a Cloud A target is made, not by every tuner-agent command.
import { managedAPolicyJson, managedAPolicyReasons } from './permissions.ts';
import type { Target } from '../target.ts';
import type { ManagedADeps } from './target.ts';

export type { ManagedADeps };

export async function createManagedATarget(deps: ManagedADeps): Promise<Target> {
  const { createManagedATargetNow } = await import('./target.ts');
  return createManagedATargetNow(deps);
}

/** What `tuner-agent permissions --managed-a[-cluster] [--extended]` prints: the policy (stdout)
 * and why each action is there (`note`, which the command writes to stderr). */
export function managedAPermissions(options: { extended: boolean; cluster: boolean; note?: (text: string) => void }): string {
  options.note?.(managedAPolicyReasons(options));
  return managedAPolicyJson(options);
}

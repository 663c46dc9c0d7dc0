// Cloud A (AWS): an RDS for PostgreSQL instance (--managed-a) or the writer of an Aurora
// PostgreSQL cluster (--managed-a-cluster). The override layer is the attached DB parameter
// group (and, for a cluster, the cluster parameter group). See docs/cloud-a.md.
//
// The AWS SDK clients weigh a few hundred milliseconds of start-up, so they are loaded only
// when a Cloud A target is made, not by every tuner-agent command.
import { managedAPolicyJson } from './managed-a-permissions.ts';
import type { ManagedATimings } from './managed-a-wait.ts';
import type { Target, TargetDeps } from './target.ts';

export interface ManagedADeps extends TargetDeps {
  /** --managed-a-cluster: the target is the cluster's writer, found again on every call. */
  cluster: boolean;
  /** Poll intervals and time limits; the defaults suit Cloud A, tests shorten them. */
  timings?: Partial<ManagedATimings>;
}

export async function createManagedATarget(deps: ManagedADeps): Promise<Target> {
  const { createManagedATargetNow } = await import('./managed-a-target.ts');
  return createManagedATargetNow(deps);
}

/** What `tuner-agent permissions --managed-a` prints. */
export function managedAPermissions(): string {
  return managedAPolicyJson();
}

// The preflight's "machine size" line, the same for every target that knows its machine.
import { MiB } from '../../knobs/units.ts';
import type { MachineInfo } from './target.ts';

/** "7936 MB, 2 vCPUs (this host)" */
export function describeMachine(info: MachineInfo): string {
  return `${Math.round(info.machine.memoryBytes / MiB)} MB, ${info.machine.vcpus} vCPUs (${info.source})`;
}

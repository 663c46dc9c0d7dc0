// The preflight's "machine size" line, the same for every target that knows its machine.
import { describeMachine } from '../../knobs/index.ts';
import type { MachineInfo } from '../../target/target.ts';

/** "7.8 GiB RAM and 2 vCPUs (this host)": the catalog's words for a machine, and where they came from. */
export function describeMachineInfo(info: MachineInfo): string {
  return `${describeMachine(info.machine)} (${info.source})`;
}

// The machine a Patroni cluster's members run on: local.memory_mb and local.vcpus when set
// (every member is assumed the size of the leader, as Patroni's failover assumes too), else this
// host when the leader is on it, else unknown (the agent then asks for the keys).
import { availableParallelism, totalmem } from 'node:os';
import type { TargetAgentConfig } from '../../../target/config.ts';
import { errorMessage } from '../../base/log.ts';
import type { MachineInfo, PreflightCheck } from '../../../target/target.ts';
import { describeMachineInfo } from '../machine-size.ts';
import { MiB } from '../../../knobs/units.ts';
import { localConfig } from '../local/config.ts';

const LOOPBACK = /^(localhost|127\.\d+\.\d+\.\d+|::1|\[::1\])$/;

export function patroniMachine(config: Pick<TargetAgentConfig, 'targets'>, leaderHost: string | undefined): MachineInfo {
  const { memoryMb, vcpus } = localConfig.of(config);
  if (memoryMb !== undefined && vcpus !== undefined) {
    return { machine: { memoryBytes: memoryMb * MiB, vcpus }, source: 'agent.yaml local.memory_mb and local.vcpus' };
  }
  if (leaderHost !== undefined && (LOOPBACK.test(leaderHost) || leaderHost.startsWith('/'))) {
    return { machine: { memoryBytes: totalmem(), vcpus: availableParallelism() }, source: 'this host' };
  }
  throw new Error(
    `the leader ${leaderHost ?? '(unknown)'} is not this host, so its memory and vCPUs are unknown: set local.memory_mb and local.vcpus in agent.yaml (or AGENT_LOCAL_MEMORY_MB and AGENT_LOCAL_VCPUS) to the size of one member`,
  );
}

/** --check's line for the machine's size: where it comes from, or which keys to set. */
export function machineSizeCheck(config: Pick<TargetAgentConfig, 'targets'>, leaderHost: string | undefined): PreflightCheck {
  let info: MachineInfo;
  try {
    info = patroniMachine(config, leaderHost);
  } catch (err) {
    return { name: 'machine size', ok: false, detail: 'unknown', fix: errorMessage(err) };
  }
  return { name: 'machine size', ok: true, detail: describeMachineInfo(info) };
}

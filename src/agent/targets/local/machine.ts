// The local target's machine: the database's host is this host (a loopback address or a Unix
// socket), or agent.yaml says its size (local.memory_mb and local.vcpus).
import { availableParallelism, totalmem } from 'node:os';
import type { MachineInfo } from '../../../target/target.ts';
import { MiB } from '../../../knobs/units.ts';
import type { LocalConfig } from './config.ts';

const LOOPBACK = /^(localhost|127\.\d+\.\d+\.\d+|::1|\[::1\])$/;

export function isSameHost(host: string): boolean {
  return LOOPBACK.test(host) || host.startsWith('/');
}

export function localMachine(local: LocalConfig, host: string): Promise<MachineInfo> {
  const { memoryMb, vcpus } = local;
  if (memoryMb !== undefined && vcpus !== undefined) {
    return Promise.resolve({
      machine: { memoryBytes: memoryMb * MiB, vcpus },
      source: 'agent.yaml local.memory_mb and local.vcpus',
    });
  }
  if (isSameHost(host)) {
    return Promise.resolve({ machine: { memoryBytes: totalmem(), vcpus: availableParallelism() }, source: 'this host' });
  }
  return Promise.reject(
    new Error(
      `the database host ${host} is not this host, so its memory and vCPUs are unknown: set local.memory_mb and local.vcpus in agent.yaml (or AGENT_LOCAL_MEMORY_MB and AGENT_LOCAL_VCPUS)`,
    ),
  );
}

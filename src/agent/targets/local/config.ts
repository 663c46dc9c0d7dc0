// The local target's agent.yaml keys (section local). memory_mb and vcpus serve the clouds too,
// for a machine size their APIs cannot tell.
import { compact, targetSection, type KeySpec } from '../../../target/config.ts';

export const localConfigKeys: readonly KeySpec[] = [
  {
    section: 'local',
    key: 'restart_command',
    env: 'AGENT_LOCAL_RESTART_COMMAND',
    kind: 'string',
    secret: false,
    requiredFor: [],
    ours: true,
    help: 'shell command that restarts the local server, e.g. "pg_ctlcluster 15 main restart" (needed for restart mode with --local)',
  },
  {
    section: 'local',
    key: 'memory_mb',
    env: 'AGENT_LOCAL_MEMORY_MB',
    kind: 'positive-integer',
    secret: false,
    requiredFor: [],
    ours: true,
    help: "the database host's memory in MB, when the agent does not run on that host (also: the size of a Cloud B SKU the agent does not know, or of a Cloud A instance class with no EC2 instance type)",
  },
  {
    section: 'local',
    key: 'vcpus',
    env: 'AGENT_LOCAL_VCPUS',
    kind: 'positive-integer',
    secret: false,
    requiredFor: [],
    ours: true,
    help: "the database host's vCPUs, when the agent does not run on that host (also: a Cloud B SKU the agent does not know, or a Cloud A class with no EC2 instance type)",
  },
];

export interface LocalConfig {
  restartCommand?: string;
  memoryMb?: number;
  vcpus?: number;
}

/** Section local: the machine size serves the other targets too (their machine.ts). */
export const localConfig = targetSection<LocalConfig>('local', localConfigKeys, [], (v) =>
  compact({ restartCommand: v.string('restart_command'), memoryMb: v.number('memory_mb'), vcpus: v.number('vcpus') }),
);

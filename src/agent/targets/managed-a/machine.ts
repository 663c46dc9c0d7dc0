// The size of the instance: its DB instance class is an EC2 instance type with `db.` in front
// (db.m5.large → m5.large), whose vCPUs and memory EC2 DescribeInstanceTypes gives. Classes
// with no EC2 twin: Aurora Serverless v2 (db.serverless) is sized by its maximum capacity, and
// any other by local.memory_mb and local.vcpus when the operator sets them.
import { DescribeInstanceTypesCommand, type EC2Client, type _InstanceType } from '@aws-sdk/client-ec2';
import type { Machine } from '../../../knobs/index.ts';
import { awsCall, hasCode } from './aws.ts';
import type { Placement } from './topology.ts';
import type { MachineInfo } from '../../../target/target.ts';
import { GiB, MiB } from '../../../knobs/units.ts';
import type { LocalConfig } from '../local/config.ts';

/** An Aurora capacity unit is about 2 GiB of memory with the CPU that goes with it. */
const GIB_PER_ACU = 2;
/** AWS pairs memory-optimized instances' 8 GiB with one vCPU; an ACU is a quarter of that. */
const ACU_PER_VCPU = 4;

export const SERVERLESS_CLASS = 'db.serverless';

export class MachineSizer {
  readonly #ec2: EC2Client;
  readonly #fallback: LocalConfig;
  /** EC2 instance types do not change: each is asked for once. */
  readonly #types = new Map<string, Machine | null>();

  constructor(ec2: EC2Client, fallback: LocalConfig) {
    this.#ec2 = ec2;
    this.#fallback = fallback;
  }

  async size({ instance, cluster }: Placement): Promise<MachineInfo> {
    const storage = instance.storageBytes === undefined ? {} : { storageBytes: instance.storageBytes };
    const cls = instance.instanceClass;
    if (cls === SERVERLESS_CLASS) {
      const scaling = cluster?.serverless;
      if (scaling) {
        const memoryBytes = Math.max(scaling.maxAcu * GIB_PER_ACU * GiB, 512 * MiB);
        const vcpus = Math.max(1, Math.ceil(scaling.maxAcu / ACU_PER_VCPU));
        return {
          machine: { memoryBytes, vcpus, ...storage },
          source: `${cls}: its maximum capacity of ${scaling.maxAcu} ACU × ${GIB_PER_ACU} GiB (vCPUs estimated as one per ${ACU_PER_VCPU} ACU)`,
        };
      }
    }
    const type = cls.replace(/^db\./, '');
    const known = cls === SERVERLESS_CLASS ? null : await this.#ec2Type(type);
    if (known) return { machine: { ...known, ...storage }, source: `EC2 DescribeInstanceTypes ${type} (for ${cls})` };
    const { memoryMb, vcpus } = this.#fallback;
    if (memoryMb !== undefined && vcpus !== undefined) {
      return {
        machine: { memoryBytes: memoryMb * MiB, vcpus, ...storage },
        source: `agent.yaml local.memory_mb and local.vcpus (${cls} has no EC2 instance type)`,
      };
    }
    throw new Error(
      `the instance class ${cls} has no EC2 instance type to read its memory and vCPUs from: ` +
        'set local.memory_mb and local.vcpus in agent.yaml (or AGENT_LOCAL_MEMORY_MB and AGENT_LOCAL_VCPUS) to its size',
    );
  }

  async #ec2Type(type: string): Promise<Machine | null> {
    const cached = this.#types.get(type);
    if (cached !== undefined) return cached;
    let machine: Machine | null = null;
    try {
      const out = await awsCall('ec2:DescribeInstanceTypes', () =>
        this.#ec2.send(new DescribeInstanceTypesCommand({ InstanceTypes: [type as _InstanceType] })),
      );
      const info = out.InstanceTypes?.[0];
      const mib = info?.MemoryInfo?.SizeInMiB;
      const vcpus = info?.VCpuInfo?.DefaultVCpus;
      if (mib && vcpus) machine = { memoryBytes: mib * MiB, vcpus };
    } catch (err) {
      if (!hasCode(err, 'InvalidInstanceType')) throw err;
    }
    this.#types.set(type, machine);
    return machine;
  }
}

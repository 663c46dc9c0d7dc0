// The EC2 instance types behind the DB instance classes the fake knows (db.<type>), with the
// figures EC2 DescribeInstanceTypes reports for them: vCPUs, cores, threads per core, memory.
// Sources: the EC2 instance type specifications
// (https://docs.aws.amazon.com/ec2/latest/instancetypes/gp.html, general purpose: M5, M6g, M6i,
// M7g, T3, T4g; https://docs.aws.amazon.com/ec2/latest/instancetypes/mo.html, memory optimized:
// R5, R6g, R6i, R7g) and the VCpuInfo shape of the EC2 API reference
// (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_VCpuInfo.html).
// Graviton processors (the `g` families) have no simultaneous multithreading: one thread per
// core, a vCPU per core; the Intel families run two threads per core.

export interface InstanceType {
  vcpus: number;
  cores: number;
  threadsPerCore: number;
  memoryMiB: number;
  architecture: 'x86_64' | 'arm64';
}

const VCPUS_BY_SIZE: Readonly<Record<string, number>> = {
  medium: 1,
  large: 2,
  xlarge: 4,
  '2xlarge': 8,
  '4xlarge': 16,
  '8xlarge': 32,
  '12xlarge': 48,
  '16xlarge': 64,
  '24xlarge': 96,
  '32xlarge': 128,
};

/** M and R families: memory grows with the vCPUs (4 GiB a vCPU for M, 8 GiB for R). */
function family(name: string, gibPerVcpu: number, graviton: boolean, sizes: readonly string[]): Array<[string, InstanceType]> {
  return sizes.map((size) => {
    const vcpus = VCPUS_BY_SIZE[size]!;
    const threadsPerCore = graviton ? 1 : 2;
    return [
      `${name}.${size}`,
      {
        vcpus,
        cores: vcpus / threadsPerCore,
        threadsPerCore,
        memoryMiB: vcpus * gibPerVcpu * 1024,
        architecture: graviton ? 'arm64' : 'x86_64',
      },
    ];
  });
}

const INTEL_SIZES = ['large', 'xlarge', '2xlarge', '4xlarge', '8xlarge', '12xlarge', '16xlarge', '24xlarge'];
const GRAVITON_SIZES = ['medium', 'large', 'xlarge', '2xlarge', '4xlarge', '8xlarge', '12xlarge', '16xlarge'];

/** Burstable T3 (Intel) and T4g (Graviton): two vCPUs up to large, memory not tied to them. */
function burstable(name: string, graviton: boolean): Array<[string, InstanceType]> {
  const sizes: Array<[string, number, number]> = [
    ['nano', 2, 512],
    ['micro', 2, 1024],
    ['small', 2, 2048],
    ['medium', 2, 4096],
    ['large', 2, 8192],
    ['xlarge', 4, 16384],
    ['2xlarge', 8, 32768],
  ];
  return sizes.map(([size, vcpus, memoryMiB]) => {
    const threadsPerCore = graviton ? 1 : 2;
    return [
      `${name}.${size}`,
      { vcpus, cores: vcpus / threadsPerCore, threadsPerCore, memoryMiB, architecture: graviton ? 'arm64' : 'x86_64' },
    ];
  });
}

/** EC2 instance types the fake knows (the DB classes are these with `db.` in front). */
export const INSTANCE_TYPES: Readonly<Record<string, InstanceType>> = Object.fromEntries([
  ...family('m5', 4, false, INTEL_SIZES),
  ...family('m6i', 4, false, [...INTEL_SIZES, '32xlarge']),
  ...family('m6g', 4, true, GRAVITON_SIZES),
  ...family('m7g', 4, true, GRAVITON_SIZES),
  ...family('r5', 8, false, INTEL_SIZES),
  ...family('r6i', 8, false, [...INTEL_SIZES, '32xlarge']),
  ...family('r6g', 8, true, GRAVITON_SIZES),
  ...family('r7g', 8, true, GRAVITON_SIZES),
  ...burstable('t3', false),
  ...burstable('t4g', true),
]);

// EC2 DescribeInstanceTypes, answering in EC2's XML (lower-case element names, `item` members),
// with the figures of instance-types.ts
// (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_DescribeInstanceTypes.html).
import { FakeAwsError } from './cloud.ts';
import { INSTANCE_TYPES } from './instance-types.ts';
import type { Form, XmlObject } from './wire-query.ts';

export function handleEc2(action: string, form: Form): XmlObject {
  if (action !== 'DescribeInstanceTypes')
    throw new FakeAwsError('InvalidAction', `The action ${action} is not valid for this web service.`);
  const asked = [...form.entries()].filter(([k]) => /^InstanceType\.\d+$/.test(k)).map(([, v]) => v);
  const unknown = asked.filter((t) => !INSTANCE_TYPES[t]);
  if (unknown.length > 0) {
    throw new FakeAwsError('InvalidInstanceType', `The following supplied instance types do not exist: [${unknown.join(', ')}]`);
  }
  return {
    instanceTypeSet: {
      item: asked.map((t) => {
        const type = INSTANCE_TYPES[t]!;
        return {
          instanceType: t,
          currentGeneration: true,
          processorInfo: { supportedArchitectures: { item: [type.architecture] } },
          vCpuInfo: { defaultVCpus: type.vcpus, defaultCores: type.cores, defaultThreadsPerCore: type.threadsPerCore },
          memoryInfo: { sizeInMiB: type.memoryMiB },
        };
      }),
    },
  };
}

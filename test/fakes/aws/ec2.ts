// EC2 DescribeInstanceTypes, answering in EC2's XML (lower-case element names, `item` members).
import { FakeAwsError, INSTANCE_TYPES } from './cloud.ts';
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
      item: asked.map((t) => ({
        instanceType: t,
        currentGeneration: true,
        vCpuInfo: {
          defaultVCpus: INSTANCE_TYPES[t]!.vcpus,
          defaultCores: Math.max(1, INSTANCE_TYPES[t]!.vcpus / 2),
          defaultThreadsPerCore: 2,
        },
        memoryInfo: { sizeInMiB: INSTANCE_TYPES[t]!.memoryMiB },
      })),
    },
  };
}

// The RDS actions the agent uses, answering in RDS's XML (shapes as the SDK's schemas read them:
// lists of <DBInstance>, <DBParameterGroup>, <Parameter>, <DBClusterMember> members).
import { FakeAwsError, type FakeCloud, type FakeGroup, type FakeInstance, type GroupKind, type ParameterChange } from './cloud.ts';
import { formList, type Form, type XmlObject } from './wire-query.ts';

function required(form: Form, key: string): string {
  const value = form.get(key);
  if (!value) throw new FakeAwsError('MissingParameter', `The request must contain the parameter ${key}`);
  return value;
}

// Markers are opaque to the caller, as RDS's are; one the fake did not hand out is refused with
// InvalidParameterValue, RDS's error for "an invalid or out-of-range value" of a parameter
// (https://docs.aws.amazon.com/AmazonRDS/latest/APIReference/API_DescribeDBParameters.html,
// Marker: "a pagination token provided by a previous request";
// https://docs.aws.amazon.com/AmazonRDS/latest/APIReference/CommonErrors.html).
const MARKER = /^fake-rds-marker:(\d+)$/;
const markerFor = (offset: number) => Buffer.from(`fake-rds-marker:${offset}`).toString('base64url');

function markerOffset(marker: string, total: number): number {
  const offset = Number(MARKER.exec(Buffer.from(marker, 'base64url').toString('utf8'))?.[1] ?? NaN);
  if (!Number.isInteger(offset) || offset > total) throw new FakeAwsError('InvalidParameterValue', `Invalid marker: ${marker}`);
  return offset;
}

function page<T>(form: Form, items: readonly T[]): { items: T[]; marker: string | undefined } {
  const max = form.has('MaxRecords') ? Number(form.get('MaxRecords')) : 100;
  if (!Number.isInteger(max) || max < 20 || max > 100)
    throw new FakeAwsError('InvalidParameterValue', 'MaxRecords must be between 20 and 100.');
  const marker = form.get('Marker');
  const start = marker === undefined ? 0 : markerOffset(marker, items.length);
  const end = start + max;
  return { items: items.slice(start, end), marker: end < items.length ? markerFor(end) : undefined };
}

/**
 * DescribeDBInstances' Filters (`Filters.Filter.1.Name=db-cluster-id&Filters.Filter.1.Values.Value.1=…`):
 * an instance passes when, for every filter, one of its values matches; the names RDS
 * documents for it are db-cluster-id, db-instance-id (identifiers or ARNs), dbi-resource-id
 * and engine (https://docs.aws.amazon.com/AmazonRDS/latest/APIReference/API_DescribeDBInstances.html,
 * Filters); the fake refuses another name with InvalidParameterValue.
 */
function instanceFilter(form: Form): (i: FakeInstance) => boolean {
  const arnId = (v: string) => v.replace(/^arn:aws:rds:[^:]*:\d+:(?:db|cluster):/, '');
  const fields: Record<string, (i: FakeInstance) => string | undefined> = {
    'db-cluster-id': (i) => i.clusterId,
    'db-instance-id': (i) => i.id,
    'dbi-resource-id': (i) => i.resourceId,
    engine: (i) => i.engine,
  };
  const filters = formList(form, 'Filters.Filter').map((f) => {
    const name = f['Name'] ?? '';
    const field = fields[name];
    if (!field) throw new FakeAwsError('InvalidParameterValue', `Unrecognized filter name: ${name}`);
    const values = Object.entries(f)
      .filter(([k]) => k.startsWith('Values.'))
      .map(([, v]) => (name.endsWith('-id') ? arnId(v) : v));
    if (values.length === 0) throw new FakeAwsError('InvalidParameterValue', `The filter ${name} needs at least one value`);
    return { field, values };
  });
  return (i) => filters.every(({ field, values }) => values.includes(field(i) ?? ''));
}

function instanceXml(cloud: FakeCloud, i: FakeInstance): XmlObject {
  return {
    DBInstanceIdentifier: i.id,
    DBInstanceClass: i.instanceClass,
    Engine: i.engine,
    EngineVersion: i.engineVersion,
    DBInstanceStatus: i.status,
    Endpoint: { Address: `${i.id}.fake.rds.local`, Port: cloud.engine.cluster.port },
    AllocatedStorage: i.engine === 'aurora-postgresql' ? 1 : i.allocatedStorageGiB,
    MultiAZ: i.multiAz,
    DbiResourceId: i.resourceId,
    PerformanceInsightsEnabled: i.performanceInsights,
    DBClusterIdentifier: i.clusterId,
    DBParameterGroups: { DBParameterGroup: [{ DBParameterGroupName: i.groupName, ParameterApplyStatus: i.holder.status }] },
  };
}

function parametersXml(group: FakeGroup, form: Form): XmlObject {
  const source = form.get('Source');
  const all = [...group.parameters.values()]
    .map((p) => {
      const src = p.userValue !== undefined ? 'user' : p.systemValue !== undefined ? 'system' : 'engine-default';
      return {
        ParameterName: p.name,
        ParameterValue: p.userValue ?? p.systemValue ?? p.engineDefault,
        Description: p.description,
        Source: src,
        ApplyType: p.applyType,
        DataType: p.dataType,
        AllowedValues: p.allowedValues,
        IsModifiable: p.modifiable,
        MinimumEngineVersion: `${group.family.replace(/\D/g, '')}.0`,
        ApplyMethod: 'pending-reboot',
      };
    })
    .filter((p) => source === undefined || p.Source === source);
  const { items, marker } = page(form, all);
  return { Parameters: { Parameter: items }, Marker: marker };
}

/**
 * The parameters of a modify or reset call. Each needs its ApplyMethod: "at least one parameter
 * name, value, and application method must be supplied" (ModifyDBParameterGroup), "to reset
 * specific parameters, provide a list of ParameterName and ApplyMethod" (ResetDBParameterGroup)
 * (https://docs.aws.amazon.com/AmazonRDS/latest/APIReference/API_ModifyDBParameterGroup.html,
 * https://docs.aws.amazon.com/AmazonRDS/latest/APIReference/API_ResetDBParameterGroup.html).
 * RDS documents the requirement, not the error code of a parameter sent without it: the fake
 * answers InvalidParameterCombination, the code RDS gives an apply method that does not fit
 * its parameter ("cannot use immediate apply method for static parameter").
 */
function changes(form: Form, reset: boolean): ParameterChange[] {
  return formList(form, 'Parameters.Parameter').map((p) => {
    const name = p['ParameterName'];
    if (!name) throw new FakeAwsError('InvalidParameterValue', 'ParameterName is required');
    if (!reset && p['ParameterValue'] === undefined)
      throw new FakeAwsError('InvalidParameterValue', `ParameterValue is required for ${name}`);
    const method = p['ApplyMethod'];
    if (!method) throw new FakeAwsError('InvalidParameterCombination', `An apply method must be specified for parameter ${name}`);
    return { name, value: reset ? undefined : p['ParameterValue'], method };
  });
}

function reset(cloud: FakeCloud, kind: GroupKind, name: string, form: Form): void {
  const all = form.get('ResetAllParameters');
  const list = changes(form, true);
  // As on Cloud A: leaving ResetAllParameters out resets the whole group.
  if (all === 'true' || (all === undefined && list.length === 0)) {
    if (list.length > 0)
      throw new FakeAwsError('InvalidParameterCombination', 'Specify either ResetAllParameters or a list of parameters, not both.');
    cloud.resetAll(kind, name);
    return;
  }
  cloud.changeGroup(kind, name, list);
}

export function handleRds(cloud: FakeCloud, action: string, form: Form): XmlObject {
  switch (action) {
    case 'DescribeDBInstances': {
      const id = form.get('DBInstanceIdentifier');
      if (id) return { DBInstances: { DBInstance: [instanceXml(cloud, cloud.instance(id))] } };
      const { items, marker } = page(form, [...cloud.instances.values()].filter(instanceFilter(form)));
      return { DBInstances: { DBInstance: items.map((i) => instanceXml(cloud, i)) }, Marker: marker };
    }
    case 'DescribeDBClusters': {
      const id = form.get('DBClusterIdentifier');
      const { items, marker } = id ? { items: [cloud.cluster(id)], marker: undefined } : page(form, [...cloud.clusters.values()]);
      return {
        DBClusters: {
          DBCluster: items.map((c) => ({
            DBClusterIdentifier: c.id,
            Status: 'available',
            Engine: 'aurora-postgresql',
            DBClusterParameterGroup: c.groupName,
            DBClusterMembers: {
              DBClusterMember: c.members.map((m) => ({
                DBInstanceIdentifier: m.id,
                IsClusterWriter: m.writer,
                DBClusterParameterGroupStatus: m.holder.status,
                PromotionTier: 1,
              })),
            },
            ServerlessV2ScalingConfiguration: c.serverless && { MinCapacity: c.serverless.min, MaxCapacity: c.serverless.max },
          })),
        },
        Marker: marker,
      };
    }
    case 'DescribeDBParameters':
      return parametersXml(cloud.group('instance', required(form, 'DBParameterGroupName')), form);
    case 'DescribeDBClusterParameters':
      return parametersXml(cloud.group('cluster', required(form, 'DBClusterParameterGroupName')), form);
    case 'ModifyDBParameterGroup': {
      const name = required(form, 'DBParameterGroupName');
      cloud.changeGroup('instance', name, changes(form, false));
      return { DBParameterGroupName: name };
    }
    case 'ModifyDBClusterParameterGroup': {
      const name = required(form, 'DBClusterParameterGroupName');
      cloud.changeGroup('cluster', name, changes(form, false));
      return { DBClusterParameterGroupName: name };
    }
    case 'ResetDBParameterGroup': {
      const name = required(form, 'DBParameterGroupName');
      reset(cloud, 'instance', name, form);
      return { DBParameterGroupName: name };
    }
    case 'ResetDBClusterParameterGroup': {
      const name = required(form, 'DBClusterParameterGroupName');
      reset(cloud, 'cluster', name, form);
      return { DBClusterParameterGroupName: name };
    }
    // RDS answers a reboot with the instance already `rebooting`, whatever DescribeDBInstances
    // shows a moment later (https://docs.aws.amazon.com/AmazonRDS/latest/APIReference/API_RebootDBInstance.html,
    // and the CLI example of reboot-db-instance there: "DBInstanceStatus": "rebooting").
    case 'RebootDBInstance':
      return { DBInstance: { ...instanceXml(cloud, cloud.reboot(required(form, 'DBInstanceIdentifier'))), DBInstanceStatus: 'rebooting' } };
    default:
      throw new FakeAwsError('InvalidAction', `The action ${action} is not valid for this web service.`);
  }
}

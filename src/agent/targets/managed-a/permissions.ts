// The Cloud A permission policy: the spec's five statements (its Sids, AWS's real action names)
// plus the few calls the agent needs beyond them, each in the statement where it fits. Every
// call the agent makes names one of these actions, so the policy and the code cannot drift
// apart, and a refused call can say which action to allow. docs/cloud-a.md explains each one.

export const POLICY_VERSION = '2012-10-17';

/** Every Cloud A action the agent calls, by statement. */
const STATEMENT_ACTIONS = {
  DescribeInstanceTypes: ['ec2:DescribeInstanceTypes'],
  DescribeAndModifyDBInstance: [
    'rds:DescribeDBInstances',
    // Ours: the writer of a cluster (--managed-a-cluster) and its cluster parameter group.
    'rds:DescribeDBClusters',
  ],
  GetDBMetrics: [
    'cloudwatch:GetMetricStatistics',
    // Ours: one GetMetricData call reads all the series GetMetricStatistics reads one by one.
    'cloudwatch:GetMetricData',
    'pi:GetResourceMetrics',
  ],
  ModifyDBParameterGroup: [
    'rds:ModifyDBParameterGroup',
    // Ours: apply types, allowed values and current values of the group's parameters.
    'rds:DescribeDBParameters',
    // Ours: returning a parameter to "not set" (the engine or system default) on revert.
    'rds:ResetDBParameterGroup',
    // Ours, for --managed-a-cluster: the same three on the cluster parameter group.
    'rds:ModifyDBClusterParameterGroup',
    'rds:DescribeDBClusterParameters',
    'rds:ResetDBClusterParameterGroup',
  ],
  RebootDBInstance: ['rds:RebootDBInstance'],
} as const;

type StatementActions = typeof STATEMENT_ACTIONS;
export type PolicySid = keyof StatementActions;
export type AwsAction = StatementActions[PolicySid][number];

export interface PolicyStatement {
  Sid: PolicySid;
  Effect: 'Allow';
  Action: AwsAction[];
  Resource: string;
}

export interface PolicyDocument {
  Version: typeof POLICY_VERSION;
  Statement: PolicyStatement[];
}

/** The policy document; `Resource` is `*` unless narrowed by the operator (docs/cloud-a.md). */
export function policyDocument(): PolicyDocument {
  return {
    Version: POLICY_VERSION,
    Statement: (Object.keys(STATEMENT_ACTIONS) as PolicySid[]).map((sid) => ({
      Sid: sid,
      Effect: 'Allow',
      Action: [...STATEMENT_ACTIONS[sid]],
      Resource: '*',
    })),
  };
}

/** What `tuner-agent permissions --managed-a` prints: the policy as JSON. */
export function managedAPolicyJson(): string {
  return `${JSON.stringify(policyDocument(), null, 2)}\n`;
}

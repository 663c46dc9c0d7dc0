// The Cloud A permission policy. By default the spec's document: its five statements, its Sids,
// with AWS's real action names; that is enough to tune. The actions beyond it are optional:
// each is used when the policy grants it and, when Cloud A refuses it (AccessDenied), the agent
// does without it (capabilities.ts) and --check says what that costs. `permissions --extended`
// prints the spec's document with them added, each in the statement where it fits. Every call
// the agent makes names one of these actions, so the policy and the code cannot drift apart.

export const POLICY_VERSION = '2012-10-17';

/** The spec's five statements (Cloud A permission policy), the actions named as AWS names them. */
const SPEC_STATEMENTS = {
  DescribeInstanceTypes: ['ec2:DescribeInstanceTypes'],
  DescribeAndModifyDBInstance: ['rds:DescribeDBInstances'],
  GetDBMetrics: ['cloudwatch:GetMetricStatistics', 'pi:GetResourceMetrics'],
  ModifyDBParameterGroup: ['rds:ModifyDBParameterGroup'],
  RebootDBInstance: ['rds:RebootDBInstance'],
} as const;

export type PolicySid = keyof typeof SPEC_STATEMENTS;
export type RequiredAction = (typeof SPEC_STATEMENTS)[PolicySid][number];

export interface OptionalActionInfo {
  /** The statement of the extended document it is added to. */
  sid: PolicySid;
  /** What the action gives the agent. */
  adds: string;
  /** What the agent does without it: the one WARN line of --check when Cloud A refuses it. */
  without: string;
  /** Only a cluster (--managed-a-cluster) calls it. */
  clusterOnly: boolean;
}

/** The actions beyond the spec's document: what each adds, and the fallback without it. */
export const OPTIONAL_ACTIONS = {
  'rds:DescribeDBClusters': {
    sid: 'DescribeAndModifyDBInstance',
    adds: "finds the cluster's current writer and its DB cluster parameter group, so the agent follows a failover and can tune cluster-level parameters",
    without:
      "the writer is the instance the connection reaches while pg_is_in_recovery() is false, as Aurora's aurora_db_instance_identifier() names it (DATABASE_IDENTIFIER where that function is missing); the cluster parameter group is not seen, so cluster-level parameters are not tuned and a group shared with other clusters is not noticed",
    clusterOnly: true,
  },
  'cloudwatch:GetMetricData': {
    sid: 'GetDBMetrics',
    adds: 'reads all CloudWatch series in one call',
    without: 'CloudWatch metrics are read with cloudwatch:GetMetricStatistics, one call per series (9 calls instead of 1)',
    clusterOnly: false,
  },
  'rds:DescribeDBParameters': {
    sid: 'ModifyDBParameterGroup',
    adds: "reads the DB parameter group's own values, apply types, allowed values and modifiability",
    without:
      "current values come from pg_settings, and apply types and allowed values from pg_settings too; the revert writes the values found rather than restoring the group's own spelling such as {DBInstanceClassMemory/32768} or leaving a parameter unset",
    clusterOnly: false,
  },
  'rds:ResetDBParameterGroup': {
    sid: 'ModifyDBParameterGroup',
    adds: 'returns a parameter to "not set" (the engine or system default) on revert',
    without:
      'a parameter that was not set before is reverted by writing the value it had (ModifyDBParameterGroup), so it stays set in the group',
    clusterOnly: false,
  },
  'rds:ModifyDBClusterParameterGroup': {
    sid: 'ModifyDBParameterGroup',
    adds: 'changes cluster-level parameters in a custom DB cluster parameter group',
    without: 'cluster-level parameters are not tuned (instance-level ones are, in the writer DB parameter group)',
    clusterOnly: true,
  },
  'rds:DescribeDBClusterParameters': {
    sid: 'ModifyDBParameterGroup',
    adds: 'reads the DB cluster parameter group: which parameters are cluster-level, their values and apply types',
    without:
      "which parameters are cluster-level comes from the agent's own list of Aurora PostgreSQL's cluster-level parameters, and their values from pg_settings",
    clusterOnly: true,
  },
  'rds:ResetDBClusterParameterGroup': {
    sid: 'ModifyDBParameterGroup',
    adds: 'returns a cluster-level parameter to "not set" on revert',
    without: 'a cluster-level parameter that was not set before is reverted by writing the value it had',
    clusterOnly: true,
  },
} as const satisfies Record<string, OptionalActionInfo>;

export type OptionalAction = keyof typeof OPTIONAL_ACTIONS;
export type AwsAction = RequiredAction | OptionalAction;

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

export function isOptionalAction(action: string): action is OptionalAction {
  return Object.hasOwn(OPTIONAL_ACTIONS, action);
}

/** The optional actions a target kind calls. */
export function optionalActionsFor(cluster: boolean): OptionalAction[] {
  return (Object.keys(OPTIONAL_ACTIONS) as OptionalAction[]).filter((a) => cluster || !OPTIONAL_ACTIONS[a].clusterOnly);
}

/**
 * The policy document; `Resource` is `*` unless narrowed by the operator (docs/cloud-a.md).
 * `extended` adds the optional actions (those of a cluster only with `cluster`).
 */
export function policyDocument(options: { extended?: boolean; cluster?: boolean } = {}): PolicyDocument {
  const extra = options.extended ? optionalActionsFor(options.cluster ?? false) : [];
  return {
    Version: POLICY_VERSION,
    Statement: (Object.keys(SPEC_STATEMENTS) as PolicySid[]).map((sid) => ({
      Sid: sid,
      Effect: 'Allow',
      Action: [...SPEC_STATEMENTS[sid], ...extra.filter((a) => OPTIONAL_ACTIONS[a].sid === sid)],
      Resource: '*',
    })),
  };
}

/** What `tuner-agent permissions --managed-a[-cluster] [--extended]` prints: the policy as JSON. */
export function managedAPolicyJson(options: { extended?: boolean; cluster?: boolean } = {}): string {
  return `${JSON.stringify(policyDocument(options), null, 2)}\n`;
}

/** Why each action is in the document, one line each: JSON carries no comments, so these go
 * to the terminal (stderr) while the document goes to stdout, ready for a file. */
export function managedAPolicyReasons(options: { extended?: boolean; cluster?: boolean } = {}): string {
  const required: Record<RequiredAction, string> = {
    'ec2:DescribeInstanceTypes': 'the memory and vCPUs of the instance class, which bound every memory parameter',
    'rds:DescribeDBInstances': 'the instance, its class, status, parameter group and apply status (and, for a cluster, its cluster)',
    'cloudwatch:GetMetricStatistics': 'CloudWatch metrics (CPU, freeable memory, IOPS, latency) for the guardrails',
    'pi:GetResourceMetrics': 'Performance Insights metrics (database load), when it is on',
    'rds:ModifyDBParameterGroup': 'writes the tuned values to the DB parameter group, and writes them back on revert',
    'rds:RebootDBInstance': 'restart mode only (postgresql.allow_restart): a reboot for a static parameter',
  };
  const lines = (Object.keys(required) as RequiredAction[]).map((a) => `# ${a} (required): ${required[a]}`);
  const optional = optionalActionsFor(options.cluster ?? false);
  for (const a of optional) {
    const info: OptionalActionInfo = OPTIONAL_ACTIONS[a];
    lines.push(
      options.extended
        ? `# ${a} (optional): ${info.adds}; without it ${info.without}`
        : `# ${a} (optional, not in this document: --extended adds it): ${info.adds}`,
    );
  }
  return `${lines.join('\n')}\n`;
}

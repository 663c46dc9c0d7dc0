// The setup page's steps for Cloud A: the user and the extension, a custom parameter group, and
// the permission policy (the same document as `tuner-agent permissions --managed-a`).
import { DATABASE_SQL, lines, type TargetSetup, type SetupStep } from '../../../target/setup.ts';
import { managedAPolicyJson } from './permissions.ts';

export function managedASteps(cluster: boolean, databaseId: string): SetupStep[] {
  const policyName = `tuner-agent-${databaseId}`;
  const policyArn = `arn:aws:iam::<ACCOUNT_ID>:policy/${policyName}`;
  const group = cluster
    ? lines(
        '# the cluster parameter group (custom, non-default), attached to the cluster:',
        'aws rds create-db-cluster-parameter-group --region <REGION> --db-cluster-parameter-group-name tuner-<DB_CLUSTER_IDENTIFIER> --db-parameter-group-family <FAMILY> --description "tuner-agent"',
        'aws rds modify-db-cluster --region <REGION> --db-cluster-identifier <DB_CLUSTER_IDENTIFIER> --db-cluster-parameter-group-name tuner-<DB_CLUSTER_IDENTIFIER> --apply-immediately',
        '# the writer instance (<DATABASE_IDENTIFIER>) gets a DB parameter group of its own:',
        'aws rds create-db-parameter-group --region <REGION> --db-parameter-group-name tuner-<DATABASE_IDENTIFIER> --db-parameter-group-family <FAMILY> --description "tuner-agent"',
        'aws rds modify-db-instance --region <REGION> --db-instance-identifier <DATABASE_IDENTIFIER> --db-parameter-group-name tuner-<DATABASE_IDENTIFIER> --apply-immediately',
        '# a newly attached group takes effect after a reboot, done by you, once:',
        'aws rds reboot-db-instance --region <REGION> --db-instance-identifier <DATABASE_IDENTIFIER>',
      )
    : lines(
        'aws rds create-db-parameter-group --region <REGION> --db-parameter-group-name tuner-<DATABASE_IDENTIFIER> --db-parameter-group-family <FAMILY> --description "tuner-agent"',
        'aws rds modify-db-instance --region <REGION> --db-instance-identifier <DATABASE_IDENTIFIER> --db-parameter-group-name tuner-<DATABASE_IDENTIFIER> --apply-immediately',
        '# a newly attached group takes effect after a reboot, done by you, once:',
        'aws rds reboot-db-instance --region <REGION> --db-instance-identifier <DATABASE_IDENTIFIER>',
      );
  return [
    {
      id: 'database-sql',
      title: 'On the database, as the master user (psql, port 5432)',
      note: `Connect with psql "host=<${cluster ? 'CLUSTER' : 'INSTANCE'}_ENDPOINT> port=5432 dbname=<DBNAME> user=<MASTER_USER> password=<MASTER_PASSWORD> sslmode=verify-full", to the database that connection_url names. Creating the extension needs the rds_superuser role, which the master user has. Choose a strong password for agent_user in place of <AGENT_USER_PASSWORD>.`,
      text: DATABASE_SQL,
    },
    {
      id: 'parameter-group',
      title: 'A custom parameter group, attached to the instance',
      note: `The agent changes parameters through a custom (non-default) DB parameter group, one per instance; a default.* group cannot be modified, and then the agent applies nothing. <FAMILY> is the engine's parameter group family (e.g. ${cluster ? 'aurora-postgresql16' : 'postgres16'}). In the console: Parameter groups, Create parameter group (the family of your engine version), then Databases, the instance, Modify, DB parameter group: the new group, Apply immediately; then Actions, Reboot.`,
      text: group,
    },
    {
      id: 'policy-json',
      title: 'The permission policy (save as tuner-agent-policy.json)',
      note: 'The five statements the agent needs (the same document as ./tuner-agent permissions --managed-a). Resource * may be narrowed to the instance and its parameter group.',
      text: managedAPolicyJson(),
    },
    {
      id: 'policy-attach',
      title: 'Create the policy and attach it to the role of the host (production) or to an IAM user (evaluation)',
      note: 'On a VM, a container task or an orchestrator with an attached role, attach the policy to that role and leave ACCESS_KEY_ID and SECRET_ACCESS_KEY out of agent.yaml. Otherwise attach it to an IAM user and give the agent that user\u2019s access key.',
      text: lines(
        `aws iam create-policy --policy-name ${policyName} --policy-document file://tuner-agent-policy.json`,
        '# (a) production: the role attached to the client host or task',
        `aws iam attach-role-policy --role-name <ROLE_OF_THE_HOST> --policy-arn ${policyArn}`,
        '# (b) evaluation: an IAM user (existing or new), and its access key for agent.yaml',
        `aws iam attach-user-policy --user-name <IAM_USER> --policy-arn ${policyArn}`,
        'aws iam create-access-key --user-name <IAM_USER>   # AccessKeyId -> ACCESS_KEY_ID, SecretAccessKey -> SECRET_ACCESS_KEY',
      ),
    },
  ];
}

function managedASetup(cluster: boolean): TargetSetup {
  return {
    connection: cluster
      ? {
          host: '<CLUSTER_ENDPOINT>',
          dbname: '<DBNAME>',
          query: '?sslmode=verify-full',
          comment: ' The cluster endpoint, which follows the writer: TLS, its certificate verified against the RDS CA bundles.',
        }
      : {
          host: '<INSTANCE_ENDPOINT>',
          dbname: '<DBNAME>',
          query: '?sslmode=verify-full',
          comment:
            " The instance's endpoint (mydb.abcdefgh1234.us-east-1.rds.amazonaws.com): TLS, its certificate verified against the RDS CA bundles.",
        },
    entries: [
      { key: 'ACCESS_KEY_ID', value: '<ACCESS_KEY_ID>', comment: ' Leave out both keys on a host or task with an attached role.' },
      { key: 'SECRET_ACCESS_KEY', value: '<SECRET_ACCESS_KEY>' },
      { key: 'REGION', value: '<REGION>' },
      { key: 'DATABASE_IDENTIFIER', value: '<DATABASE_IDENTIFIER>', ...(cluster && { comment: ' The writer instance of the cluster.' }) },
    ],
    steps: (databaseId) => managedASteps(cluster, databaseId),
    containerTask: { omit: ['ACCESS_KEY_ID', 'SECRET_ACCESS_KEY'] },
  };
}

export const MANAGED_A_SETUP = managedASetup(false);
export const MANAGED_A_CLUSTER_SETUP = managedASetup(true);

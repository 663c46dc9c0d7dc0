// The spec's setup steps before the agent runs, per target, as commands to copy: the database
// user and the extension (on Cloud B after its two server parameters), then the cloud's side:
// Cloud A's custom parameter group and permission policy, Cloud B's custom role and the
// identity it is assigned to. What only the operator knows stays a <PLACEHOLDER>, spelled as in
// agent.yaml. The permission documents are the targets' own (their permissions modules, which
// `tuner-agent permissions` prints too), so that the page and the agent cannot drift apart.
import type { AgentConfig } from '../../agent/config/load.ts';
import { managedAPolicyJson } from '../../agent/targets/managed-a/permissions.ts';
import { managedBFlexRole } from '../../agent/targets/managed-b-flex/permissions.ts';
import type { TargetKind } from '../../protocol/v1.ts';

export interface SetupStep {
  /** The element id of the text on the page. */
  id: string;
  title: string;
  /** What to know before copying, in words. */
  note: string;
  text: string;
}

export const DATABASE_SQL = `CREATE USER agent_user WITH PASSWORD '<AGENT_USER_PASSWORD>';
GRANT pg_monitor TO agent_user;
CREATE EXTENSION IF NOT EXISTS pg_stat_statements;
`;

/** The Cloud B placeholders of agent.yaml, for the role's scope and name. */
const FLEX_PLACEHOLDERS = {
  subscriptionId: '<SUBSCRIPTION_ID>',
  resourceGroupName: '<RESOURCE_GROUP_NAME>',
  serverName: '<SERVER_NAME>',
} satisfies AgentConfig['managedBFlex'];

function lines(...text: string[]): string {
  return `${text.join('\n')}\n`;
}

function localSteps(): SetupStep[] {
  return [
    {
      id: 'server-parameters',
      title: 'Preload pg_stat_statements, as a superuser, then restart PostgreSQL',
      note: 'Keep any library shared_preload_libraries already lists (its value is the whole list, comma-separated).',
      text: lines(
        "ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements';",
        "ALTER SYSTEM SET pg_stat_statements.track = 'top';",
        '-- then restart PostgreSQL, e.g.: pg_ctlcluster 15 main restart',
      ),
    },
    {
      id: 'database-sql',
      title: 'On the database, as a superuser (psql, port 5432)',
      note: 'Connect with psql -p 5432 -U postgres <DBNAME>, to the database that connection_url names. Choose a strong password for agent_user in place of <AGENT_USER_PASSWORD>. To let the agent apply changes without a superuser (PostgreSQL 15+), also run the grants that ./tuner-agent permissions --local prints.',
      text: DATABASE_SQL,
    },
  ];
}

function managedASteps(cluster: boolean, databaseId: string): SetupStep[] {
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

function managedBFlexSteps(): SetupStep[] {
  const { subscriptionId, resourceGroupName, serverName } = FLEX_PLACEHOLDERS;
  const role = managedBFlexRole({ managedBFlex: FLEX_PLACEHOLDERS } as AgentConfig);
  const scope = `/subscriptions/${subscriptionId}/resourceGroups/${resourceGroupName}`;
  const parameterSet = `az postgres flexible-server parameter set --resource-group ${resourceGroupName} --server-name ${serverName}`;
  return [
    {
      id: 'server-parameters',
      title: 'First, two server parameters: the extension allow-list and pg_stat_statements.track',
      note: 'azure.extensions is the allow-list of extensions: keep any extension it already lists (its value is the whole list, comma-separated). pg_stat_statements.track may be top or all. The same in the portal: the server, Server parameters.',
      text: lines(
        `${parameterSet} --name azure.extensions --value pg_stat_statements`,
        `${parameterSet} --name pg_stat_statements.track --value top`,
      ),
    },
    {
      id: 'database-sql',
      title: 'On the database, as the admin user (psql, port 5432)',
      note: `Connect with psql -h ${serverName}.postgres.database.azure.com -p 5432 -U <ADMIN_USER> <DBNAME>, to the database that connection_url names. Choose a strong password for agent_user in place of <AGENT_USER_PASSWORD>.`,
      text: DATABASE_SQL,
    },
    {
      id: 'role-json',
      title: 'The custom role (save as tuner-agent-role.json)',
      note: 'The seven actions the agent needs (the same role as ./tuner-agent permissions --managed-b-flex), assignable in the resource group of the flexible server.',
      text: `${JSON.stringify(role, null, 2)}\n`,
    },
    {
      id: 'role-assign',
      title: 'Create the role and assign it: the managed identity of the VM (production) or a service principal (container testing)',
      note: 'Setting this up needs rights to manage role assignments in the resource group. On a VM the agent needs no stored credentials. A service principal\u2019s output holds appId, password and tenant: pass them as CLOUDB_CLIENT_ID, CLOUDB_CLIENT_SECRET and CLOUDB_TENANT_ID (the container command below has them).',
      text: lines(
        'az role definition create --role-definition @tuner-agent-role.json',
        '# (a) production: the system-assigned managed identity of the VM the agent runs on',
        'az vm identity assign --resource-group <VM_RESOURCE_GROUP> --name <VM_NAME>   # prints its principalId',
        `az role assignment create --assignee-object-id <PRINCIPAL_ID> --assignee-principal-type ServicePrincipal --role "${role.Name}" --scope ${scope}`,
        '# (b) local container testing: a service principal with the role',
        `az ad sp create-for-rbac --name "${role.Name}" --role "${role.Name}" --scopes ${scope}   # appId -> CLOUDB_CLIENT_ID, password -> CLOUDB_CLIENT_SECRET, tenant -> CLOUDB_TENANT_ID`,
      ),
    },
  ];
}

/** A Patroni cluster: the parameters go through Patroni's dynamic configuration (ALTER SYSTEM
 * on one member would not reach the others), then the user and extension once, on the leader. */
function patroniSteps(): SetupStep[] {
  return [
    {
      id: 'server-parameters',
      title: "Preload pg_stat_statements through Patroni's dynamic configuration, then restart the members",
      note: 'Keep any library shared_preload_libraries already lists (its value is the whole list, comma-separated). patronictl restart restarts each member through Patroni.',
      text: lines(
        'patronictl -c /etc/patroni/patroni.yml edit-config \\',
        '  -p shared_preload_libraries=pg_stat_statements -p pg_stat_statements.track=top',
        'patronictl -c /etc/patroni/patroni.yml restart <CLUSTER_NAME>',
      ),
    },
    {
      id: 'database-sql',
      title: 'On the leader, as a superuser (psql); it replicates to every member',
      note: "Choose a strong password for agent_user in place of <AGENT_USER_PASSWORD>. Every member's pg_hba (Patroni's postgresql.pg_hba) must let agent_user in from the agent's host: the agent reads back each change on every member. No ALTER SYSTEM right is needed (./tuner-agent permissions --patroni).",
      text: DATABASE_SQL,
    },
  ];
}

/** The steps before agent.yaml, in the order they are done. */
export function prerequisiteSteps(target: TargetKind, databaseId: string): SetupStep[] {
  switch (target) {
    case 'local':
      return localSteps();
    case 'managed-a':
    case 'managed-a-cluster':
      return managedASteps(target === 'managed-a-cluster', databaseId);
    case 'managed-b-flex':
      return managedBFlexSteps();
    case 'patroni':
      return patroniSteps();
    default:
      // A target without steps of its own here: the database's side, which every target needs.
      return [{ id: 'database-sql', title: 'On the database, as a superuser', note: '', text: DATABASE_SQL }];
  }
}

// What the agent setup page shows, ready to copy: agent.yaml for the chosen target, the same as a
// container command (environment variables) and, on Cloud A, as an ECS task definition, the
// installer and binary commands, and the spec's setup steps before them (steps.ts).
// Key and variable names are exactly the spec's (docs/configuration.md; a test compares them with
// the agent's own key table). What only the operator knows stays a <PLACEHOLDER>; the real API key
// is filled in only on the page that created it.
import YAML from 'yaml';
import { TARGETS, type TargetRegistry } from '../../agent/targets/registry.ts';
import type { TargetKind } from '../../protocol/v1.ts';
import { DATABASE_SQL, prerequisiteSteps, type SetupStep } from './steps.ts';

export interface SetupInput {
  target: TargetKind;
  databaseId: string;
  /** The key, on the page that created it; null elsewhere (then `<API_KEY>`). */
  apiKey: string | null;
  serverUrl: string;
  agentImage: string;
  /** The installer's address (GET /install.sh of this service). */
  installScriptUrl: string;
}

export interface SetupSnippets {
  agentYaml: string;
  containerCommand: string;
  binaryCommands: string;
  /** Cloud A targets only: the agent as an ECS task, its credentials from the task role. */
  ecsTaskDefinition: string | null;
  databaseSql: string;
  /** The spec's setup steps before agent.yaml, per target: the database, then the cloud's side. */
  steps: SetupStep[];
}

/** Where the container keeps its journal and lease (the image's working directory and volume). */
export const AGENT_STATE_DIR = '/var/lib/tuner-agent';

interface Entry {
  section: string | null;
  key: string;
  env: string;
  value: string | boolean;
  /** A comment above the key in agent.yaml. */
  comment?: string;
  /** Only in agent.yaml (e.g. a restart command has no use inside a container). */
  fileOnly?: boolean;
}

/** A target's name for people, from its definition. */
export function targetLabel(target: string, registry: TargetRegistry = TARGETS): string {
  return registry.infoOf(target).label;
}

/**
 * The database's address and TLS per target: the clouds' names are the ones their certificates
 * hold, so that verify-full (the agent's default there, written out so the URL means the same to
 * psql) can check them; next to a self-hosted server, libpq's default (prefer).
 */
const CONNECTIONS: Record<string, { host: string; dbname: string; query: string; comment?: string }> = {
  local: { host: 'localhost', dbname: 'postgres', query: '' },
  'managed-a': {
    host: '<INSTANCE_ENDPOINT>',
    dbname: '<DBNAME>',
    query: '?sslmode=verify-full',
    comment:
      " The instance's endpoint (mydb.abcdefgh1234.us-east-1.rds.amazonaws.com): TLS, its certificate verified against the RDS CA bundles.",
  },
  'managed-a-cluster': {
    host: '<CLUSTER_ENDPOINT>',
    dbname: '<DBNAME>',
    query: '?sslmode=verify-full',
    comment: ' The cluster endpoint, which follows the writer: TLS, its certificate verified against the RDS CA bundles.',
  },
  'managed-b-flex': {
    host: '<SERVER_NAME>.postgres.database.azure.com',
    dbname: '<DBNAME>',
    query: '?sslmode=verify-full',
    comment: " The server's name: TLS, its certificate verified against the public roots in the agent's trust store.",
  },
  patroni: {
    host: 'pg-primary',
    dbname: 'postgres',
    query: '',
    comment: ' The leader, or a name that follows it (HAProxy on /primary, a DNS name your failover moves).',
  },
};

function entries(input: SetupInput): Entry[] {
  const { host, dbname, query, comment } = CONNECTIONS[input.target] ?? { host: '<HOST>', dbname: '<DBNAME>', query: '' };
  const list: Entry[] = [
    {
      section: 'postgresql',
      key: 'connection_url',
      env: 'AGENT_POSTGRESQL_CONNECTION_URL',
      value: `postgresql://agent_user:<AGENT_USER_PASSWORD>@${host}:5432/${dbname}${query}`,
      ...(comment && { comment }),
    },
    { section: 'postgresql', key: 'include_queries', env: 'AGENT_POSTGRESQL_INCLUDE_QUERIES', value: true },
  ];
  // Where the agent never restarts, allowing it would only be refused.
  if (TARGETS.capabilitiesOf(input.target).restart.mode !== 'never') {
    list.push({
      section: 'postgresql',
      key: 'allow_restart',
      env: 'AGENT_POSTGRESQL_ALLOW_RESTART',
      value: false,
      comment: ' Allows the agent to restart the database during tuning (restart mode). Default false.',
    });
  }
  switch (input.target) {
    case 'local':
      list.push({
        section: 'local',
        key: 'restart_command',
        env: 'AGENT_LOCAL_RESTART_COMMAND',
        value: 'pg_ctlcluster 15 main restart',
        comment: ' How to restart the server; used only with allow_restart: true.',
        fileOnly: true,
      });
      break;
    case 'managed-a':
    case 'managed-a-cluster':
      list.push(
        {
          section: 'managed_a',
          key: 'ACCESS_KEY_ID',
          env: 'AGENT_CLOUDA_ACCESS_KEY_ID',
          value: '<ACCESS_KEY_ID>',
          comment: ' Leave out both keys on a host or task with an attached role.',
        },
        { section: 'managed_a', key: 'SECRET_ACCESS_KEY', env: 'AGENT_CLOUDA_SECRET_ACCESS_KEY', value: '<SECRET_ACCESS_KEY>' },
        { section: 'managed_a', key: 'REGION', env: 'AGENT_CLOUDA_REGION', value: '<REGION>' },
        {
          section: 'managed_a',
          key: 'DATABASE_IDENTIFIER',
          env: 'AGENT_MANAGEDA_DATABASE_IDENTIFIER',
          value: '<DATABASE_IDENTIFIER>',
          ...(input.target === 'managed-a-cluster' && { comment: ' The writer instance of the cluster.' }),
        },
      );
      break;
    case 'managed-b-flex':
      list.push(
        { section: 'managed_b_flex', key: 'subscription_id', env: 'AGENT_MANAGEDB_FLEX_SUBSCRIPTION_ID', value: '<SUBSCRIPTION_ID>' },
        {
          section: 'managed_b_flex',
          key: 'resource_group_name',
          env: 'AGENT_MANAGEDB_FLEX_RESOURCE_GROUP_NAME',
          value: '<RESOURCE_GROUP_NAME>',
        },
        { section: 'managed_b_flex', key: 'server_name', env: 'AGENT_MANAGEDB_FLEX_SERVER_NAME', value: '<SERVER_NAME>' },
      );
      break;
    case 'patroni':
      list.push(
        {
          section: 'patroni',
          key: 'rest_api_urls',
          env: 'AGENT_PATRONI_REST_API_URLS',
          value: 'https://pg1:8008,https://pg2:8008',
          comment: " Every member's restapi.connect_address: the agent follows the leader through them.",
        },
        { section: 'patroni', key: 'username', env: 'AGENT_PATRONI_USERNAME', value: '<RESTAPI_USERNAME>' },
        { section: 'patroni', key: 'password', env: 'AGENT_PATRONI_PASSWORD', value: '<RESTAPI_PASSWORD>' },
      );
      break;
  }
  list.push(
    { section: 'tuner', key: 'server_url', env: 'AGENT_TUNER_SERVER_URL', value: input.serverUrl },
    { section: 'tuner', key: 'api_key', env: 'AGENT_TUNER_API_KEY', value: input.apiKey ?? '<API_KEY>' },
    { section: 'tuner', key: 'database_id', env: 'AGENT_TUNER_DATABASE_ID', value: input.databaseId },
    { section: 'tuner', key: 'debug', env: 'AGENT_TUNER_DEBUG', value: false },
  );
  if (input.target === 'managed-b-flex') {
    // A container outside Cloud B has no managed identity: it signs in as a service principal.
    list.push(
      { section: null, key: 'CLOUDB_CLIENT_ID', env: 'CLOUDB_CLIENT_ID', value: '<CLIENT_ID>' },
      { section: null, key: 'CLOUDB_CLIENT_SECRET', env: 'CLOUDB_CLIENT_SECRET', value: '<CLIENT_SECRET>' },
      { section: null, key: 'CLOUDB_TENANT_ID', env: 'CLOUDB_TENANT_ID', value: '<TENANT_ID>' },
    );
  }
  return list;
}

function agentYaml(list: readonly Entry[]): string {
  const sections: Record<string, Record<string, string | boolean>> = {};
  for (const entry of list) {
    if (entry.section !== null) (sections[entry.section] ??= {})[entry.key] = entry.value;
  }
  const doc = new YAML.Document(sections);
  for (const entry of list) {
    if (entry.section === null || !entry.comment) continue;
    const section = doc.get(entry.section, true) as YAML.YAMLMap<YAML.Scalar<string>>;
    const pair = section.items.find((p) => p.key.value === entry.key);
    if (pair) pair.key.commentBefore = entry.comment;
  }
  return doc.toString({ lineWidth: 0 });
}

/** Single-quotes a value for a POSIX shell unless it is plainly safe. */
export function shellQuote(value: string): string {
  return /^[A-Za-z0-9_.,:/@%+=-]+$/.test(value) ? value : `'${value.replaceAll("'", `'\\''`)}'`;
}

function containerCommand(list: readonly Entry[], input: SetupInput): string {
  // The journal and lease live in a named volume: a container made anew resumes, not blind.
  const lines = [
    'docker run -d --restart always --name tuner-agent',
    `-v ${shellQuote(`tuner-agent-${input.databaseId}`)}:${AGENT_STATE_DIR}`,
  ];
  for (const entry of list) {
    if (entry.fileOnly) continue;
    lines.push(`-e ${entry.env}=${shellQuote(String(entry.value))}`);
  }
  lines.push(`${shellQuote(input.agentImage)} --${input.target}`);
  return `${lines.join(' \\\n  ')}\n`;
}

function binaryCommands(input: SetupInput): string {
  return [
    '# in an empty directory of its own (one per database): download tuner-agent, check its SHA-256',
    `curl -fsSL ${shellQuote(input.installScriptUrl)} > /tmp/agent-installer.sh && sh /tmp/agent-installer.sh`,
    '# then, with agent.yaml beside it:',
    `./tuner-agent --${input.target} --check   # checks every prerequisite, says how to fix each`,
    `./tuner-agent --${input.target}`,
    '',
  ].join('\n');
}

/** An ECS task definition (Fargate) for a Cloud A target: no access keys, the task role's
 * credentials instead; the journal and lease on an EFS volume, so a replaced task resumes. */
function ecsTaskDefinition(list: readonly Entry[], input: SetupInput): string | null {
  if (input.target !== 'managed-a' && input.target !== 'managed-a-cluster') return null;
  const environment = list
    .filter((e) => !e.fileOnly && e.env !== 'AGENT_CLOUDA_ACCESS_KEY_ID' && e.env !== 'AGENT_CLOUDA_SECRET_ACCESS_KEY')
    .map((e) => ({ name: e.env, value: String(e.value) }));
  const definition = {
    family: `tuner-agent-${input.databaseId}`,
    taskRoleArn: 'arn:aws:iam::<ACCOUNT_ID>:role/<ROLE_WITH_THE_AGENT_POLICY>',
    executionRoleArn: 'arn:aws:iam::<ACCOUNT_ID>:role/ecsTaskExecutionRole',
    requiresCompatibilities: ['FARGATE'],
    networkMode: 'awsvpc',
    cpu: '256',
    memory: '512',
    containerDefinitions: [
      {
        name: 'tuner-agent',
        image: input.agentImage,
        essential: true,
        command: [`--${input.target}`],
        environment,
        mountPoints: [{ sourceVolume: 'tuner-agent-state', containerPath: AGENT_STATE_DIR }],
      },
    ],
    volumes: [
      {
        name: 'tuner-agent-state',
        efsVolumeConfiguration: {
          fileSystemId: '<EFS_FILE_SYSTEM_ID>',
          transitEncryption: 'ENABLED',
          authorizationConfig: { accessPointId: '<EFS_ACCESS_POINT_ID>' },
        },
      },
    ],
  };
  // One line per variable: the list reads like the docker command's.
  const text = JSON.stringify(definition, null, 2).replace(
    /\{\n\s+("name": "[^"\n]*"),\n\s+("value": "(?:[^"\\\n]|\\.)*")\n\s+\}/g,
    '{ $1, $2 }',
  );
  return `${text}\n`;
}

export function setupSnippets(input: SetupInput): SetupSnippets {
  const list = entries(input);
  return {
    agentYaml: agentYaml(list),
    containerCommand: containerCommand(list, input),
    binaryCommands: binaryCommands(input),
    ecsTaskDefinition: ecsTaskDefinition(list, input),
    databaseSql: DATABASE_SQL,
    steps: prerequisiteSteps(input.target, input.databaseId),
  };
}

// What the agent setup page shows, ready to copy: agent.yaml for the chosen target, the same as a
// container command (environment variables) and, on Cloud A, as an ECS task definition, the
// installer and binary commands, and the spec's setup steps before them (steps.ts).
// Key and variable names are exactly the spec's (docs/configuration.md; a test compares them with
// the agent's own key table). What only the operator knows stays a <PLACEHOLDER>; the real API key
// is filled in only on the page that created it.
import YAML from 'yaml';
import { TARGETS, type TargetRegistry } from '../../agent/targets/registry.ts';
import { LOOPBACK_HOSTS } from '../../target/setup.ts';
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
  value: string | boolean | readonly string[];
  /** A comment above the key in agent.yaml. */
  comment?: string;
  /** Only in agent.yaml (e.g. a restart command has no use inside a container). */
  fileOnly?: boolean;
}

/** A target's name for people, from its definition. */
export function targetLabel(target: string, registry: TargetRegistry = TARGETS): string {
  return registry.infoOf(target).label;
}

/** The target's own entries, their agent.yaml paths and environment variables from its key table. */
function targetEntries(input: SetupInput, registry: TargetRegistry): Entry[] {
  const definition = registry.definitionOf(input.target);
  return (registry.infoOf(input.target).setup?.entries ?? []).map((entry) => {
    const spec = definition.config.keys.find((k) => k.key === entry.key);
    if (!spec) throw new Error(`the setup of ${input.target} shows ${entry.key}, which is not one of its keys`);
    return { ...entry, section: spec.section, env: spec.env };
  });
}

/** One of the common keys (postgresql, tuner): their variables follow the spec's rule,
 * AGENT_<SECTION>_<KEY> (test/service-setup.test.ts checks each against the agent's key table). */
function common(section: 'postgresql' | 'tuner', key: string, value: string | boolean, comment?: string): Entry {
  return { section, key, env: `AGENT_${section}_${key}`.toUpperCase(), value, ...(comment && { comment }) };
}

function entries(input: SetupInput, registry: TargetRegistry): Entry[] {
  const setup = registry.infoOf(input.target).setup;
  const { host, dbname, query, comment } = setup?.connection ?? { host: '<HOST>', dbname: '<DBNAME>', query: '' };
  const list: Entry[] = [
    common('postgresql', 'connection_url', `postgresql://agent_user:<AGENT_USER_PASSWORD>@${host}:5432/${dbname}${query}`, comment),
    common('postgresql', 'include_queries', true),
  ];
  // Where the agent never restarts, allowing it would only be refused.
  if (registry.capabilitiesOf(input.target).restart.mode !== 'never') {
    list.push(
      common(
        'postgresql',
        'allow_restart',
        false,
        ' Allows the agent to restart the database during tuning (restart mode). Default false.',
      ),
    );
  }
  const own = targetEntries(input, registry);
  // Environment-only keys (a container's credentials) come after the common ones, as before.
  list.push(...own.filter((e) => e.section !== null));
  list.push(
    common('tuner', 'server_url', input.serverUrl),
    common('tuner', 'api_key', input.apiKey ?? '<API_KEY>'),
    common('tuner', 'database_id', input.databaseId),
    common('tuner', 'debug', false),
  );
  list.push(...own.filter((e) => e.section === null));
  return list;
}

/** A value as an environment variable holds it: a list comma-separated. */
const envValue = (value: Entry['value']): string => (typeof value === 'object' ? value.join(',') : String(value));

function agentYaml(list: readonly Entry[]): string {
  const sections: Record<string, Record<string, Entry['value']>> = {};
  for (const entry of list) {
    if (entry.section !== null) (sections[entry.section] ??= {})[entry.key] = entry.value;
  }
  const doc = new YAML.Document(sections);
  for (const entry of list) {
    if (entry.section === null) continue;
    const section = doc.get(entry.section, true) as YAML.YAMLMap<YAML.Scalar<string>>;
    const pair = section.items.find((p) => p.key.value === entry.key);
    if (!pair) continue;
    if (entry.comment) pair.key.commentBefore = entry.comment;
    // A list as docs/patroni.md writes it: [a, b] on the key's line.
    if (YAML.isSeq(pair.value)) pair.value.flow = true;
  }
  return doc.toString({ lineWidth: 0 });
}

/** Single-quotes a value for a POSIX shell unless it is plainly safe. */
export function shellQuote(value: string): string {
  return /^[A-Za-z0-9_.,:/@%+=-]+$/.test(value) ? value : `'${value.replaceAll("'", `'\\''`)}'`;
}

/** The connection URL names this host (localhost): inside a container that is the container. */
function onThisHost(list: readonly Entry[]): boolean {
  const url = list.find((e) => e.section === 'postgresql' && e.key === 'connection_url')?.value;
  const host = typeof url === 'string' ? /@([^:/?]+)/.exec(url)?.[1] : undefined;
  return host !== undefined && LOOPBACK_HOSTS.includes(host);
}

function containerCommand(list: readonly Entry[], input: SetupInput): string {
  // The journal and lease live in a named volume: a container made anew resumes, not blind.
  const lines = [
    'docker run -d --restart always --name tuner-agent',
    `-v ${shellQuote(`tuner-agent-${input.databaseId}`)}:${AGENT_STATE_DIR}`,
  ];
  // A database on this host: the container shares the host's network, so localhost is the host.
  const local = onThisHost(list);
  if (local) lines.push('--network host');
  for (const entry of list) {
    if (entry.fileOnly) continue;
    lines.push(`-e ${entry.env}=${shellQuote(envValue(entry.value))}`);
  }
  lines.push(`${shellQuote(input.agentImage)} --${input.target}`);
  const command = `${lines.join(' \\\n  ')}\n`;
  if (!local) return command;
  return (
    '# Linux: --network host lets localhost in the URL reach the database on this host.\n' +
    '# Docker Desktop (macOS, Windows): put --add-host=host.docker.internal:host-gateway in place of\n' +
    '# --network host, and host.docker.internal in place of localhost in AGENT_POSTGRESQL_CONNECTION_URL.\n' +
    command
  );
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
function ecsTaskDefinition(list: readonly Entry[], input: SetupInput, registry: TargetRegistry): string | null {
  const task = registry.infoOf(input.target).setup?.containerTask;
  if (!task) return null;
  const environment = list
    .filter((e) => !e.fileOnly && !(e.section !== 'tuner' && e.section !== 'postgresql' && task.omit.includes(e.key)))
    .map((e) => ({ name: e.env, value: envValue(e.value) }));
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

export function setupSnippets(input: SetupInput, registry: TargetRegistry = TARGETS): SetupSnippets {
  const list = entries(input, registry);
  return {
    agentYaml: agentYaml(list),
    containerCommand: containerCommand(list, input),
    binaryCommands: binaryCommands(input),
    ecsTaskDefinition: ecsTaskDefinition(list, input, registry),
    databaseSql: DATABASE_SQL,
    steps: prerequisiteSteps(input.target, input.databaseId, registry),
  };
}

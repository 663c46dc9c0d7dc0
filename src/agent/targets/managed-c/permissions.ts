// What `tuner-agent permissions --managed-c` prints: a custom IAM role as JSON, the file
// `gcloud iam roles create … --file` accepts (title, description, stage, includedPermissions),
// alone on standard output; how to create and grant it goes to standard error as `#` lines.
// No SDK imports: the setup page shows the role too.
import type { TargetAgentConfig } from '../../../target/config.ts';
import { managedCConfig, type ManagedCConfig } from './config.ts';

/** Each permission the agent uses, by what needs it. */
export const PERMISSIONS = {
  /** instances.get (the flags, settingsVersion, tier, state, server CA) and operations.get. */
  instanceGet: 'cloudsql.instances.get',
  /** instances.patch of settings.databaseFlags. */
  instanceUpdate: 'cloudsql.instances.update',
  /** Cloud Monitoring's timeSeries.list, for the instance's CPU, memory, disk and connections. */
  timeSeriesList: 'monitoring.timeSeries.list',
} as const;

export const MANAGED_C_PERMISSIONS: readonly string[] = [PERMISSIONS.instanceGet, PERMISSIONS.instanceUpdate, PERMISSIONS.timeSeriesList];

/** Why each permission is there, for docs and notes. */
export const PERMISSION_REASONS: Readonly<Record<string, string>> = {
  [PERMISSIONS.instanceGet]: 'read the instance (its flags, settings version, machine tier, state, server CA) and poll its operations',
  [PERMISSIONS.instanceUpdate]: "patch the instance's database flags (the whole list, the customer's flags kept)",
  [PERMISSIONS.timeSeriesList]: "read the instance's CPU, memory, disk and connection metrics from Cloud Monitoring",
};

export const ROLE_ID = 'tunerAgent';

export interface ManagedCRole {
  title: string;
  description: string;
  stage: 'GA';
  includedPermissions: string[];
}

export function managedCRole(): ManagedCRole {
  return {
    title: 'tuner-agent',
    description: 'tuner-agent: read a Cloud SQL for PostgreSQL instance and its metrics, and change its database flags',
    stage: 'GA',
    includedPermissions: [...MANAGED_C_PERMISSIONS],
  };
}

export function managedCRoleJson(): string {
  return `${JSON.stringify(managedCRole(), null, 2)}\n`;
}

/** The gcloud commands after the role file, in the order a user runs them. */
export function gcloudRoleCommands(c: ManagedCConfig | null): string[] {
  const project = c?.project ?? '<PROJECT>';
  const sa = `tuner-agent@${project}.iam.gserviceaccount.com`;
  return [
    `gcloud iam roles create ${ROLE_ID} --project=${project} --file=tuner-agent-role.json`,
    `gcloud iam service-accounts create tuner-agent --project=${project} --display-name="tuner-agent"`,
    `gcloud projects add-iam-policy-binding ${project} --member=serviceAccount:${sa} --role=projects/${project}/roles/${ROLE_ID}`,
  ];
}

export function managedCSetupNotes(config: TargetAgentConfig | null): string {
  const c = config && managedCConfig.of(config);
  const project = c?.project ?? '<PROJECT>';
  const sa = `tuner-agent@${project}.iam.gserviceaccount.com`;
  const [create, account, bind] = gcloudRoleCommands(c);
  return [
    '# The custom role (printed on standard output). Then:',
    '#',
    '# 1. Save it and create it in the project of the instance:',
    '#      tuner-agent permissions --managed-c > tuner-agent-role.json',
    `#      ${create}`,
    '# 2. A service account for the agent, granted the role:',
    `#      ${account}`,
    `#      ${bind}`,
    '# 3a. On a Compute Engine VM or GKE (workload identity): run the agent as that service account;',
    '#     it needs no key (Application Default Credentials from the metadata server).',
    '# 3b. Elsewhere: a key file, named by GOOGLE_APPLICATION_CREDENTIALS:',
    `#      gcloud iam service-accounts keys create tuner-agent-key.json --iam-account=${sa}`,
    '#',
    ...Object.entries(PERMISSION_REASONS).map(([p, why]) => `# ${p}: ${why}`),
    '',
  ].join('\n');
}

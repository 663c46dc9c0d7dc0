// Cloud C's agent.yaml keys (section managed_c): the Cloud SQL instance by project, region and
// name, and the Google API endpoints (for a private service connect endpoint, or a test's fake).
// Credentials are Google's Application Default Credentials (GOOGLE_APPLICATION_CREDENTIALS, or
// the metadata server of the host), read by google-auth-library, not keys of this section.
import { compact, targetSection, type KeySpec } from '../../../target/config.ts';

export const managedCConfigKeys: readonly KeySpec[] = [
  {
    section: 'managed_c',
    key: 'project',
    env: 'AGENT_CLOUDC_PROJECT',
    kind: 'string',
    secret: false,
    requiredFor: ['managed-c'],
    help: 'project id of the Cloud SQL instance, e.g. my-project',
  },
  {
    section: 'managed_c',
    key: 'region',
    env: 'AGENT_CLOUDC_REGION',
    kind: 'string',
    secret: false,
    requiredFor: ['managed-c'],
    help: 'region of the Cloud SQL instance, e.g. europe-west1',
  },
  {
    section: 'managed_c',
    key: 'instance',
    env: 'AGENT_CLOUDC_INSTANCE',
    kind: 'string',
    secret: false,
    requiredFor: ['managed-c'],
    help: 'name of the Cloud SQL instance (the primary), without the project',
  },
  {
    section: 'managed_c',
    key: 'sqladmin_endpoint',
    env: 'AGENT_CLOUDC_SQLADMIN_ENDPOINT',
    kind: 'http-url',
    secret: false,
    requiredFor: [],
    ours: true,
    help: 'Cloud SQL Admin API root (default https://sqladmin.googleapis.com/)',
  },
  {
    section: 'managed_c',
    key: 'monitoring_endpoint',
    env: 'AGENT_CLOUDC_MONITORING_ENDPOINT',
    kind: 'http-url',
    secret: false,
    requiredFor: [],
    ours: true,
    help: 'Cloud Monitoring API root (default https://monitoring.googleapis.com/)',
  },
  {
    section: 'managed_c',
    key: 'resource_manager_endpoint',
    env: 'AGENT_CLOUDC_RESOURCE_MANAGER_ENDPOINT',
    kind: 'http-url',
    secret: false,
    requiredFor: [],
    ours: true,
    help: "Cloud Resource Manager API root, for --check's permission test (default https://cloudresourcemanager.googleapis.com/)",
  },
];

export interface ManagedCConfig {
  project?: string;
  region?: string;
  instance?: string;
  sqladminEndpoint?: string;
  monitoringEndpoint?: string;
  resourceManagerEndpoint?: string;
}

export const DEFAULT_ENDPOINTS = {
  sqladmin: 'https://sqladmin.googleapis.com/',
  monitoring: 'https://monitoring.googleapis.com/',
  resourceManager: 'https://cloudresourcemanager.googleapis.com/',
} as const;

export const managedCConfig = targetSection<ManagedCConfig>('managed_c', managedCConfigKeys, [], (v) =>
  compact({
    project: v.string('project'),
    region: v.string('region'),
    instance: v.string('instance'),
    sqladminEndpoint: v.string('sqladmin_endpoint'),
    monitoringEndpoint: v.string('monitoring_endpoint'),
    resourceManagerEndpoint: v.string('resource_manager_endpoint'),
  }),
);

// The setup page's steps for Cloud C, in the order a user does them: the user and the extension
// (pg_stat_statements is preloaded on Cloud SQL), the custom role (the same as `tuner-agent permissions --managed-c`),
// the service account, and the instance's server CA for verified TLS.
import { DATABASE_SQL, lines, type SetupStep, type TargetSetup } from '../../../target/setup.ts';
import { gcloudRoleCommands, managedCRole } from './permissions.ts';

const P = { project: '<PROJECT>', region: '<REGION>', instance: '<INSTANCE>' };

export function managedCSteps(): SetupStep[] {
  const [create, account, bind] = gcloudRoleCommands(P);
  return [
    {
      id: 'database-sql',
      title: 'On the database, as the postgres user (cloudsqlsuperuser)',
      note: `Connect with gcloud sql connect ${P.instance} --user=postgres, to the database that connection_url names. Choose a strong password for agent_user in place of <AGENT_USER_PASSWORD>.`,
      text: DATABASE_SQL,
    },
    {
      id: 'role-json',
      title: 'The custom role (save as tuner-agent-role.json)',
      note: 'The three permissions the agent uses (the same role as ./tuner-agent permissions --managed-c).',
      text: `${JSON.stringify(managedCRole(), null, 2)}\n`,
    },
    {
      id: 'role-assign',
      title: 'Create the role, a service account for the agent, and grant it the role',
      note: 'On Compute Engine or GKE the agent runs as this service account and needs no key; elsewhere, a key file named by GOOGLE_APPLICATION_CREDENTIALS.',
      text: lines(
        create!,
        account!,
        bind!,
        `gcloud iam service-accounts keys create tuner-agent-key.json --iam-account=tuner-agent@${P.project}.iam.gserviceaccount.com   # only off Google Cloud`,
      ),
    },
    {
      id: 'server-ca',
      title: "The instance's server CA, for verified TLS",
      note: "Cloud SQL's server certificate names the instance, not its address: the agent verifies it against this CA (sslmode=verify-ca). Name the file in postgresql.extra_ca_file.",
      text: lines(`gcloud sql instances describe ${P.instance} --project=${P.project} --format='value(serverCaCert.cert)' > server-ca.pem`),
    },
  ];
}

export const managedCSetup: TargetSetup = {
  connection: {
    host: '<INSTANCE_IP>',
    dbname: '<DBNAME>',
    query: '?sslmode=verify-ca',
    comment: " The instance's IP address: TLS, its certificate verified against the instance's server CA (postgresql.extra_ca_file).",
  },
  entries: [
    { key: 'project', value: P.project },
    { key: 'region', value: P.region },
    { key: 'instance', value: P.instance },
  ],
  steps: () => managedCSteps(),
};

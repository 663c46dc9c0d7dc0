// Cloud C prerequisites, one line each, in the order of the setup steps: credentials, each
// permission of the role (Resource Manager's testIamPermissions), the instance readable and
// RUNNABLE, its machine, the customer's flags the agent keeps, the
// server CA the connection verifies against, and Cloud Monitoring readable.
import { readFileSync } from 'node:fs';
import type { TargetAgentConfig } from '../../../target/config.ts';
import type { MachineInfo, PreflightCheck } from '../../../target/target.ts';
import { errorMessage } from '../../base/log.ts';
import { describeMachineInfo } from '../machine-size.ts';
import type { Instance, ManagedCApi } from './api.ts';
import { ManagedCError } from './errors.ts';
import { CLOUD_SQL_FLAGS } from './flags.ts';
import { MONITORING_METRICS } from './metrics.ts';
import { MANAGED_C_PERMISSIONS, PERMISSION_REASONS, PERMISSIONS } from './permissions.ts';

/** The PEM file holds this certificate (whitespace aside); an unreadable file does not. */
function fileHolds(file: string, cert: string): boolean {
  try {
    return readFileSync(file, 'utf8').replace(/\s+/g, '').includes(cert.replace(/\s+/g, ''));
  } catch {
    return false;
  }
}

/** A failed line; a ManagedCError's message says its fix already. */
function failed(name: string, err: unknown, fix?: string): PreflightCheck {
  return { name, ok: false, detail: errorMessage(err), ...(fix !== undefined && !(err instanceof ManagedCError) && { fix }) };
}

function instanceChecks(
  instance: Instance,
  api: ManagedCApi,
  config: TargetAgentConfig,
  machine: (i: Instance) => MachineInfo,
): PreflightCheck[] {
  const checks: PreflightCheck[] = [];
  checks.push({
    name: 'instance is RUNNABLE',
    ok: instance.state === 'RUNNABLE',
    detail: `state ${instance.state}`,
    ...(instance.state !== 'RUNNABLE' && {
      fix: `start the instance (gcloud sql instances patch ${api.instance} --activation-policy=ALWAYS), or wait for its maintenance to end`,
    }),
  });
  try {
    checks.push({ name: 'machine size', ok: true, detail: describeMachineInfo(machine(instance)) });
  } catch (err) {
    checks.push(failed('machine size', err));
  }
  const flags = instance.settings.databaseFlags ?? [];
  const kept = flags.filter((f) => !Object.hasOwn(CLOUD_SQL_FLAGS, f.name));
  const tuned = flags.filter((f) => Object.hasOwn(CLOUD_SQL_FLAGS, f.name));
  checks.push({
    name: "the instance's own flags, which the agent keeps as they are",
    ok: true,
    detail:
      (kept.length === 0 ? 'none' : kept.map((f) => `${f.name}=${f.value ?? ''}`).join(', ')) +
      (tuned.length > 0
        ? `; set now and tuned by the agent (put back after each trial): ${tuned.map((f) => `${f.name}=${f.value ?? ''}`).join(', ')}`
        : ''),
  });
  const ca = instance.serverCaCert?.cert;
  const caFile = config.postgresql.extraCaFile;
  if (ca) {
    const has = caFile !== undefined && fileHolds(caFile, ca);
    checks.push({
      name: "postgresql.extra_ca_file holds the instance's server CA",
      ok: has,
      severity: 'warning',
      detail: has
        ? `${caFile} (serverCaCert ${instance.serverCaCert?.commonName ?? ''})`.trim()
        : caFile
          ? `${caFile} does not hold it`
          : 'postgresql.extra_ca_file is not set',
      ...(!has && {
        fix: `gcloud sql instances describe ${api.instance} --project=${api.project} --format='value(serverCaCert.cert)' > server-ca.pem, and name it in postgresql.extra_ca_file`,
      }),
    });
  }
  return checks;
}

export interface PreflightDeps {
  api: ManagedCApi;
  config: TargetAgentConfig;
  machine: (instance: Instance) => MachineInfo;
}

export async function managedCPreflight({ api, config, machine }: PreflightDeps): Promise<PreflightCheck[]> {
  const checks: PreflightCheck[] = [];
  const credentials = 'Cloud C credentials (Application Default Credentials)';
  try {
    checks.push({ name: credentials, ok: true, detail: await api.checkCredentials() });
  } catch (err) {
    checks.push(
      failed(
        credentials,
        err,
        'set GOOGLE_APPLICATION_CREDENTIALS to the service account key file, or run on a host whose metadata server has the service account',
      ),
    );
    return checks;
  }

  try {
    const held = await api.testPermissions(MANAGED_C_PERMISSIONS);
    for (const p of MANAGED_C_PERMISSIONS)
      checks.push({
        name: `permission ${p}`,
        ok: held.includes(p),
        detail: held.includes(p) ? PERMISSION_REASONS[p]! : `not held: the agent cannot ${PERMISSION_REASONS[p]!}`,
        ...(!held.includes(p) && { fix: `add ${p} to the custom role (tuner-agent permissions --managed-c)` }),
      });
  } catch (err) {
    checks.push(failed('permissions of the role (testIamPermissions)', err));
  }

  try {
    const instance = await api.getInstance();
    checks.push({
      name: `instance readable (${PERMISSIONS.instanceGet})`,
      ok: true,
      detail: `${api.project}:${api.instance}: ${instance.databaseVersion ?? 'PostgreSQL'}, tier ${instance.settings.tier}, settings version ${instance.settings.settingsVersion}`,
    });
    checks.push(...instanceChecks(instance, api, config, machine));
  } catch (err) {
    checks.push(failed(`instance readable (${PERMISSIONS.instanceGet})`, err));
  }

  try {
    const points = await api.timeSeries(`cloudsql.googleapis.com/database/${Object.keys(MONITORING_METRICS)[0]!}`, 10);
    checks.push({
      name: `Cloud Monitoring readable (${PERMISSIONS.timeSeriesList})`,
      ok: true,
      detail: `${points.length} points of cpu/utilization in the last 10 minutes`,
    });
  } catch (err) {
    checks.push(failed(`Cloud Monitoring readable (${PERMISSIONS.timeSeriesList})`, err));
  }
  return checks;
}

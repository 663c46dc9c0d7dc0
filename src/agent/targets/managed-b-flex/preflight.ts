// Cloud B prerequisites, one check each, in the order of the setup steps: a token for the
// identity, the flexible server and its parameters readable, the extension allow-list and
// pg_stat_statements.track set as the setup says, the tuned parameters changeable without a
// restart, and Azure Monitor readable. A refused call names the role action it needed.
import { MANAGED_B_FLEX_KNOBS } from './parameters.ts';
import type { TargetAgentConfig } from '../../../target/config.ts';
import { errorMessage } from '../../base/log.ts';
import { describeConnection } from '../../../postgres/connect.ts';
import type { ManagedBFlexApi, FlexibleServer, ServerParameter } from './api.ts';
import { ACTIONS } from './permissions.ts';
import { ManagedBFlexError } from './errors.ts';
import { intelligentTuningOf, INTELLIGENT_TUNING, METRIC_TARGETS } from './intelligent-tuning.ts';
import { describeServer, type ServerMachine } from './machine.ts';
import { MONITOR_METRICS } from './metrics.ts';
import type { PreflightCheck } from '../../../target/target.ts';
import { describeMachine } from '../../../knobs/index.ts';
import { managedBFlexConfig, type ManagedBFlexConfig } from './config.ts';

/** The extension allow-list: `cloudb.extensions` in the setup steps, `azure.extensions` on the service. */
export const EXTENSIONS_PARAMETER = 'azure.extensions';
export const TRACK_PARAMETER = 'pg_stat_statements.track';

function failed(name: string, err: unknown, fallbackFix?: string): PreflightCheck {
  const fix = err instanceof ManagedBFlexError ? (err.fix ?? fallbackFix) : fallbackFix;
  return {
    name,
    ok: false,
    detail: err instanceof ManagedBFlexError ? err.problem : errorMessage(err),
    ...(fix !== undefined && { fix }),
  };
}

function parameterSetCommand(config: ManagedBFlexConfig, name: string, value: string): string {
  return `az postgres flexible-server parameter set --resource-group ${config.resourceGroupName} --server-name ${config.serverName} --name ${name} --value ${value}`;
}

function serverChecks(server: FlexibleServer, config: TargetAgentConfig): PreflightCheck[] {
  const checks: PreflightCheck[] = [];
  const state = server.state ?? 'unknown';
  checks.push({
    name: 'flexible server is running',
    ok: state.toLowerCase() === 'ready' || state.toLowerCase() === 'updating',
    detail: `state ${state}`,
    ...(state.toLowerCase() !== 'ready' && {
      severity: state.toLowerCase() === 'updating' ? 'warning' : 'error',
      fix: `start the flexible server ${managedBFlexConfig.of(config).serverName}, or wait for its current operation to finish`,
    }),
  });
  const fqdn = server.fullyQualifiedDomainName?.toLowerCase();
  if (fqdn) {
    const host = describeConnection(config.postgresql.connectionUrl).host.toLowerCase();
    checks.push({
      name: 'connection_url points at this flexible server',
      ok: host === fqdn,
      severity: 'warning',
      detail: host === fqdn ? fqdn : `connection_url host is ${host}, the server's name is ${fqdn}`,
      ...(host !== fqdn && {
        fix: `make sure ${host} reaches ${fqdn} (a private endpoint or DNS alias), or use ${fqdn} in postgresql.connection_url: the agent measures one server and tunes the other otherwise`,
      }),
    });
  }
  return checks;
}

function machineCheck(machine: () => ServerMachine): PreflightCheck {
  try {
    const { info, warning } = machine();
    const figures = describeMachine(info.machine);
    return warning
      ? {
          name: 'machine size',
          ok: false,
          severity: 'warning',
          detail: `${figures}: ${warning}`,
          fix: "set local.memory_mb and local.vcpus in agent.yaml to the server's memory and vCPUs",
        }
      : { name: 'machine size', ok: true, detail: `${figures} (${info.source})` };
  } catch (err) {
    return failed('machine size', err);
  }
}

function parameterChecks(params: Map<string, ServerParameter>, config: ManagedBFlexConfig): PreflightCheck[] {
  const checks: PreflightCheck[] = [];
  const allowList = params.get(EXTENSIONS_PARAMETER)?.value ?? '';
  const allowed = allowList
    .split(',')
    .map((e) => e.trim().toLowerCase())
    .filter(Boolean);
  const hasPgss = allowed.includes('pg_stat_statements');
  checks.push({
    name: `extension allow-list (server parameter ${EXTENSIONS_PARAMETER}) contains pg_stat_statements`,
    ok: hasPgss,
    detail: allowList ? `${EXTENSIONS_PARAMETER} = ${allowList}` : `${EXTENSIONS_PARAMETER} is empty`,
    ...(!hasPgss && {
      fix: `${parameterSetCommand(config, EXTENSIONS_PARAMETER, [...allowed, 'pg_stat_statements'].join(','))}, then as the admin user: CREATE EXTENSION IF NOT EXISTS pg_stat_statements;`,
    }),
  });

  const track = params.get(TRACK_PARAMETER)?.value;
  const tracking = ['all', 'top'].includes((track ?? '').toLowerCase());
  checks.push({
    name: `server parameter ${TRACK_PARAMETER} is ALL or TOP`,
    ok: tracking,
    detail:
      track === undefined
        ? `${TRACK_PARAMETER} is not a server parameter of this server (pg_stat_statements is not loaded)`
        : `${TRACK_PARAMETER} = ${track}`,
    ...(!tracking && { fix: parameterSetCommand(config, TRACK_PARAMETER, 'top') }),
  });

  checks.push(intelligentTuningCheck(params, config));

  const problems = MANAGED_B_FLEX_KNOBS.flatMap((name) => {
    const p = params.get(name);
    if (!p) return [`${name} missing`];
    if (p.isReadOnly) return [`${name} read-only`];
    if (p.isDynamicConfig === false) return [`${name} static (takes a restart)`];
    if (p.isConfigPendingRestart) return [`${name} already waits for a restart`];
    return [];
  });
  checks.push({
    name: 'tuned parameters are changeable without a restart',
    ok: problems.length === 0,
    detail: problems.length === 0 ? `all ${MANAGED_B_FLEX_KNOBS.length} are dynamic and writable` : problems.join(', '),
    ...(problems.length > 0 && {
      fix: 'the agent tunes the others and refuses changes to these; a parameter waiting for a restart takes effect at the next restart of the server (Cloud B is tuned reload-only)',
    }),
  });
  return checks;
}

/** Azure's intelligent tuning changes some of the tuned parameters itself: a warning, since the
 * agent then tunes the others (target.ts reports these as unwritable, write.ts refuses them). */
function intelligentTuningCheck(params: Map<string, ServerParameter>, config: ManagedBFlexConfig): PreflightCheck {
  const tuning = intelligentTuningOf(params);
  const name = `Azure's intelligent tuning leaves the tuned parameters to the agent (server parameter ${INTELLIGENT_TUNING})`;
  if (tuning.parameters.length === 0) {
    return {
      name,
      ok: true,
      detail: tuning.on ? `${tuning.setting}: none of the tuned parameters is among its targets` : `${tuning.setting}`,
    };
  }
  const left = MANAGED_B_FLEX_KNOBS.length - tuning.parameters.length;
  return {
    name,
    ok: false,
    severity: 'warning',
    detail: `${tuning.setting}: Azure changes ${tuning.parameters.join(', ')} itself, so the agent leaves them out of its search and refuses changes to them; it tunes the other ${left}`,
    fix: `to let the tuner tune them instead, turn intelligent tuning off: ${parameterSetCommand(config, INTELLIGENT_TUNING, 'off')} (or set ${METRIC_TARGETS} to the targets you want Azure to keep, without these)`,
  };
}

export interface PreflightDeps {
  api: ManagedBFlexApi;
  config: TargetAgentConfig;
  machine: (server: FlexibleServer) => ServerMachine;
}

export async function managedBFlexPreflight({ api, config, machine }: PreflightDeps): Promise<PreflightCheck[]> {
  const checks: PreflightCheck[] = [];
  const tokenCheck = `Cloud B token for the ${api.identity.description}`;
  try {
    await api.checkToken();
    checks.push({ name: tokenCheck, ok: true, detail: `a token for ${api.endpoint}` });
  } catch (err) {
    checks.push(failed(tokenCheck, err, api.identity.fix));
    return checks;
  }

  try {
    const server = await api.getServer();
    checks.push({
      name: `flexible server readable (${ACTIONS.serverRead})`,
      ok: true,
      detail: `${managedBFlexConfig.of(config).serverName}: ${describeServer(server)}`,
    });
    checks.push(
      ...serverChecks(server, config),
      machineCheck(() => machine(server)),
    );
  } catch (err) {
    checks.push(failed(`flexible server readable (${ACTIONS.serverRead})`, err));
  }

  try {
    const params = await api.listParameters();
    checks.push({
      name: `server parameters readable (${ACTIONS.configurationsRead})`,
      ok: true,
      detail: `${params.size} server parameters`,
    });
    checks.push(...parameterChecks(params, managedBFlexConfig.of(config)));
  } catch (err) {
    checks.push(failed(`server parameters readable (${ACTIONS.configurationsRead})`, err));
  }

  try {
    const series = await api.metrics(MONITOR_METRICS, 10, 'PT1M');
    const points = series.reduce((n, s) => n + s.points.length, 0);
    checks.push({
      name: `Azure Monitor metrics readable (${ACTIONS.metricsRead})`,
      ok: true,
      detail: `${series.length} metrics, ${points} one-minute points in the last 10 minutes`,
    });
  } catch (err) {
    checks.push(failed(`Azure Monitor metrics readable (${ACTIONS.metricsRead})`, err));
  }

  checks.push({
    name: `server parameters writable (${ACTIONS.configurationsWrite})`,
    ok: true,
    severity: 'warning',
    detail: 'not tried by --check (it would change the server); the first change says so if the role lacks it',
  });
  return checks;
}

// The prerequisites of the spec, checked one by one; each failure says what to do, in the words
// of the setup steps. Target-specific checks come from the target itself.
import { PROTOCOL_VERSION, type SystemInfo, type TargetKind } from '../protocol/v1.ts';
import { PostgresConnectError, describeConnection, describeSecurity } from '../postgres/connect.ts';
import type { ConnectStep } from '../postgres/connect-errors.ts';
import type { AgentConfig } from './config/load.ts';
import { errorMessage } from './log.ts';
import {
  LeaseExpiredError,
  RequestRefusedError,
  ServiceRejectedError,
  ServiceUnavailableError,
  type ServiceClient,
} from './service-client.ts';
import type { Db } from './db.ts';
import type { Journal } from './journal.ts';
import type { PreflightCheck, Target } from './targets/target.ts';

export async function databaseChecks(db: Db): Promise<PreflightCheck[]> {
  const checks: PreflightCheck[] = [];
  const [who] = await db.query<{ user: string; database: string; monitor: boolean; superuser: boolean; version: string }>(
    `SELECT current_user AS user, current_database() AS database,
            pg_has_role(current_user, 'pg_monitor', 'MEMBER') AS monitor,
            (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) AS superuser,
            current_setting('server_version') AS version`,
  );
  if (!who) throw new Error('the database returned no row for the session check');
  checks.push({ name: 'connect to PostgreSQL', ok: true, detail: `PostgreSQL ${who.version}, database "${who.database}" as ${who.user}` });
  // What the server itself says about this session's encryption, beside what was verified.
  const [ssl] = await db.query<{ ssl: boolean; version: string | null }>(
    'SELECT ssl, version FROM pg_stat_ssl WHERE pid = pg_backend_pid()',
  );
  checks.push({
    name: 'connection encryption',
    ok: true,
    detail: describeSecurity({ ...db.security, encrypted: ssl?.ssl ?? db.security.encrypted }, ssl?.version),
  });
  checks.push({
    name: `${who.user} is a member of pg_monitor`,
    ok: who.monitor || who.superuser,
    detail: who.monitor ? 'granted' : who.superuser ? 'superuser' : 'not granted',
    ...(!who.monitor && !who.superuser && { fix: `as the master user: GRANT pg_monitor TO ${who.user};` }),
  });

  const [ext] = await db.query<{ version: string }>(`SELECT extversion AS version FROM pg_extension WHERE extname = 'pg_stat_statements'`);
  checks.push({
    name: `pg_stat_statements exists in database "${who.database}"`,
    ok: ext !== undefined,
    detail: ext ? `version ${ext.version}` : 'not created',
    ...(!ext && { fix: `as the master user, connected to database "${who.database}": CREATE EXTENSION IF NOT EXISTS pg_stat_statements;` }),
  });

  const [preload] = await db.query<{ libs: string; track: string | null }>(
    `SELECT current_setting('shared_preload_libraries') AS libs, current_setting('pg_stat_statements.track', true) AS track`,
  );
  const preloaded = (preload?.libs ?? '')
    .split(',')
    .map((s) => s.trim().replace(/^"|"$/g, ''))
    .includes('pg_stat_statements');
  checks.push({
    name: 'pg_stat_statements is preloaded',
    ok: preloaded,
    detail: preloaded ? 'in shared_preload_libraries' : `shared_preload_libraries = '${preload?.libs ?? ''}'`,
    ...(!preloaded && {
      fix: 'add pg_stat_statements to shared_preload_libraries (on a managed server: its server parameter) and restart the server',
    }),
  });
  if (preloaded) {
    const track = (preload?.track ?? '').toLowerCase();
    const tracking = track === 'top' || track === 'all';
    checks.push({
      name: 'pg_stat_statements.track is top or all',
      ok: tracking,
      detail: `pg_stat_statements.track = ${track || '(unset)'}`,
      ...(!tracking && { fix: 'set the server parameter pg_stat_statements.track to top (or all) and reload' }),
    });
  }
  if (ext && preloaded) {
    try {
      await db.query('SELECT 1 FROM pg_stat_statements LIMIT 1');
      checks.push({ name: 'pg_stat_statements is readable', ok: true, detail: 'readable' });
    } catch (err) {
      checks.push({
        name: 'pg_stat_statements is readable',
        ok: false,
        detail: (err as Error).message,
        fix: `GRANT pg_monitor TO ${who.user};`,
      });
    }
  }
  return checks;
}

export function journalCheck(journal: Journal): PreflightCheck {
  if (!journal.needsRecovery()) {
    return {
      name: 'journal',
      ok: true,
      detail: `${journal.path}: ${Object.keys(journal.data.applied).length} parameter(s) under the agent's care, none unfinished`,
    };
  }
  return {
    name: 'journal',
    ok: false,
    severity: 'warning',
    detail: `${journal.path} records a change that was not finished or not accepted`,
    fix: 'the next start of the agent returns the database to its last known-good configuration',
  };
}

export async function runPreflight(db: Db, target: Target, journal: Journal): Promise<PreflightCheck[]> {
  const checks = await databaseChecks(db);
  checks.push(...(await target.preflight()));
  checks.push(journalCheck(journal));
  return checks;
}

export function formatChecks(heading: string, checks: readonly PreflightCheck[]): string {
  const lines = [heading];
  for (const c of checks) {
    const status = c.ok ? 'PASS' : c.severity === 'warning' ? 'WARN' : 'FAIL';
    lines.push(`  ${status}  ${c.name}: ${c.detail}`);
    if (c.fix && !c.ok) lines.push(`        fix: ${c.fix}`);
  }
  const failed = checks.filter((c) => !c.ok && c.severity !== 'warning').length;
  lines.push(failed === 0 ? `preflight: all ${checks.length} checks passed` : `preflight: ${failed} of ${checks.length} checks failed`);
  return `${lines.join('\n')}\n`;
}

export function preflightPassed(checks: readonly PreflightCheck[]): boolean {
  return checks.every((c) => c.ok || c.severity === 'warning');
}

/** The spec's prerequisite "outbound access to the tuning service, with the API key and database
 * id accepted", through the protocol's check call: no lease is taken, nothing changes. */
export async function serviceChecks(
  tuner: AgentConfig['tuner'],
  kind: TargetKind,
  client: ServiceClient | null,
): Promise<PreflightCheck[]> {
  if (!client || !tuner.serverUrl || !tuner.databaseId) {
    return [
      {
        name: 'tuning service configured',
        ok: false,
        severity: 'warning',
        detail: 'tuner.server_url, tuner.api_key and tuner.database_id are not all set, so the service was not asked',
        fix: 'copy the tuner section from the agent setup page into agent.yaml (or set AGENT_TUNER_SERVER_URL, AGENT_TUNER_API_KEY, AGENT_TUNER_DATABASE_ID)',
      },
    ];
  }
  const reached = `tuning service reachable at ${tuner.serverUrl}`;
  const accepted = `API key accepted for database ${tuner.databaseId}`;
  try {
    const answer = await client.check({ protocolVersion: PROTOCOL_VERSION, target: kind });
    const checks: PreflightCheck[] = [
      { name: reached, ok: true, detail: 'answered protocol v1' },
      { name: accepted, ok: true, detail: `the database is set up for --${answer.target}` },
    ];
    if (answer.target !== kind) {
      checks.push({
        name: `database ${tuner.databaseId} is set up for this target`,
        ok: false,
        detail: `it is set up for --${answer.target}, and this agent runs with --${kind}`,
        fix: `start the agent with --${answer.target}, or create a database entry for --${kind} on the setup page and use its database id and API key`,
      });
    }
    return checks;
  } catch (err) {
    if (err instanceof ServiceUnavailableError) {
      return [
        {
          name: reached,
          ok: false,
          detail: err.message,
          fix: 'check tuner.server_url, and that this host may open outbound HTTPS to it (through tuner.proxy_url or HTTPS_PROXY if the network requires a proxy)',
        },
      ];
    }
    const answered: PreflightCheck = { name: reached, ok: true, detail: 'answered protocol v1' };
    if (err instanceof ServiceRejectedError && err.code === 'not_found') {
      return [
        answered,
        {
          name: `database id ${tuner.databaseId} belongs to the API key`,
          ok: false,
          detail: 'the API key is live, but for another database',
          fix: 'copy tuner.database_id from the agent setup page of the database the API key was created for (or create a key for this database there)',
        },
      ];
    }
    if (err instanceof ServiceRejectedError) {
      return [
        answered,
        {
          name: accepted,
          ok: false,
          detail: 'the tuning service does not know this API key (mistyped or revoked)',
          fix: 'copy tuner.api_key from the agent setup page, or create a new key there (a key is shown once)',
        },
      ];
    }
    const refused = err instanceof RequestRefusedError || err instanceof LeaseExpiredError;
    return [
      { ...answered, ok: refused, detail: refused ? answered.detail : errorMessage(err) },
      {
        name: accepted,
        ok: false,
        detail: errorMessage(err),
        fix: 'check that tuner.server_url is a tuning service of protocol v1 (the same version as this agent)',
      },
    ];
  }
}

const STEP_NAMES: Record<ConnectStep, (where: ReturnType<typeof describeConnection>) => string> = {
  dns: (w) => `database host ${w.host} resolves (DNS)`,
  tcp: (w) => `database port reachable at ${w.host}:${w.port} (TCP)`,
  tls: (w) => `TLS with the database at ${w.host}:${w.port}`,
  authentication: (w) => `authentication as ${w.user}`,
  database: (w) => `database "${w.database}" exists`,
};

/** The steps up to the one that failed: the ones before it passed, as far as it got. */
export function connectionChecks(connectionUrl: string, err: unknown): PreflightCheck[] {
  const where = describeConnection(connectionUrl);
  if (!(err instanceof PostgresConnectError)) {
    return [
      {
        name: `connect to PostgreSQL at ${where.host}:${where.port}`,
        ok: false,
        detail: errorMessage(err),
        fix: 'check postgresql.connection_url',
      },
    ];
  }
  const order: ConnectStep[] = ['dns', 'tcp', 'tls', 'authentication', 'database'];
  const failedAt = order.indexOf(err.step);
  // Only what the failure proves passed: a socket path has no DNS, and whether TLS was used
  // (sslmode prefer and allow fall back) is not known from a later failure.
  const passed = order.slice(0, failedAt).filter((step) => step !== 'tls' && !(step === 'dns' && where.host.startsWith('/')));
  return [
    ...passed.map((step) => ({ name: STEP_NAMES[step](where), ok: true, detail: 'passed' })),
    { name: STEP_NAMES[err.step](where), ok: false, detail: err.problem, fix: err.fix },
  ];
}

/** What the service keeps of a preflight: its failed and warned lines, cut to the protocol's lengths. */
export function preflightProblems(checks: readonly PreflightCheck[]): NonNullable<SystemInfo['preflight']> {
  const cut = (text: string) => (text.length > 500 ? `${text.slice(0, 499)}…` : text);
  return checks
    .filter((c) => !c.ok)
    .slice(0, 50)
    .map((c) => ({
      status: c.severity === 'warning' ? ('warn' as const) : ('fail' as const),
      name: cut(c.name),
      detail: cut(c.detail),
      ...(c.fix && { fix: cut(c.fix) }),
    }));
}

// The prerequisites of the spec, checked one by one; each failure says what to do, in the words
// of the setup steps. Target-specific checks come from the target itself.
import { PROTOCOL_VERSION, type SystemInfo, type TargetKind } from '../../protocol/v1.ts';
import { PostgresConnectError, describeConnection, describeSecurity } from '../../postgres/connect.ts';
import type { ConnectStep } from '../../postgres/connect-errors.ts';
import type { AgentConfig } from '../config/agent-config.ts';
import { errorMessage } from '../base/log.ts';
import {
  LeaseExpiredError,
  RequestRefusedError,
  ServiceRejectedError,
  ServiceUnavailableError,
  type ServiceClient,
} from '../sending/service-client.ts';
import type { Db } from '../database/db.ts';
import type { Journal } from '../applying/journal.ts';
import { TARGETS } from '../targets/registry.ts';
import type { PreflightCheck, Target } from '../../target/target.ts';

/** The parts of pg_monitor, each a right the agent uses: settings such as shared_preload_libraries,
 * the statistics of every session and statement, and the functions that scan tables. */
const MONITOR_PARTS = ['pg_read_all_settings', 'pg_read_all_stats', 'pg_stat_scan_tables'] as const;

/** SQLSTATE 42501: the query needs a right the role does not have. */
function isPrivilegeError(err: unknown): boolean {
  return (err as { code?: unknown }).code === '42501';
}

/** The spec's words for creating the extension, per target (its definition): who may, and what comes first. */
function createExtensionFix(kind: TargetKind | undefined, database: string): string {
  const create = `connected to database "${database}": CREATE EXTENSION IF NOT EXISTS pg_stat_statements;`;
  const who = kind !== undefined && TARGETS.has(kind) ? TARGETS.infoOf(kind).createsExtension : undefined;
  return `${who ?? 'as the master user'}, ${create}`;
}

/**
 * The database's prerequisites common to every target, one line each. A query the role lacks the
 * right for becomes its line (what could not be read, and why), never an exception: one failed
 * line never stops the others.
 */
export async function databaseChecks(db: Db, kind?: TargetKind): Promise<PreflightCheck[]> {
  const checks: PreflightCheck[] = [];
  // Needs no right beyond logging in: pg_roles and pg_has_role are open to every role.
  const [who] = await db.query<{ user: string; database: string; superuser: boolean; version: string }>(
    `SELECT current_user AS user, current_database() AS database,
            (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) AS superuser,
            current_setting('server_version') AS version`,
  );
  if (!who) throw new Error('the database returned no row for the session check');
  checks.push({ name: 'connect to PostgreSQL', ok: true, detail: `PostgreSQL ${who.version}, database "${who.database}" as ${who.user}` });
  // What the server itself says about this session's encryption, beside what was verified.
  const ssl = await db
    .query<{ ssl: boolean; version: string | null }>('SELECT ssl, version FROM pg_stat_ssl WHERE pid = pg_backend_pid()')
    .then(
      ([row]) => row,
      () => undefined,
    );
  checks.push({
    name: 'connection encryption',
    ok: true,
    detail: describeSecurity({ ...db.security, encrypted: ssl?.ssl ?? db.security.encrypted }, ssl?.version),
  });

  // "Privileges of" (USAGE): a membership without INHERIT grants nothing to the session.
  const roles = await db.query<{ role: string; has: boolean }>(
    `SELECT r AS role, pg_has_role(current_user, r, 'USAGE') AS has FROM unnest($1::text[]) AS r`,
    [['pg_monitor', ...MONITOR_PARTS]],
  );
  const has = (role: string) => who.superuser || roles.some((r) => r.role === role && r.has);
  const grantMonitor = `as the master user: GRANT pg_monitor TO ${who.user};`;
  const missingParts = MONITOR_PARTS.filter((p) => !has(p));
  const monitor = has('pg_monitor') || missingParts.length === 0;
  checks.push({
    name: `${who.user} is a member of pg_monitor`,
    ok: monitor,
    detail: who.superuser
      ? 'superuser'
      : has('pg_monitor')
        ? 'granted'
        : monitor
          ? `its parts are granted (${MONITOR_PARTS.join(', ')})`
          : `not granted; missing ${missingParts.join(', ')}`,
    ...(!monitor && { fix: grantMonitor }),
  });

  const [ext] = await db.query<{ version: string }>(`SELECT extversion AS version FROM pg_extension WHERE extname = 'pg_stat_statements'`);
  checks.push({
    name: `pg_stat_statements exists in database "${who.database}"`,
    ok: ext !== undefined,
    detail: ext ? `version ${ext.version}` : 'not created',
    ...(!ext && { fix: createExtensionFix(kind, who.database) }),
  });

  // The view answers only when the library is loaded; its error says so, whatever the role's rights.
  const probe = ext
    ? await db.query('SELECT 1 FROM pg_stat_statements LIMIT 1').then(
        () => null,
        (err: unknown) => err as Error & { code?: string },
      )
    : undefined;
  const notLoaded = (err: unknown) => /shared_preload_libraries/.test(errorMessage(err));
  const preloadName = 'pg_stat_statements is preloaded';
  const preloadFix =
    'add pg_stat_statements to shared_preload_libraries (on a managed server: its server parameter) and restart the server';
  let preloaded = false;
  try {
    const [row] = await db.query<{ libs: string }>(`SELECT current_setting('shared_preload_libraries') AS libs`);
    preloaded = (row?.libs ?? '')
      .split(',')
      .map((s) => s.trim().replace(/^"|"$/g, ''))
      .includes('pg_stat_statements');
    checks.push({
      name: preloadName,
      ok: preloaded,
      detail: preloaded ? 'in shared_preload_libraries' : `shared_preload_libraries = '${row?.libs ?? ''}'`,
      ...(!preloaded && { fix: preloadFix }),
    });
  } catch (err) {
    if (!isPrivilegeError(err)) throw err;
    // shared_preload_libraries is readable only with pg_read_all_settings (a part of pg_monitor);
    // the extension's own view still tells whether the library is loaded.
    const unreadable = `shared_preload_libraries cannot be read by ${who.user} (it needs pg_read_all_settings, a part of pg_monitor)`;
    if (probe === null) {
      preloaded = true;
      checks.push({ name: preloadName, ok: true, detail: `${unreadable}, but the pg_stat_statements view answers, so it is loaded` });
    } else if (probe && notLoaded(probe)) {
      checks.push({ name: preloadName, ok: false, detail: `${unreadable}, and the view says: ${probe.message}`, fix: preloadFix });
    } else {
      checks.push({
        name: preloadName,
        ok: false,
        severity: 'warning',
        detail: `${unreadable}, so whether it is preloaded cannot be told`,
        fix: grantMonitor,
      });
    }
  }

  if (preloaded) {
    try {
      const [row] = await db.query<{ track: string | null }>(`SELECT current_setting('pg_stat_statements.track', true) AS track`);
      const track = (row?.track ?? '').toLowerCase();
      const tracking = track === 'top' || track === 'all';
      checks.push({
        name: 'pg_stat_statements.track is top or all',
        ok: tracking,
        detail: `pg_stat_statements.track = ${track || '(unset)'}`,
        ...(!tracking && { fix: 'set the server parameter pg_stat_statements.track to top (or all) and reload' }),
      });
    } catch (err) {
      if (!isPrivilegeError(err)) throw err;
      checks.push({
        name: 'pg_stat_statements.track is top or all',
        ok: false,
        severity: 'warning',
        detail: `pg_stat_statements.track cannot be read by ${who.user}: ${errorMessage(err)}`,
        fix: grantMonitor,
      });
    }
  }
  if (ext && probe !== undefined && (probe === null || !notLoaded(probe))) {
    checks.push({
      name: 'pg_stat_statements is readable',
      ok: probe === null,
      detail: probe === null ? 'readable' : probe.message,
      ...(probe !== null && { fix: grantMonitor }),
    });
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

/** The database's lines, the target's, the journal's: a group that cannot run at all (the
 * database went away, a cloud call failed unexpectedly) is one FAIL line, and the others still run. */
export async function runPreflight(db: Db, target: Target, journal: Journal): Promise<PreflightCheck[]> {
  const group = async (name: string, fix: string, run: () => Promise<PreflightCheck[]>): Promise<PreflightCheck[]> => {
    try {
      return await run();
    } catch (err) {
      return [{ name, ok: false, detail: `could not be checked: ${errorMessage(err)}`, fix, unchecked: true }];
    }
  };
  return [
    ...(await group('the database prerequisites', 'check the connection and the rights of the user in postgresql.connection_url', () =>
      databaseChecks(db, target.kind),
    )),
    ...(await group(`the --${target.kind} prerequisites`, `see tuner-agent permissions --${target.kind}`, () => target.preflight())),
    journalCheck(journal),
  ];
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

/** Why the agent must not tune while these lines stand (its FAIL lines: not its warnings, nor a
 * group that could not be checked, as when the database was restarting at start), in
 * the protocol's length; null when the preflight passed. The service shows it, and refuses a
 * tuning session with it, until an agent started after the fix passes its preflight. */
export function tuningBlockedReason(checks: readonly PreflightCheck[]): string | null {
  const failed = checks.filter((c) => !c.ok && c.severity !== 'warning' && !c.unchecked);
  if (failed.length === 0) return null;
  const [first] = failed;
  const more = failed.length > 1 ? ` (and ${failed.length - 1} more FAIL line(s): see tuner-agent --check)` : '';
  const text = `the preflight failed: ${first!.name}: ${first!.detail}${first!.fix ? `; fix: ${first!.fix}` : ''}${more}; then restart the agent`;
  return text.length > 500 ? `${text.slice(0, 499)}…` : text;
}

// A PostgreSQL connection URL means here what it means to libpq and psql: the six sslmodes,
// sslrootcert (a file, or `system`), sslcert, sslkey and sslpassword. The agent and the service
// both connect through this module.
//
// node-postgres maps most of it itself in its libpq-compatible mode (pg-connection-string's
// `useLibpqCompat`): disable, prefer, require, verify-ca, verify-full and the certificate files.
// What it lacks is filled in here and nowhere else:
// - the fallback between a TLS and a plain attempt that `prefer` (TLS first) and `allow` (plain
//   first) need: libpq makes the second attempt when the server refuses TLS or answers the first
//   attempt's startup with an error, and so do we;
// - `allow` itself, `sslrootcert=system`, and `sslpassword` (the passphrase of sslkey);
// - the default sslmode and CAs when the URL names none: libpq's `prefer`, or a caller's (the
//   agent's cloud targets verify by default).
import { getCACertificates } from 'node:tls';
import pg from 'pg';
import { parse, toClientConfig } from 'pg-connection-string';
import { explainConnectFailure, type ConnectStep, type Failure } from './connect-errors.ts';
import {
  LIBPQ_DEFAULTS,
  SSL_MODES,
  type Attempt,
  type ConnectionContext,
  type ConnectionPlan,
  type ConnectionSecurity,
  type SslMode,
  type Verification,
} from './connection-plan.ts';

/** Where the agent connects, as people read it: host:port/dbname, socket paths included. */
export function describeConnection(connectionUrl: string): { host: string; port: string; database: string; user: string } {
  const url = new URL(connectionUrl);
  const host = url.hostname || url.searchParams.get('host') || 'localhost';
  return {
    host,
    port: url.port || url.searchParams.get('port') || '5432',
    database: decodeURIComponent(url.pathname.replace(/^\//, '')) || decodeURIComponent(url.username) || 'postgres',
    user: decodeURIComponent(url.username),
  };
}

export { LIBPQ_DEFAULTS, SSL_MODES } from './connection-plan.ts';
export type {
  Attempt,
  ConnectionContext,
  ConnectionPlan,
  ConnectionSecurity,
  SslMode,
  TlsDefaults,
  Verification,
} from './connection-plan.ts';

/** A URL whose TLS parameters cannot mean anything: a configuration error, not a connection failure. */
export class ConnectionSettingError extends Error {
  override name = 'ConnectionSettingError';
}

/** A connection that failed; the message names the cause and its fix, never a secret. */
export class PostgresConnectError extends Error {
  override name = 'PostgresConnectError';
  readonly reason: string;
  /** Which step failed, and the cause and fix apart (the message holds both). */
  readonly step: ConnectStep;
  readonly problem: string;
  readonly fix: string;
  constructor(explained: { message: string; reason: string; step: ConnectStep; cause: string; fix: string }, cause: unknown) {
    super(explained.message, { cause });
    this.reason = explained.reason;
    this.step = explained.step;
    this.problem = explained.cause;
    this.fix = explained.fix;
  }
}

const isSslMode = (s: string): s is SslMode => (SSL_MODES as readonly string[]).includes(s);

/** Splits off the query string so that the rest of the URL reaches the library exactly as typed. */
function splitQuery(url: string): { head: string; params: URLSearchParams } {
  const cut = url.indexOf('?');
  return cut < 0
    ? { head: url, params: new URLSearchParams() }
    : { head: url.slice(0, cut), params: new URLSearchParams(url.slice(cut + 1)) };
}

function describeTarget(config: pg.ClientConfig): ConnectionPlan['target'] {
  const host = typeof config.host === 'string' && config.host !== '' ? config.host : 'localhost';
  const user = typeof config.user === 'string' ? config.user : '';
  return {
    host,
    port: String(config.port ?? 5432),
    database: typeof config.database === 'string' && config.database !== '' ? config.database : user,
    user,
  };
}

function verificationOf(ssl: pg.ClientConfig['ssl']): Verification {
  if (typeof ssl !== 'object' || ssl === null) return ssl ? 'full' : 'none';
  if (ssl.rejectUnauthorized === false) return 'none';
  return ssl.checkServerIdentity ? 'ca' : 'full';
}

export function planConnection(url: string, context: ConnectionContext): ConnectionPlan {
  const defaults = context.defaults ?? LIBPQ_DEFAULTS;
  const { head, params } = splitQuery(url);
  const given = params.get('sslmode');
  if (given !== null && !isSslMode(given)) {
    throw new ConnectionSettingError(
      `${context.setting}: sslmode=${given} is not a libpq sslmode; expected one of ${SSL_MODES.join(', ')}`,
    );
  }
  const rootcert = params.get('sslrootcert');
  const system = rootcert === 'system';
  const sslmode: SslMode = given ?? (system ? 'verify-full' : defaults.sslmode);
  const sslmodeReason = given !== null ? 'the connection URL' : system ? 'sslrootcert=system' : defaults.reason;
  if (system && sslmode !== 'verify-full') {
    throw new ConnectionSettingError(
      `${context.setting}: sslrootcert=system verifies against the system's CAs, which only sslmode=verify-full does safely; use sslmode=verify-full or name a CA file`,
    );
  }
  const passphrase = params.get('sslpassword');
  for (const ours of ['sslpassword', 'uselibpqcompat', 'sslmode']) params.delete(ours);
  if (system) params.delete('sslrootcert');

  // The CAs to verify against when the URL names no file: the system's, the caller's, or Node's store.
  const defaultCa = system
    ? { certificates: getCACertificates('system'), description: "the system's trusted CAs (sslrootcert=system)" }
    : defaults.ca;
  const trust =
    rootcert && !system
      ? `sslrootcert ${rootcert}`
      : (defaultCa?.description ?? `Node's trust store${process.env['NODE_EXTRA_CA_CERTS'] ? ' and NODE_EXTRA_CA_CERTS' : ''}`);

  /** The library's meaning of one mode, with what it lacks added. */
  const withMode = (mode: Exclude<SslMode, 'allow'>): pg.ClientConfig => {
    const query = new URLSearchParams(params);
    // verify-ca with no CA file would be refused by the library; with a default CA it verifies
    // the chain against that CA, as verify-full does, without the host name.
    const caOnly = mode === 'verify-ca' && !(rootcert && !system);
    if (caOnly && !defaultCa) {
      throw new ConnectionSettingError(
        `${context.setting}: sslmode=verify-ca needs sslrootcert=<file of the CA that signed the server's certificate>; or use sslmode=verify-full, which also checks the host name`,
      );
    }
    query.set('sslmode', caOnly ? 'verify-full' : mode);
    let config: pg.ClientConfig;
    try {
      config = toClientConfig(parse(`${head}?${query.toString()}`, { useLibpqCompat: true }));
    } catch (err) {
      throw fileError(err, params, context) ?? err;
    }
    // Left in the config they would only travel; pg reads none of them.
    for (const key of ['sslmode', 'sslrootcert', 'sslcert', 'sslkey', 'sslnegotiation']) delete (config as Record<string, unknown>)[key];
    if (typeof config.ssl === 'object' && config.ssl !== null) {
      if (passphrase !== null) config.ssl.passphrase = passphrase;
      const verifies = mode === 'verify-ca' || mode === 'verify-full';
      if (verifies && defaultCa && config.ssl.ca === undefined) config.ssl.ca = defaultCa.certificates;
      if (caOnly) config.ssl.checkServerIdentity = () => undefined;
    }
    return config;
  };
  const attempt = (config: pg.ClientConfig): Attempt => ({
    encrypted: config.ssl !== false && config.ssl !== undefined,
    verification: verificationOf(config.ssl),
    config,
  });

  const plain = () => attempt(withMode('disable'));
  const attempts: Attempt[] = {
    disable: () => [plain()],
    allow: () => [plain(), attempt(withMode('prefer'))],
    prefer: () => [attempt(withMode('prefer')), plain()],
    require: () => [attempt(withMode('require'))],
    'verify-ca': () => [attempt(withMode('verify-ca'))],
    'verify-full': () => [attempt(withMode('verify-full'))],
  }[sslmode]();
  return { context, sslmode, sslmodeReason, trust, target: describeTarget(attempts[0]!.config), attempts };
}

/** The library reads sslrootcert, sslcert and sslkey itself; a file it cannot read is named by its parameter. */
function fileError(err: unknown, params: URLSearchParams, context: ConnectionContext): ConnectionSettingError | null {
  const e = err as NodeJS.ErrnoException;
  if (typeof e?.code !== 'string' || typeof e.path !== 'string') return null;
  const param = ['sslrootcert', 'sslcert', 'sslkey'].find((p) => params.get(p) === e.path) ?? 'a file';
  const why = e.code === 'ENOENT' ? 'no such file' : e.code === 'EACCES' ? 'permission denied' : e.code;
  return new ConnectionSettingError(`${context.setting}: cannot read ${param} ${e.path}: ${why}`);
}

/** The server refused TLS, or answered the startup with an error: libpq tries the other way then. */
function fallsBack(err: unknown): boolean {
  return err instanceof pg.DatabaseError || (err instanceof Error && err.message === 'The server does not support SSL connections');
}

export type ClientOptions = Omit<pg.ClientConfig, 'connectionString' | 'ssl' | 'host' | 'port' | 'user' | 'password' | 'database'>;

/** Connects as the plan says, falling back as libpq does; throws PostgresConnectError naming the cause. */
export async function connectClient(
  plan: ConnectionPlan,
  options: ClientOptions = {},
): Promise<{ client: pg.Client; attempt: Attempt; security: ConnectionSecurity }> {
  const failures: Failure[] = [];
  for (const attempt of plan.attempts) {
    const client = new pg.Client({ ...attempt.config, ...options });
    // Until the caller holds the client, a late error of a failed attempt must not crash Node.
    const ignore = () => undefined;
    client.on('error', ignore);
    try {
      await client.connect();
      client.off('error', ignore);
      return { client, attempt, security: securityOf(plan, attempt) };
    } catch (err) {
      await client.end().catch(() => undefined);
      failures.push({ attempt, error: err });
      if (!fallsBack(err)) break;
    }
  }
  const explained = explainConnectFailure(plan, failures);
  throw new PostgresConnectError(explained, explained.error);
}

export function securityOf(plan: ConnectionPlan, attempt: Attempt): ConnectionSecurity {
  return {
    sslmode: plan.sslmode,
    sslmodeReason: plan.sslmodeReason,
    encrypted: attempt.encrypted,
    verification: attempt.verification,
    trust: plan.trust,
    host: plan.target.host,
  };
}

/** One line: encrypted or not, which sslmode and why, and what was verified against what. */
export function describeSecurity(s: ConnectionSecurity, tlsVersion?: string | null): string {
  const mode = `sslmode=${s.sslmode} (${s.sslmodeReason})`;
  if (!s.encrypted) {
    const why =
      s.sslmode === 'disable'
        ? ''
        : s.sslmode === 'allow'
          ? ': the server accepted a plain connection first'
          : ': the server did not accept TLS';
    return `not encrypted, ${mode}${why}`;
  }
  const tls = `encrypted${tlsVersion ? ` (${tlsVersion})` : ''}, ${mode}`;
  switch (s.verification) {
    case 'full':
      return `${tls}; the server's certificate was verified against ${s.trust}, and it names ${s.host}`;
    case 'ca':
      return `${tls}; the server's certificate was verified against ${s.trust}; its host name was not checked`;
    case 'none':
      return `${tls}; the server's certificate was not verified (sslmode=verify-full would)`;
  }
}

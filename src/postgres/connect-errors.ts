// Why a connection to PostgreSQL failed, and what to do about it: one table, first match wins.
// Every message is built from the plan (host, port, database, user, sslmode) and from what the
// server or TLS said; neither ever holds the password.
import pg from 'pg';
import type { Attempt, ConnectionPlan } from './connection-plan.ts';

export interface Failure {
  attempt: Attempt;
  error: unknown;
}

/** The step of connecting that failed, as the preflight names it: the host name, the port, TLS,
 * the login, or the database named. */
export type ConnectStep = 'dns' | 'tcp' | 'tls' | 'authentication' | 'database';

interface Row {
  reason: string;
  step: ConnectStep | ((error: unknown) => ConnectStep);
  matches(error: unknown, attempt: Attempt): boolean;
  explain(plan: ConnectionPlan, error: unknown, attempt: Attempt): { cause: string; fix: string };
  /**
   * The server refused this attempt's way of connecting (TLS, or plain). When libpq's fallback
   * made another attempt, that one's failure is the one to report.
   */
  refusesMode?: true;
}

const sqlState = (error: unknown): string | undefined => (error instanceof pg.DatabaseError ? error.code : undefined);
const errorCode = (error: unknown): string | undefined => {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
};
const messageOf = (error: unknown): string => (error instanceof Error ? error.message : String(error));

// Node's codes for a chain that does not lead to a trusted CA.
const UNTRUSTED = new Set([
  'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT',
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE',
  'UNABLE_TO_GET_ISSUER_CERT_LOCALLY',
  'UNABLE_TO_GET_ISSUER_CERT',
  'CERT_UNTRUSTED',
  'CERT_SIGNATURE_FAILURE',
  'CERT_REJECTED',
]);
const UNREACHABLE = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'ETIMEDOUT', 'EADDRNOTAVAIL']);

const ROWS: readonly Row[] = [
  {
    reason: 'encryption-required',
    step: 'tls',
    refusesMode: true,
    matches: (error, attempt) => !attempt.encrypted && sqlState(error) === '28000' && /no encryption|SSL off/.test(messageOf(error)),
    explain: (plan) => ({
      cause: 'the server requires encryption: it accepts only TLS connections',
      fix: `${plan.sslmode === 'disable' ? 'replace sslmode=disable with' : 'add'} sslmode=verify-full in ${plan.context.setting} (sslmode=require encrypts without verifying the server)`,
    }),
  },
  {
    reason: 'tls-not-offered',
    step: 'tls',
    refusesMode: true,
    matches: (error) => messageOf(error) === 'The server does not support SSL connections',
    explain: (plan) => ({
      cause: `the server does not offer TLS, and sslmode=${plan.sslmode} requires it`,
      fix: `turn ssl on at the server (it needs a certificate and key); or, only on a network you trust, use sslmode=prefer in ${plan.context.setting}`,
    }),
  },
  {
    reason: 'certificate-not-trusted',
    step: 'tls',
    matches: (error) => UNTRUSTED.has(errorCode(error) ?? ''),
    explain: (plan, error) => ({
      cause: `the server's certificate is not signed by a trusted CA (${errorCode(error)}; trusted here: ${plan.trust})`,
      fix: `give the file of the CA that signed it as sslrootcert=/path/to/ca.pem in ${plan.context.setting}${plan.context.addCaHint ? `, or ${plan.context.addCaHint}` : ''}`,
    }),
  },
  {
    reason: 'certificate-expired',
    step: 'tls',
    matches: (error) => ['CERT_HAS_EXPIRED', 'CERT_NOT_YET_VALID'].includes(errorCode(error) ?? ''),
    explain: (_plan, error) => ({
      cause: `the server's certificate is ${errorCode(error) === 'CERT_HAS_EXPIRED' ? 'expired' : 'not valid yet'}`,
      fix: "renew the server's certificate (on a managed database: rotate its certificate authority), and check this machine's clock",
    }),
  },
  {
    reason: 'host-name-mismatch',
    step: 'tls',
    matches: (error) => errorCode(error) === 'ERR_TLS_CERT_ALTNAME_INVALID',
    explain: (plan, error) => {
      const cert = (error as { cert?: { subject?: { CN?: string }; subjectaltname?: string } }).cert;
      const names = cert?.subjectaltname ?? (cert?.subject?.CN ? `CN=${cert.subject.CN}` : 'other names');
      return {
        cause: `host name mismatch: the server's certificate names ${names}, not ${plan.target.host}`,
        fix: `connect by a name the certificate holds, in ${plan.context.setting} (the endpoint name the cloud shows, not an IP address or an alias); or use sslmode=verify-ca to check the CA only`,
      };
    },
  },
  {
    reason: 'client-key',
    step: 'tls',
    matches: (error) => /BAD_DECRYPT/.test(errorCode(error) ?? ''),
    explain: (plan, _error, attempt) => {
      const given = typeof attempt.config.ssl === 'object' && attempt.config.ssl?.passphrase !== undefined;
      return {
        cause: 'the client key (sslkey) cannot be decrypted',
        fix: given
          ? `check sslpassword in ${plan.context.setting}`
          : `add sslpassword=<the passphrase of sslkey> to ${plan.context.setting}`,
      };
    },
  },
  {
    reason: 'password',
    step: 'authentication',
    matches: (error) => sqlState(error) === '28P01',
    explain: (plan) => ({
      cause: `password authentication failed for ${plan.target.user}`,
      fix: `check the password of ${plan.target.user} in ${plan.context.setting}; characters such as @ : / ? # % in it must be percent-encoded (@ as %40)`,
    }),
  },
  {
    reason: 'no-such-role',
    step: 'authentication',
    matches: (error) => sqlState(error) === '28000' && /role .* does not exist/.test(messageOf(error)),
    explain: (plan) => ({
      cause: `the server has no role ${plan.target.user}`,
      fix: `check the user name in ${plan.context.setting}, or create the role (docs/local-target.md)`,
    }),
  },
  {
    reason: 'pg-hba',
    step: 'authentication',
    matches: (error) => sqlState(error) === '28000' && /pg_hba\.conf/.test(messageOf(error)),
    explain: (plan, error, attempt) => ({
      cause: `pg_hba.conf rejects this connection${attempt.encrypted ? ' over TLS' : ' without TLS'} (the server said: ${messageOf(error)})`,
      fix: `allow user ${plan.target.user}, database "${plan.target.database}" from this machine's address in the server's pg_hba.conf and reload it; on a managed database, check the user and database names`,
    }),
  },
  {
    reason: 'no-such-database',
    step: 'database',
    matches: (error) => sqlState(error) === '3D000',
    explain: (plan) => ({
      cause: `the server has no database "${plan.target.database}"`,
      fix: `check the database name (the path of the URL) in ${plan.context.setting}`,
    }),
  },
  {
    reason: 'unreachable',
    step: (error) => (errorCode(error) === 'ENOTFOUND' || errorCode(error) === 'EAI_AGAIN' ? 'dns' : 'tcp'),
    matches: (error) => UNREACHABLE.has(errorCode(error) ?? '') || /timeout|timed out/i.test(messageOf(error)),
    explain: (plan, error) => {
      const { host, port } = plan.target;
      const code = errorCode(error);
      const cause =
        code === 'ENOTFOUND' || code === 'EAI_AGAIN'
          ? `the host name ${host} does not resolve`
          : code === 'ECONNREFUSED'
            ? `nothing accepts connections at ${host}:${port}`
            : `${host}:${port} cannot be reached (${code ?? messageOf(error)})`;
      return {
        cause,
        fix: `check the host and port in ${plan.context.setting}, that the server runs and listens on that address, and that firewalls or security groups let this machine reach TCP ${port}`,
      };
    },
  },
];

/** The failure that says most: the one past any refusal of a way of connecting, else the last. */
function decisive(failures: readonly Failure[]): Failure {
  const refused = (f: Failure) => ROWS.some((r) => r.refusesMode && r.matches(f.error, f.attempt));
  return failures.find((f) => !refused(f)) ?? failures[failures.length - 1]!;
}

export function explainConnectFailure(
  plan: ConnectionPlan,
  failures: readonly Failure[],
): { message: string; cause: string; fix: string; reason: string; step: ConnectStep; error: unknown } {
  const failure = decisive(failures);
  const row = ROWS.find((r) => r.matches(failure.error, failure.attempt));
  const { cause, fix } = row
    ? row.explain(plan, failure.error, failure.attempt)
    : {
        cause: messageOf(failure.error),
        fix: `check that this machine can reach the database on TCP ${plan.target.port}, and the password of ${plan.target.user} in ${plan.context.setting}`,
      };
  const step = row ? (typeof row.step === 'function' ? row.step(failure.error) : row.step) : 'tcp';
  return { message: `${cause}; fix: ${fix}`, cause, fix, reason: row?.reason ?? 'other', step, error: failure.error };
}

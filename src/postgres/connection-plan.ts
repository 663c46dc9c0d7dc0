// The shapes of a connection plan: what a URL asks for (sslmode, trust) and the attempts that
// follow from it, apart from the code that makes them so that connect-errors.ts can explain a
// failure of a plan without importing the connecting code.
import type pg from 'pg';

export const SSL_MODES = ['disable', 'allow', 'prefer', 'require', 'verify-ca', 'verify-full'] as const;
export type SslMode = (typeof SSL_MODES)[number];

export interface TlsDefaults {
  /** The sslmode when the URL names none. */
  sslmode: SslMode;
  /** Why that mode, for people: "libpq's default", "the default for --managed-a". */
  reason: string;
  /** The CAs that verify the server's certificate when the URL names no sslrootcert; absent: Node's store. */
  ca?: { certificates: string[]; description: string };
}

export const LIBPQ_DEFAULTS: TlsDefaults = { sslmode: 'prefer', reason: "libpq's default" };

export interface ConnectionContext {
  /** Where the URL comes from, as fixes name it: postgresql.connection_url, TUNER_DATABASE_URL. */
  setting: string;
  defaults?: TlsDefaults;
  /** One more way to give a CA, named when a certificate is not trusted. */
  addCaHint?: string;
}

/** How far an attempt checks the server: not at all, its certificate's CA, or the CA and its host name. */
export type Verification = 'none' | 'ca' | 'full';

export interface Attempt {
  encrypted: boolean;
  verification: Verification;
  config: pg.ClientConfig;
}

export interface ConnectionPlan {
  context: ConnectionContext;
  sslmode: SslMode;
  /** "the connection URL" or the default's reason. */
  sslmodeReason: string;
  /** What verifies the server's certificate, when something does. */
  trust: string;
  /** Where the URL points, for messages (never the password). */
  target: { host: string; port: string; database: string; user: string };
  /** In order; the next one only when the one before was refused in a way that falls back. */
  attempts: Attempt[];
}

/** What was agreed with the server, for the --check line and the logs. */
export interface ConnectionSecurity {
  sslmode: SslMode;
  sslmodeReason: string;
  encrypted: boolean;
  verification: Verification;
  trust: string;
  host: string;
}

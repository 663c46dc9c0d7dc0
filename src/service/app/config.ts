// tuner-service's configuration: command-line flags, then environment variables, then defaults
// (a flag wins over its variable). Validated with messages that name the flag or variable.
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { createSecureContext } from 'node:tls';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { HOST_PORT_PATTERN, hostAndPort } from '../../protocol/host-port.ts';
import { REPORT_INTERVAL_SECONDS } from '../../protocol/v1.ts';
import { RoleSchema, UsernameSchema } from '../people/inputs.ts';
import type { Role } from '../people/store.ts';
import { WebhookConfigSchema } from '../notify/webhook.ts';
import { splitStorageHosts } from '../storage/postgres-hosts.ts';

export interface ServiceConfig {
  host: string;
  port: number;
  dataDir: string;
  /** PostgreSQL storage when set; PGlite in dataDir otherwise. Secret: never printed. */
  databaseUrl: string | undefined;
  databasePoolSize: number;
  /** The first admin's password; generated and printed once when unset. Secret. */
  adminPassword: string | undefined;
  adminUsername: string;
  /** The address agents and browsers use; also decides Secure cookies when it is https. */
  publicUrl: string | undefined;
  /** Behind reverse proxies: which of them to trust for X-Forwarded-Proto/For (https detection,
   * the client address): none (false), the nearest N, or those at these addresses/CIDR ranges. */
  trustProxy: false | number | string[];
  reportIntervalSeconds: number;
  leaseMinSeconds: number;
  retentionDays: number;
  retentionReportsPerDatabase: number;
  /** Audit entries are kept this many days, then deleted (the only delete of the audit log). */
  auditRetentionDays: number;
  /** The container image shown in the setup page's docker command. */
  agentImage: string;
  /** Where the tuner-agent binaries and their SHA256SUMS are (served under /downloads/). */
  downloadsDir: string;
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  /** Serve HTTPS with this certificate and key (PEM, read at start), without a reverse proxy. */
  tls?: { cert: string; key: string; certFile: string };
  /** /metrics on the main listener behind this bearer token (src/service/app/metrics.ts). Secret. */
  metricsToken: string | undefined;
  /** /metrics on a listener of its own. */
  metricsListen: { host: string; port: number } | undefined;
  /** The service-wide webhook: where every organization's watch events are POSTed, beside each
   * organization's own webhooks (docs/notifications.md); none when unset. */
  webhookUrl: string | undefined;
  /** The webhook's signing secret, required with its URL. Secret: never printed. */
  webhookSecret: string | undefined;
  /** Addresses and CIDR ranges organizations' webhooks may reach although not public
   * (notify/destinations.ts); empty: public addresses only. */
  webhookAllowNetworks: string[];
  /** Single sign-on through an OpenID provider (people/sso.ts), when TUNER_SSO_ISSUER is set. */
  sso: SsoConfig | undefined;
  /** False when TUNER_PASSWORD_LOGIN=off: only the break-glass admin logs in with a password. */
  passwordLogin: { enabled: true } | { enabled: false; breakGlassAdmin: string };
}

/** What single sign-on needs to know (docs/people.md, "Single sign-on"). */
export interface SsoConfig {
  issuer: string;
  /** The provider's name on the login page's button. */
  name: string;
  clientId: string;
  /** Secret: never printed, logged or audited. */
  clientSecret: string;
  /** Where the provider sends the browser back: TUNER_PUBLIC_URL + /login/sso/callback. */
  redirectUrl: string;
  scopes: string;
  /** The claim (of the ID token or, when absent there, of the userinfo answer) listing groups. */
  groupsClaim: string;
  /** Group → role; the highest role of the person's groups wins. */
  roles: ReadonlyMap<string, Role>;
  /** The role of a person none of whose groups is mapped; null: refused. */
  defaultRole: Role | null;
  /** Only people whose (verified) email is at one of these domains; empty: anyone. */
  emailDomains: readonly string[];
  /** The name of the organization SSO users join. */
  organization: string;
}

export class ConfigError extends Error {
  override name = 'ConfigError';
}

const integer = (min: number, max: number) =>
  z.coerce
    .number({ error: 'expected a whole number' })
    .int('expected a whole number')
    .min(min, `expected at least ${min}`)
    .max(max, `expected at most ${max}`);

/** An address or a CIDR range, e.g. 10.0.0.5 or 10.0.0.0/8 or fd00::/8. */
function isAddressOrRange(text: string): boolean {
  const [address = '', prefix, ...rest] = text.split('/');
  const family = isIP(address);
  if (family === 0 || rest.length > 0) return false;
  return prefix === undefined || (/^\d{1,3}$/.test(prefix) && Number(prefix) <= (family === 4 ? 32 : 128));
}

/** Addresses or CIDR ranges separated by commas, each trimmed; null when one is neither. */
function addressesOrRanges(value: string): string[] | null {
  const ranges = value.split(',').map((part) => part.trim());
  return ranges.every(isAddressOrRange) ? ranges : null;
}

/** Only proxies the operator names are trusted: `true` means the one in front of the service,
 * whose own entry is the last of X-Forwarded-For (what comes before it, the client may forge). */
const trustProxy = z
  .string()
  .trim()
  .transform((value, ctx): false | number | string[] => {
    const lower = value.toLowerCase();
    if (['false', 'no', '0'].includes(lower)) return false;
    if (['true', 'yes'].includes(lower)) return 1;
    if (/^\d{1,2}$/.test(value) && Number(value) <= 10) return Number(value);
    const ranges = addressesOrRanges(value);
    if (ranges) return ranges;
    ctx.addIssue({
      code: 'custom',
      message:
        'expected false, true (one proxy in front of the service), the number of proxies in front (1 to 10), or their addresses or CIDR ranges separated by commas',
    });
    return z.NEVER;
  });

/** What organizations' webhooks may reach beyond public addresses: none unless the operator says. */
const webhookAllowNetworks = z
  .string()
  .trim()
  .transform((value, ctx): string[] => {
    if (value === '') return [];
    const ranges = addressesOrRanges(value);
    if (ranges) return ranges;
    ctx.addIssue({
      code: 'custom',
      message: 'expected addresses or CIDR ranges (IPv4 or IPv6) separated by commas, e.g. 10.20.0.0/16, 127.0.0.1',
    });
    return z.NEVER;
  });

const listen = z
  .string()
  .regex(HOST_PORT_PATTERN, 'expected HOST:PORT, e.g. 127.0.0.1:8080 or 0.0.0.0:8080')
  .transform((v) => hostAndPort(v)!)
  .refine((v) => v.port <= 65535, 'the port must be at most 65535');

/** One host, or several (postgresql://u@h1:5432,h2:5432/db?target_session_attrs=read-write): each
 * host's URL must parse, and target_session_attrs be one the service can use. */
const postgresUrl = z.string().superRefine((v, ctx) => {
  const expected = 'expected a URL postgresql://user:password@host:5432/dbname (or host1:5432,host2:5432 for several hosts)';
  if (!/^postgres(ql)?:\/\//.test(v)) return void ctx.addIssue({ code: 'custom', message: expected });
  try {
    if (!splitStorageHosts(v, 'TUNER_DATABASE_URL').urls.every((url) => URL.canParse(url)))
      ctx.addIssue({ code: 'custom', message: expected });
  } catch (err) {
    ctx.addIssue({ code: 'custom', message: (err as Error).message.replace(/^TUNER_DATABASE_URL: /, '') });
  }
});

const httpUrl = z
  .string()
  .refine((v) => /^https?:\/\//.test(v) && URL.canParse(v), 'expected an http(s) URL such as https://tuner.example.com')
  .transform((v) => v.replace(/\/+$/, ''));

/** An issuer is https, except on loopback (a provider on the same host, as in tests). */
const ssoIssuer = z
  .string()
  .refine((v) => URL.canParse(v), 'expected the issuer URL, e.g. https://example.okta.com')
  .refine((v) => {
    const url = new URL(v);
    return url.protocol === 'https:' || (url.protocol === 'http:' && ['127.0.0.1', 'localhost', '[::1]'].includes(url.hostname));
  }, 'expected an https:// issuer URL (http:// only on loopback)')
  .refine((v) => !new URL(v).search && !new URL(v).hash && !new URL(v).username, 'expected no query, fragment or credentials')
  .transform((v) => v.replace(/\/+$/, ''));

/** `group=role` pairs separated by commas, e.g. tuner-admins=admin,dba=operator. */
const ssoRoles = z.string().transform((value, ctx): ReadonlyMap<string, Role> => {
  const roles = new Map<string, Role>();
  for (const pair of value.split(',')) {
    const at = pair.lastIndexOf('=');
    const group = pair.slice(0, at).trim();
    const role = RoleSchema.safeParse(pair.slice(at + 1).trim());
    if (at <= 0 || !group || !role.success) {
      ctx.addIssue({
        code: 'custom',
        message: `expected group=role pairs separated by commas (roles: viewer, operator, admin), e.g. tuner-admins=admin,dba=operator; "${pair.trim()}" is not one`,
      });
      return z.NEVER;
    }
    roles.set(group, role.data);
  }
  return roles;
});

const emailDomains = z
  .string()
  .transform((v) => v.split(',').map((d) => d.trim().toLowerCase().replace(/^@/, '')))
  .refine(
    (ds) => ds.every((d) => /^[a-z0-9-]+(\.[a-z0-9-]+)+$/.test(d)),
    'expected domains separated by commas, e.g. example.com,example.org',
  );

/** What `npm run build:agent` writes: the package's own dist/. */
export const DEFAULT_DOWNLOADS_DIR = join(import.meta.dirname, '..', '..', '..', 'dist');

/** Where each setting comes from: its flag (if any), its variable, its schema and default. */
const SETTINGS = {
  listen: { flag: 'listen', env: 'TUNER_LISTEN', schema: listen, default: '127.0.0.1:8080' },
  dataDir: { flag: 'data-dir', env: 'TUNER_DATA_DIR', schema: z.string().min(1), default: './tuner-data' },
  databaseUrl: { flag: null, env: 'TUNER_DATABASE_URL', schema: postgresUrl, default: undefined },
  databasePoolSize: { flag: null, env: 'TUNER_DATABASE_POOL_SIZE', schema: integer(1, 200), default: '10' },
  adminPassword: {
    flag: null,
    env: 'TUNER_ADMIN_PASSWORD',
    schema: z.string().min(12, 'expected at least 12 characters').max(200),
    default: undefined,
  },
  adminUsername: {
    flag: null,
    env: 'TUNER_ADMIN_USERNAME',
    schema: UsernameSchema,
    default: 'admin',
  },
  publicUrl: { flag: 'public-url', env: 'TUNER_PUBLIC_URL', schema: httpUrl, default: undefined },
  trustProxy: { flag: null, env: 'TUNER_TRUST_PROXY', schema: trustProxy, default: 'false' },
  reportIntervalSeconds: {
    flag: null,
    env: 'TUNER_REPORT_INTERVAL_SECONDS',
    schema: integer(REPORT_INTERVAL_SECONDS.min, REPORT_INTERVAL_SECONDS.max),
    default: '60',
  },
  leaseMinSeconds: { flag: null, env: 'TUNER_LEASE_MIN_SECONDS', schema: integer(1, 3600), default: '30' },
  retentionDays: { flag: null, env: 'TUNER_RETENTION_DAYS', schema: integer(1, 3650), default: '30' },
  retentionReportsPerDatabase: { flag: null, env: 'TUNER_RETENTION_REPORTS', schema: integer(100, 10_000_000), default: '20000' },
  auditRetentionDays: { flag: null, env: 'TUNER_AUDIT_RETENTION_DAYS', schema: integer(1, 36_500), default: '400' },
  agentImage: {
    flag: null,
    env: 'TUNER_AGENT_IMAGE',
    schema: z.string().regex(/^[A-Za-z0-9._/:@<>-]{1,200}$/, 'expected an image reference such as registry.example.com/tuner-agent:latest'),
    default: '<REGISTRY>/tuner-agent:latest',
  },
  downloadsDir: { flag: 'downloads-dir', env: 'TUNER_DOWNLOADS_DIR', schema: z.string().min(1), default: DEFAULT_DOWNLOADS_DIR },
  tlsCert: { flag: 'tls-cert', env: 'TUNER_TLS_CERT', schema: z.string().min(1), default: undefined },
  tlsKey: { flag: 'tls-key', env: 'TUNER_TLS_KEY', schema: z.string().min(1), default: undefined },
  metricsToken: {
    flag: null,
    env: 'TUNER_METRICS_TOKEN',
    schema: z
      .string()
      .regex(/^[\x21-\x7e]{16,200}$/, 'expected 16 to 200 printable characters without spaces, e.g. from: openssl rand -hex 24'),
    default: undefined,
  },
  metricsListen: { flag: 'metrics-listen', env: 'TUNER_METRICS_LISTEN', schema: listen, default: undefined },
  webhookUrl: { flag: null, env: 'TUNER_WEBHOOK_URL', schema: WebhookConfigSchema.shape.url, default: undefined },
  webhookSecret: { flag: null, env: 'TUNER_WEBHOOK_SECRET', schema: WebhookConfigSchema.shape.secret, default: undefined },
  // '' (none) rather than undefined: the setting is always a list.
  webhookAllowNetworks: { flag: null, env: 'TUNER_WEBHOOK_ALLOW_NETWORKS', schema: webhookAllowNetworks, default: '' },
  ssoIssuer: { flag: null, env: 'TUNER_SSO_ISSUER', schema: ssoIssuer, default: undefined },
  ssoName: {
    flag: null,
    env: 'TUNER_SSO_NAME',
    schema: z.string().regex(/^[\x20-\x7e\u00a0-\uffff]{1,40}$/, 'expected 1 to 40 printable characters (e.g. Okta)'),
    default: 'single sign-on',
  },
  ssoClientId: {
    flag: null,
    env: 'TUNER_SSO_CLIENT_ID',
    schema: z.string().regex(/^[\x21-\x7e]{1,200}$/, 'expected the client id the provider gave (printable, no spaces)'),
    default: undefined,
  },
  ssoClientSecret: {
    flag: null,
    env: 'TUNER_SSO_CLIENT_SECRET',
    schema: z.string().regex(/^[\x20-\x7e]{8,500}$/, 'expected the client secret the provider gave (8 to 500 printable characters)'),
    default: undefined,
  },
  ssoScopes: {
    flag: null,
    env: 'TUNER_SSO_SCOPES',
    schema: z
      .string()
      .regex(/^[\x21-\x7e]+( [\x21-\x7e]+)*$/, 'expected scopes separated by single spaces, e.g. openid profile email')
      .refine((v) => v.split(' ').includes('openid'), 'expected the scope openid among them'),
    default: 'openid profile email',
  },
  ssoGroupsClaim: { flag: null, env: 'TUNER_SSO_GROUPS_CLAIM', schema: z.string().regex(/^[\x21-\x7e]{1,200}$/), default: 'groups' },
  ssoRoles: { flag: null, env: 'TUNER_SSO_ROLES', schema: ssoRoles, default: undefined },
  ssoDefaultRole: {
    flag: null,
    env: 'TUNER_SSO_DEFAULT_ROLE',
    schema: z.union([z.literal('none').transform(() => null), RoleSchema], { error: 'expected none, viewer, operator or admin' }),
    default: 'none',
  },
  ssoEmailDomains: { flag: null, env: 'TUNER_SSO_EMAIL_DOMAINS', schema: emailDomains, default: undefined },
  ssoOrganization: { flag: null, env: 'TUNER_SSO_ORGANIZATION', schema: z.string().min(1).max(200), default: undefined },
  passwordLogin: {
    flag: null,
    env: 'TUNER_PASSWORD_LOGIN',
    schema: z.enum(['on', 'off'], { error: 'expected on or off' }),
    default: 'on',
  },
  breakGlassAdmin: { flag: null, env: 'TUNER_BREAK_GLASS_ADMIN', schema: UsernameSchema, default: undefined },
  logLevel: {
    flag: null,
    env: 'TUNER_LOG_LEVEL',
    schema: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']),
    default: 'info',
  },
} as const;

export const HELP = `tuner-service: the tuning service that tuner-agents report to, with its web pages

Usage:
  tuner-service [--listen HOST:PORT] [--data-dir DIR] [--public-url URL] [--downloads-dir DIR]
                [--tls-cert FILE --tls-key FILE] [--metrics-listen HOST:PORT]

Options (each also an environment variable; a flag wins):
  --listen HOST:PORT    TUNER_LISTEN, default 127.0.0.1:8080
  --data-dir DIR        TUNER_DATA_DIR, default ./tuner-data (the embedded storage)
  --public-url URL      TUNER_PUBLIC_URL, the address agents use (shown in agent.yaml)
  --downloads-dir DIR   TUNER_DOWNLOADS_DIR, the tuner-agent binaries and SHA256SUMS that
                        /install.sh and /install.ps1 install (default: the package's dist/,
                        npm run build:agent)
  --tls-cert FILE       TUNER_TLS_CERT, serve HTTPS with this PEM certificate (chain)
  --tls-key FILE        TUNER_TLS_KEY, and this PEM private key (HSTS and Secure cookies follow)
  --metrics-listen HOST:PORT
                        TUNER_METRICS_LISTEN, serve Prometheus /metrics on a listener of its
                        own (docs/metrics.md)
  --help, --version

Environment only:
  TUNER_DATABASE_URL              PostgreSQL storage instead of the embedded one
  TUNER_ADMIN_PASSWORD            the first admin's password (else generated and printed once)
  TUNER_REPORT_INTERVAL_SECONDS   default report interval (60)
  TUNER_METRICS_TOKEN             serve /metrics on the main listener behind this bearer token
  TUNER_WEBHOOK_URL, TUNER_WEBHOOK_SECRET
                                  POST the watch's events there, signed (docs/notifications.md)
  TUNER_WEBHOOK_ALLOW_NETWORKS    addresses or CIDR ranges organizations' webhooks may reach
                                  although private (10.20.0.0/16, 127.0.0.1); default none
  TUNER_SSO_ISSUER, TUNER_SSO_CLIENT_ID, TUNER_SSO_CLIENT_SECRET, TUNER_SSO_ROLES
                                  single sign-on through an OpenID provider (docs/people.md)
  TUNER_PASSWORD_LOGIN=off, TUNER_BREAK_GLASS_ADMIN
                                  with SSO: only this admin logs in with a password
  See docs/service.md for every variable.
`;

/** Variables whose values never appear in a message (a webhook URL's query may hold a token). */
const SECRET_VARIABLES: ReadonlySet<string> = new Set([
  'TUNER_DATABASE_URL',
  'TUNER_ADMIN_PASSWORD',
  'TUNER_METRICS_TOKEN',
  'TUNER_WEBHOOK_URL',
  'TUNER_WEBHOOK_SECRET',
  'TUNER_SSO_CLIENT_SECRET',
]);

export type CliRequest = { kind: 'help' } | { kind: 'version' } | { kind: 'run'; config: ServiceConfig };

export function parseServiceArgs(argv: readonly string[], env: NodeJS.ProcessEnv): CliRequest {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: [...argv],
      options: {
        listen: { type: 'string' },
        'data-dir': { type: 'string' },
        'public-url': { type: 'string' },
        'downloads-dir': { type: 'string' },
        'tls-cert': { type: 'string' },
        'tls-key': { type: 'string' },
        'metrics-listen': { type: 'string' },
        help: { type: 'boolean' },
        version: { type: 'boolean' },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (err) {
    throw new ConfigError(`${(err as Error).message}\n\n${HELP}`);
  }
  if (values['help']) return { kind: 'help' };
  if (values['version']) return { kind: 'version' };

  const problems: string[] = [];
  const resolved: Record<string, unknown> = {};
  for (const [name, setting] of Object.entries(SETTINGS)) {
    const fromFlag = setting.flag ? values[setting.flag] : undefined;
    const fromEnv = env[setting.env];
    const raw = typeof fromFlag === 'string' ? fromFlag : fromEnv !== undefined && fromEnv !== '' ? fromEnv : setting.default;
    const source = typeof fromFlag === 'string' ? `--${setting.flag}` : fromEnv ? setting.env : 'default';
    if (raw === undefined) {
      resolved[name] = undefined;
      continue;
    }
    const parsed = (setting.schema as z.ZodType).safeParse(raw);
    if (parsed.success) resolved[name] = parsed.data;
    else {
      const secret = SECRET_VARIABLES.has(setting.env);
      const shown = secret ? '' : ` (got "${String(raw).slice(0, 80)}")`;
      problems.push(`${source}: ${parsed.error.issues[0]?.message ?? 'invalid'}${shown}`);
    }
  }
  const { tlsCert, tlsKey } = resolved as { tlsCert?: string; tlsKey?: string };
  if ((resolved['webhookUrl'] === undefined) !== (resolved['webhookSecret'] === undefined) && problems.length === 0)
    problems.push('TUNER_WEBHOOK_URL and TUNER_WEBHOOK_SECRET go together: the receiver checks each request with the secret');
  const tls = tlsCert || tlsKey ? readTls(tlsCert, tlsKey, problems) : undefined;
  const sso = problems.length === 0 ? ssoOf(resolved as unknown as SsoSettings, problems) : undefined;
  const passwordLogin = problems.length === 0 ? passwordLoginOf(resolved as unknown as SsoSettings, sso, problems) : undefined;
  if (problems.length > 0) throw new ConfigError(problems.join('\n'));
  const {
    listen: address,
    tlsCert: _cert,
    tlsKey: _key,
    ...rest
  } = resolved as { listen: { host: string; port: number }; tlsCert?: string; tlsKey?: string } & Omit<
    ServiceConfig,
    'host' | 'port' | 'tls'
  >;
  const settings = Object.fromEntries(Object.entries(rest).filter(([key]) => !SSO_SETTINGS.has(key))) as typeof rest;
  return {
    kind: 'run',
    config: { ...settings, host: address.host, port: address.port, ...(tls && { tls }), sso, passwordLogin: passwordLogin! },
  };
}

/** The single sign-on settings as read, before they make an SsoConfig. */
interface SsoSettings {
  ssoIssuer?: string;
  ssoName: string;
  ssoClientId?: string;
  ssoClientSecret?: string;
  ssoScopes: string;
  ssoGroupsClaim: string;
  ssoRoles?: ReadonlyMap<string, Role>;
  ssoDefaultRole: Role | null;
  ssoEmailDomains?: string[];
  ssoOrganization?: string;
  passwordLogin: 'on' | 'off';
  breakGlassAdmin?: string;
  adminUsername: string;
  publicUrl?: string;
}
const SSO_SETTINGS = new Set(Object.keys(SETTINGS).filter((key) => key.startsWith('sso') || key === 'breakGlassAdmin'));

function ssoOf(s: SsoSettings, problems: string[]): SsoConfig | undefined {
  const given = [...SSO_SETTINGS].filter((key) => key !== 'breakGlassAdmin' && key in s && s[key as keyof SsoSettings] !== undefined);
  if (!s.ssoIssuer) {
    // Only the settings with a default may be there without an issuer.
    const stray = given.filter((key) => !['ssoName', 'ssoScopes', 'ssoGroupsClaim', 'ssoDefaultRole'].includes(key));
    if (stray.length > 0)
      problems.push(`${stray.map(envOf).join(', ')}: set TUNER_SSO_ISSUER too (single sign-on needs its provider's issuer URL)`);
    return undefined;
  }
  const missing = (['ssoClientId', 'ssoClientSecret'] as const).filter((key) => !s[key]).map(envOf);
  if (!s.publicUrl) missing.push('TUNER_PUBLIC_URL (the provider sends browsers back to <public URL>/login/sso/callback)');
  if (!s.ssoRoles && !s.ssoDefaultRole) missing.push('TUNER_SSO_ROLES or TUNER_SSO_DEFAULT_ROLE (else nobody could log in)');
  if (missing.length > 0) {
    problems.push(`TUNER_SSO_ISSUER is set: single sign-on also needs ${missing.join(', ')}`);
    return undefined;
  }
  return {
    issuer: s.ssoIssuer,
    name: s.ssoName,
    clientId: s.ssoClientId!,
    clientSecret: s.ssoClientSecret!,
    redirectUrl: `${s.publicUrl!}/login/sso/callback`,
    scopes: s.ssoScopes,
    groupsClaim: s.ssoGroupsClaim,
    roles: s.ssoRoles ?? new Map(),
    defaultRole: s.ssoDefaultRole,
    emailDomains: s.ssoEmailDomains ?? [],
    organization: s.ssoOrganization ?? s.adminUsername,
  };
}

/** Password login stays on unless switched off, which needs SSO and one break-glass admin. */
function passwordLoginOf(s: SsoSettings, sso: SsoConfig | undefined, problems: string[]): ServiceConfig['passwordLogin'] | undefined {
  if (s.passwordLogin === 'on') {
    if (s.breakGlassAdmin)
      problems.push('TUNER_BREAK_GLASS_ADMIN: only with TUNER_PASSWORD_LOGIN=off (with it on, everyone may use a password)');
    return { enabled: true };
  }
  if (!sso) problems.push('TUNER_PASSWORD_LOGIN=off needs single sign-on (TUNER_SSO_ISSUER …): nobody could log in otherwise');
  else if (!s.breakGlassAdmin)
    problems.push('TUNER_PASSWORD_LOGIN=off needs TUNER_BREAK_GLASS_ADMIN: the one local admin who can log in when the provider is down');
  else return { enabled: false, breakGlassAdmin: s.breakGlassAdmin };
  return undefined;
}

const envOf = (key: string): string => (SETTINGS as Record<string, { env: string }>)[key]!.env;

/** The certificate and key, both given, readable, PEM, and belonging together. */
function readTls(certFile: string | undefined, keyFile: string | undefined, problems: string[]): ServiceConfig['tls'] {
  if (!certFile || !keyFile) {
    problems.push(
      `${certFile ? '--tls-key (TUNER_TLS_KEY)' : '--tls-cert (TUNER_TLS_CERT)'} is missing: HTTPS needs both a certificate and its key`,
    );
    return undefined;
  }
  const read = (file: string, what: string): string | undefined => {
    try {
      return readFileSync(file, 'utf8');
    } catch (err) {
      problems.push(`${what}: cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? String(err)})`);
      return undefined;
    }
  };
  const cert = read(certFile, '--tls-cert');
  const key = read(keyFile, '--tls-key');
  if (cert === undefined || key === undefined) return undefined;
  try {
    createSecureContext({ cert, key });
  } catch (err) {
    // The message names the cause (no PEM, key mismatch); it never holds the key itself.
    problems.push(`--tls-cert ${certFile} / --tls-key ${keyFile}: ${(err as Error).message}`);
    return undefined;
  }
  return { cert, key, certFile };
}

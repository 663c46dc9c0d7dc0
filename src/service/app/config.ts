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
import { UsernameSchema } from '../people/inputs.ts';
import { WebhookConfigSchema } from '../notify/webhook.ts';

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
  /** Where the watch's events are POSTed (docs/notifications.md); none when unset. */
  webhookUrl: string | undefined;
  /** The webhook's signing secret, required with its URL. Secret: never printed. */
  webhookSecret: string | undefined;
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
    const ranges = value.split(',').map((part) => part.trim());
    if (ranges.every(isAddressOrRange)) return ranges;
    ctx.addIssue({
      code: 'custom',
      message:
        'expected false, true (one proxy in front of the service), the number of proxies in front (1 to 10), or their addresses or CIDR ranges separated by commas',
    });
    return z.NEVER;
  });

const listen = z
  .string()
  .regex(HOST_PORT_PATTERN, 'expected HOST:PORT, e.g. 127.0.0.1:8080 or 0.0.0.0:8080')
  .transform((v) => hostAndPort(v)!)
  .refine((v) => v.port <= 65535, 'the port must be at most 65535');

const postgresUrl = z
  .string()
  .refine((v) => /^postgres(ql)?:\/\//.test(v) && URL.canParse(v), 'expected a URL postgresql://user:password@host:5432/dbname');

const httpUrl = z
  .string()
  .refine((v) => /^https?:\/\//.test(v) && URL.canParse(v), 'expected an http(s) URL such as https://tuner.example.com')
  .transform((v) => v.replace(/\/+$/, ''));

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
                        /install.sh installs (default: the package's dist/, npm run build:agent)
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
  See docs/service.md for every variable.
`;

/** Variables whose values never appear in a message (a webhook URL's query may hold a token). */
const SECRET_VARIABLES: ReadonlySet<string> = new Set([
  'TUNER_DATABASE_URL',
  'TUNER_ADMIN_PASSWORD',
  'TUNER_METRICS_TOKEN',
  'TUNER_WEBHOOK_URL',
  'TUNER_WEBHOOK_SECRET',
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
  return { kind: 'run', config: { ...rest, host: address.host, port: address.port, ...(tls && { tls }) } };
}

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

// How the agent reaches the outside: the tuning service, Cloud A's APIs and Cloud B's. In the
// shops that run managed databases, outbound traffic goes through an egress proxy and internal
// services carry a company CA; this module sets both once for every client the agent has:
// - the proxy: `tuner.proxy_url` when set, else the usual HTTPS_PROXY / HTTP_PROXY / NO_PROXY
//   (either case), decided per URL by `proxy-from-env`. The service client's fetch gets undici's
//   EnvHttpProxyAgent, the AWS SDK a Node agent that routes each request through
//   `https-proxy-agent` or directly, and the Azure SDK reads the same variables in its pipeline's
//   own proxy policy (so an explicit proxy_url is put into them for it).
// - instance metadata (IMDS at 169.254.169.254, ECS task credentials at 169.254.170.2, and their
//   IPv6 forms) is never proxied: it answers only on the host itself, and a proxy would receive
//   the host's credentials. They are added to NO_PROXY for every client.
// - the CA: `tuner.ca_file` is added to the process's default CA store, which every TLS client in
//   the process uses (fetch, the SDKs, a TLS proxy), besides Node's bundled CAs and
//   NODE_EXTRA_CA_CERTS.
import { readFileSync } from 'node:fs';
import { Agent as HttpAgent, type ClientRequest } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import tls from 'node:tls';
import { NodeHttpHandler } from '@smithy/node-http-handler';
import { Agent as RoutingBase, type AgentConnectOpts } from 'agent-base';
import { HttpsProxyAgent } from 'https-proxy-agent';
import { getProxyForUrl } from 'proxy-from-env';
import { EnvHttpProxyAgent } from 'undici';
import { redact, registerConnectionString } from '../base/redact.ts';
import type { Outbound, Peer } from '../../target/outbound.ts';
import type { PreflightCheck } from '../../target/preflight.ts';

export type { Outbound, Peer };

/** Link-local metadata endpoints of the clouds: never through a proxy. */
export const METADATA_HOSTS = ['169.254.169.254', '169.254.170.2', '[fd00:ec2::254]', 'fd00:ec2::254'] as const;

export interface OutboundSettings {
  proxyUrl?: string;
  caFile?: string;
}

export class OutboundError extends Error {
  override name = 'OutboundError';
}

function envValue(env: NodeJS.ProcessEnv, name: string): string | undefined {
  return env[name] || env[name.toLowerCase()] || undefined;
}

/** Reads `caFile` as PEM certificates, with an error that names the key and the file. */
function readCaFile(caFile: string): string[] {
  let text: string;
  try {
    text = readFileSync(caFile, 'utf8');
  } catch (err) {
    throw new OutboundError(
      `tuner.ca_file: cannot read ${caFile} (${(err as NodeJS.ErrnoException).code ?? String(err)}): give a PEM file of CA certificates`,
    );
  }
  const certs = text.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
  if (certs.length === 0) throw new OutboundError(`tuner.ca_file: ${caFile} holds no PEM certificate (-----BEGIN CERTIFICATE-----)`);
  return certs;
}

/** A proxy variable every client can read, or an OutboundError naming it (the password masked):
 * the clients parse it as a URL, and a `@`, `/` or `:` left unencoded in the password ends the
 * user information, or the host, elsewhere (`http://pu:Hp1/Jo2@Ki3@host:3128`). */
function refuseMalformedProxy(name: string, value: string): void {
  if (URL.canParse(value)) return;
  throw new OutboundError(
    // No `@` after the URL: the masking would take the rest of the line for its password.
    `${name} is not a valid proxy URL: percent-encode the user name and password in it (%40 for an at sign, %2F for a slash, %3A for a colon, %23 for a hash): ${redact(value)}`,
  );
}

/**
 * Sets the process's outbound routes from `settings` and the environment, which it updates (the
 * Azure SDK and proxy-from-env read process.env). Call once, before any client is made.
 */
export function configureOutbound(settings: OutboundSettings): Outbound {
  const env = process.env;
  if (settings.caFile) {
    tls.setDefaultCACertificates([...tls.getCACertificates('default'), ...readCaFile(settings.caFile)]);
  }
  if (settings.proxyUrl) {
    registerConnectionString(settings.proxyUrl);
    for (const name of ['HTTPS_PROXY', 'https_proxy', 'HTTP_PROXY', 'http_proxy']) env[name] = settings.proxyUrl;
  }
  for (const name of ['HTTPS_PROXY', 'HTTP_PROXY', 'ALL_PROXY']) {
    const value = envValue(env, name);
    if (!value) continue;
    registerConnectionString(value);
    if (!settings.proxyUrl) refuseMalformedProxy(env[name] ? name : name.toLowerCase(), value);
  }
  const noProxy = [...new Set([...(envValue(env, 'NO_PROXY') ?? '').split(/[,\s]+/).filter(Boolean), ...METADATA_HOSTS])].join(',');
  env['NO_PROXY'] = noProxy;
  env['no_proxy'] = noProxy;

  const proxyFor = (url: string): string | undefined => getProxyForUrl(url) || undefined;
  const httpsProxy = envValue(env, 'HTTPS_PROXY');
  const httpProxy = envValue(env, 'HTTP_PROXY');
  const dispatcher = new EnvHttpProxyAgent({ ...(httpProxy && { httpProxy }), ...(httpsProxy && { httpsProxy }), noProxy });
  const caNote = settings.caFile ? `, trusting the CAs in ${settings.caFile} besides the system's` : '';

  return {
    proxyFor,
    dispatcher,
    describe(url) {
      const proxy = proxyFor(url);
      return `${proxy ? `through the proxy ${redact(proxy)}` : 'directly (no proxy)'}${caNote}`;
    },
    awsRequestHandler() {
      const agent = new RoutingAgent(proxyFor);
      return new NodeHttpHandler({ httpsAgent: agent, httpAgent: agent });
    },
  };
}

/** A Node agent that sends each request through the proxy `proxyFor` names, or directly. */
class RoutingAgent extends RoutingBase {
  readonly #proxyFor: (url: string) => string | undefined;
  readonly #proxied = new Map<string, HttpsProxyAgent<string>>();
  readonly #directTls = new HttpsAgent({ keepAlive: true });
  readonly #directPlain = new HttpAgent({ keepAlive: true });

  constructor(proxyFor: (url: string) => string | undefined) {
    super({ keepAlive: true });
    this.#proxyFor = proxyFor;
  }

  override connect(req: ClientRequest, options: AgentConnectOpts): HttpAgent {
    const url = `${options.secureEndpoint ? 'https' : 'http'}://${req.host}${options.port ? `:${options.port}` : ''}${req.path}`;
    const proxy = this.#proxyFor(url);
    if (!proxy) return options.secureEndpoint ? this.#directTls : this.#directPlain;
    let agent = this.#proxied.get(proxy);
    if (!agent) {
      agent = new HttpsProxyAgent(proxy, { keepAlive: true });
      this.#proxied.set(proxy, agent);
    }
    return agent;
  }
}

/** A peer the agent talks to, for the preflight's route lines. */

/** One preflight line per peer: how it is reached (proxy, CA); metadata is always direct. */
export function routeChecks(outbound: Outbound, peers: readonly Peer[]): PreflightCheck[] {
  return peers.map(({ name, url }) => {
    const proxy = outbound.proxyFor(url);
    const isMetadata = METADATA_HOSTS.some((h) => new URL(url).host.startsWith(h));
    if (isMetadata && proxy) {
      return {
        name: `route to ${name}`,
        ok: false,
        detail: `${url} would go through the proxy ${redact(proxy)}`,
        fix: 'remove the metadata address from the proxy settings',
      };
    }
    return { name: `route to ${name}`, ok: true, detail: `${url}: ${outbound.describe(url)}` };
  });
}

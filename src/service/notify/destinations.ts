// Where an organization's webhook may send: public addresses only, unless the service's operator
// allows a network (TUNER_WEBHOOK_ALLOW_NETWORKS). An organization's admin is a tenant, not the
// operator: without this, a webhook to 127.0.0.1, 10.x or 169.254.169.254 (a cloud's instance
// metadata) would let a tenant reach the service's own network (SSRF; GitLab refuses "requests
// to the local network from webhooks" by default for the same reason). The service-wide webhook
// (TUNER_WEBHOOK_URL) is the operator's own and is not checked.
// Checked twice: when an admin adds a webhook (actions.ts, a 400 saying why), and as each
// connection is made (the dispatcher below): a name that resolved to a public address then may
// resolve to a private one now (DNS rebinding), and the allowed networks may have changed since.
import { lookup as lookupCallback, type LookupAddress } from 'node:dns';
import { lookup } from 'node:dns/promises';
import { isIP, type LookupFunction } from 'node:net';
import ipaddr from 'ipaddr.js';
import { Agent, buildConnector, type Dispatcher } from 'undici';

export const ALLOW_NETWORKS_VARIABLE = 'TUNER_WEBHOOK_ALLOW_NETWORKS';

/** A connection the dispatcher did not make: its message says which address and why (never the
 * URL, whose query may hold a token). */
export class DestinationRefused extends Error {
  override name = 'DestinationRefused';
}

type Network = [ipaddr.IPv4 | ipaddr.IPv6, number];

/** How each refused range is named to the admin (ipaddr.js's range names); others by their name. */
const RANGE_WORDS: Readonly<Record<string, string>> = {
  loopback: 'a loopback address',
  private: 'a private address',
  uniqueLocal: 'a private address (IPv6 unique local)',
  linkLocal: 'a link-local address (where clouds serve instance metadata)',
  carrierGradeNat: 'a carrier-grade NAT address',
  unspecified: 'the unspecified address',
  multicast: 'a multicast address',
  broadcast: 'the broadcast address',
  reserved: 'a reserved address',
};

/** An address or CIDR range (as config.ts accepts them) as a network; an address alone is a
 * network of one, and an IPv4-mapped IPv6 range the IPv4 range it maps (as addresses are
 * compared after ipaddr.process). */
function networkOf(text: string): Network {
  if (!text.includes('/')) {
    const address = ipaddr.process(text);
    return [address, address.kind() === 'ipv4' ? 32 : 128];
  }
  const [address, bits] = ipaddr.parseCIDR(text);
  if (address.kind() === 'ipv6' && (address as ipaddr.IPv6).isIPv4MappedAddress() && bits >= 96)
    return [(address as ipaddr.IPv6).toIPv4Address(), bits - 96];
  return [address, bits];
}

export class WebhookDestinations {
  readonly #allowed: readonly Network[];

  /** `allowNetworks`: addresses and CIDR ranges allowed although not public (config.ts). */
  constructor(allowNetworks: readonly string[]) {
    this.#allowed = allowNetworks.map(networkOf);
  }

  /** What makes `address` unfit as a destination ("a private address"), or null when it is fit:
   * public (ipaddr.js's 'unicast'), or in an allowed network. */
  #refusedRange(address: string): string | null {
    const ip = ipaddr.process(address);
    const range = ip.range();
    if (range === 'unicast') return null;
    if (this.#allowed.some(([network, bits]) => network.kind() === ip.kind() && ip.match(network, bits))) return null;
    return RANGE_WORDS[range] ?? `an address of the special range ${range}, not a public one`;
  }

  /** Why `host` may not be a destination when it resolves to `addresses` (an address stands for
   * itself), or null when every one of them may. */
  #whyRefused(host: string, addresses: readonly string[]): string | null {
    for (const address of addresses) {
      const what = this.#refusedRange(address);
      if (what === null) continue;
      const shown = ipaddr.process(address).toString();
      const subject = isIP(host) ? `${shown} is` : `${host} resolves to ${shown},`;
      return `${subject} ${what}; the service's operator can allow it with ${ALLOW_NETWORKS_VARIABLE}`;
    }
    return null;
  }

  /** Why the URL's host may not be a destination, or null when it may: an address is checked as
   * it is, a name by every address it resolves to now. */
  async whyRefused(url: string): Promise<string | null> {
    const host = new URL(url).hostname.replace(/^\[(.*)\]$/, '$1');
    if (isIP(host)) return this.#whyRefused(host, [host]);
    let resolved: LookupAddress[];
    try {
      resolved = await lookup(host, { all: true, verbatim: true });
    } catch (err) {
      return `${host} does not resolve to an address (${(err as NodeJS.ErrnoException).code ?? 'DNS error'})`;
    }
    return this.#whyRefused(
      host,
      resolved.map((r) => r.address),
    );
  }

  /** Resolves as node:dns does, then fails unless every address may be a destination, so that the
   * connection goes to an address that was checked. */
  readonly #checkedLookup: LookupFunction = (hostname, options, callback) => {
    lookupCallback(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(err, '', 0);
      const why = this.#whyRefused(
        hostname,
        addresses.map((a) => a.address),
      );
      if (why !== null) return callback(new DestinationRefused(why), '', 0);
      if (options.all) return callback(null, addresses);
      callback(null, addresses[0]!.address, addresses[0]!.family);
    });
  };

  /** An undici dispatcher whose connections go to fit destinations only; any other connection
   * fails with DestinationRefused. Node connects to an address without a lookup, so an address
   * is checked here and a name in the lookup. */
  dispatcher(): Dispatcher {
    const connect = buildConnector({ lookup: this.#checkedLookup });
    return new Agent({
      connect: (options, callback) => {
        const why = isIP(options.hostname) ? this.#whyRefused(options.hostname, [options.hostname]) : null;
        if (why !== null) return callback(new DestinationRefused(why), null);
        connect(options, callback);
      },
    });
  }
}

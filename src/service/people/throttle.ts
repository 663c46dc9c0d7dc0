// Failed logins, counted so that guessing is slow and nobody can lock a user out (OWASP's
// "device cookies"): per address, per (username, address), per username for devices that have
// not logged in as that user, and per such device.
import ipaddr from 'ipaddr.js';

/** Who is trying to log in. */
export interface LoginAttempt {
  /** The client's address, as the trusted proxies tell it. */
  address: string;
  username: string;
  /** The id of the device cookie this browser or client holds for this username (it logged in as
   * this user before: people/devices.ts verified the cookie), or null. */
  device: string | null;
}

interface Entry {
  count: number;
  /** The first failure of the window. */
  since: number;
}

/** A kind of count: its limit, and its keys from finest to coarsest (see LoginThrottle). */
interface Ladder {
  limit: number;
  keys: string[];
  /** The keys whose counts refuse the attempt when at the limit. */
  checked: string[];
}

/**
 * Slows down password guessing, in memory and per replica. Within 15 minutes of a count's first
 * failure, a login is refused (429, Retry-After) after
 *   20 failures from its address (any usernames: one password sprayed over many usernames),
 *   5 failures for its username from its address,
 *   10 failures for its username from devices that have not logged in as that user, or
 *   5 failures of its device, for a device that has (past them, it counts as a new device).
 * A device that logged in as the user before (a valid device cookie) is not held back by the
 * username's count, so guessing from elsewhere cannot lock the user out.
 *
 * Memory is bounded and cannot be flushed: nothing is forgotten before its window ends. At most
 * MAX_TRACKED counts of single addresses, usernames and devices are kept; when that is full, a
 * failure with no count of its own is counted for its network instead (/24 for IPv4, /64 for
 * IPv6; at most MAX_SHARED of them), and past that in one count for everything new; a known
 * device's, in one count for its user's known devices. Shared counts hold back only devices that
 * have not logged in as the user before, so a flood makes new devices wait, never known ones.
 */
export class LoginThrottle {
  static readonly MAX_TRACKED = 10_000;
  static readonly MAX_SHARED = 10_000;
  static readonly WINDOW_MS = 15 * 60_000;
  static readonly LIMITS = { address: 20, addressAndUsername: 5, username: 10, device: 5 } as const;
  /** Counts of one address, username, pair or device; in order of their first failure. */
  readonly #tracked = new Map<string, Entry>();
  /** Counts of networks, and the counts of everything new; in order of their first failure. Their
   * keys never begin like those of the single counts (address, pair, user, device). */
  readonly #shared = new Map<string, Entry>();

  /** How many counts are held: at most MAX_TRACKED + MAX_SHARED + 3 + one per user with a known device. */
  get size(): number {
    return this.#tracked.size + this.#shared.size;
  }

  /** Seconds until this attempt may be made; 0 when it may now. */
  retryAfterSeconds(attempt: LoginAttempt, now = Date.now()): number {
    let wait = 0;
    for (const { limit, checked } of this.#ladders(attempt, now)) {
      for (const key of checked) {
        const entry = this.#live(key, now);
        if (entry && entry.count >= limit) wait = Math.max(wait, Math.ceil((entry.since + LoginThrottle.WINDOW_MS - now) / 1000));
      }
    }
    return wait;
  }

  fail(attempt: LoginAttempt, now = Date.now()): void {
    for (const { keys } of this.#ladders(attempt, now)) this.#count(keys, now);
  }

  /** The right password: the failures of this address for this username, and of this device, are
   * forgotten (not the username's: an attacker would gain a new round with each of the user's logins). */
  succeed(attempt: LoginAttempt): void {
    this.#tracked.delete(pairKey(attempt.address, attempt.username));
    if (attempt.device !== null) this.#tracked.delete(`device ${attempt.device}`);
  }

  /** The counts a failure of this attempt goes to, and those that may refuse it. A device that
   * logged in as the user before (and has not failed too often since) answers for the counts of
   * its address, of its address and username, and of the user's known devices, not for the
   * shared ones nor the username's. */
  #ladders(attempt: LoginAttempt, now: number): Ladder[] {
    const user = attempt.username.toLowerCase();
    const network = networkOf(attempt.address);
    const { address, addressAndUsername, username, device } = LoginThrottle.LIMITS;
    const byAddress = [`address ${attempt.address}`, `network ${network}`, 'all addresses'];
    const byPair = [pairKey(attempt.address, attempt.username), `network-pair ${network} ${user}`, 'all pairs'];
    // Past its own count, a known device's failures go to its user's known devices together:
    // only a device that has the user's cookie can add to it.
    const byDevice = attempt.device === null ? [] : [`device ${attempt.device}`, `known-devices ${user}`];
    const known = byDevice.length > 0 && byDevice.every((key) => (this.#live(key, now)?.count ?? 0) < device);
    if (known) {
      return [
        { limit: address, keys: byAddress, checked: byAddress.slice(0, 1) },
        { limit: addressAndUsername, keys: byPair, checked: byPair.slice(0, 1) },
        { limit: device, keys: byDevice, checked: byDevice },
      ];
    }
    const byUser = [`user ${user}`, 'all users'];
    return [
      { limit: address, keys: byAddress, checked: byAddress },
      { limit: addressAndUsername, keys: byPair, checked: byPair },
      { limit: username, keys: byUser, checked: byUser },
    ];
  }

  /** One failure, counted under the finest key that has a count or room for one. */
  #count(keys: string[], now: number): void {
    const [own, ...shared] = keys;
    const found = this.#live(own!, now);
    if (found || this.#tracked.size < LoginThrottle.MAX_TRACKED || this.#expireOldest(this.#tracked, now)) {
      this.#tracked.set(own!, bump(found, now));
      return;
    }
    for (const [i, key] of shared.entries()) {
      const entry = this.#live(key, now);
      const last = i === shared.length - 1;
      if (entry || last || this.#shared.size < LoginThrottle.MAX_SHARED || this.#expireOldest(this.#shared, now)) {
        this.#shared.set(key, bump(entry, now));
        return;
      }
    }
  }

  #live(key: string, now: number): Entry | undefined {
    const table = this.#tracked.has(key) ? this.#tracked : this.#shared;
    const entry = table.get(key);
    if (entry && now - entry.since > LoginThrottle.WINDOW_MS) {
      table.delete(key);
      return undefined;
    }
    return entry;
  }

  /** Forgets the oldest count if its window has ended; true when it made room. */
  #expireOldest(table: Map<string, Entry>, now: number): boolean {
    const oldest = table.entries().next().value;
    if (!oldest || now - oldest[1].since <= LoginThrottle.WINDOW_MS) return false;
    table.delete(oldest[0]);
    return true;
  }
}

const pairKey = (address: string, username: string) => `pair ${address} ${username.toLowerCase()}`;

const bump = (entry: Entry | undefined, now: number): Entry =>
  entry ? { count: entry.count + 1, since: entry.since } : { count: 1, since: now };

/** The network an address belongs to: its /24 (IPv4) or /64 (IPv6); the address itself if it is
 * not one (it always is, from a socket or a trusted proxy). */
export function networkOf(address: string): string {
  if (!ipaddr.isValid(address)) return address;
  const ip = ipaddr.process(address);
  if (ip.kind() === 'ipv4') return `${ip.toByteArray().slice(0, 3).join('.')}.0/24`;
  const parts = (ip as ipaddr.IPv6).parts.slice(0, 4).map((p) => p.toString(16));
  return `${parts.join(':')}::/64`;
}

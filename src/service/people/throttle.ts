// Failed logins, counted per address, per username and per both, so that guessing is slow.
/**
 * Slows down password guessing, in memory and per replica: a bound on guessing speed, not an
 * account lock-out. Within 15 minutes, a login is refused (429, with Retry-After) after
 *   5 failures for its username from its address,
 *   10 failures for its username from any address (guessing from many addresses), or
 *   20 failures from its address for any username (one password sprayed over many usernames).
 * A refused attempt costs no password hashing. At most MAX_TRACKED entries are kept: when full,
 * the entry touched longest ago is forgotten first, one at a time, and an entry that keeps
 * refusing attempts is touched by each of them.
 */
export class LoginThrottle {
  static readonly MAX_TRACKED = 10_000;
  static readonly WINDOW_MS = 15 * 60_000;
  static readonly LIMITS = { addressAndUsername: 5, username: 10, address: 20 } as const;
  /** Ordered by last touch, oldest first (a Map keeps insertion order). */
  readonly #failures = new Map<string, { count: number; since: number }>();

  get size(): number {
    return this.#failures.size;
  }

  /** Seconds until a login from `address` for `username` may be tried again; 0 when it may now. */
  retryAfterSeconds(address: string, username: string, now = Date.now()): number {
    let wait = 0;
    for (const [key, limit] of this.#keys(address, username)) {
      const entry = this.#live(key, now);
      if (!entry || entry.count < limit) continue;
      this.#touch(key, entry);
      wait = Math.max(wait, Math.ceil((entry.since + LoginThrottle.WINDOW_MS - now) / 1000));
    }
    return wait;
  }

  fail(address: string, username: string, now = Date.now()): void {
    for (const [key] of this.#keys(address, username)) {
      const entry = this.#live(key, now);
      this.#touch(key, entry ? { count: entry.count + 1, since: entry.since } : { count: 1, since: now });
    }
    while (this.#failures.size > LoginThrottle.MAX_TRACKED) this.#failures.delete(this.#failures.keys().next().value!);
  }

  /** A good password from this address clears the failures that name both it and the username. */
  succeed(address: string, username: string): void {
    const [pair, user] = this.#keys(address, username);
    this.#failures.delete(pair[0]);
    this.#failures.delete(user[0]);
  }

  #keys(address: string, username: string): [[string, number], [string, number], [string, number]] {
    const user = username.toLowerCase();
    const { addressAndUsername, username: perUsername, address: perAddress } = LoginThrottle.LIMITS;
    return [
      [`pair ${address} ${user}`, addressAndUsername],
      [`user ${user}`, perUsername],
      [`address ${address}`, perAddress],
    ];
  }

  #live(key: string, now: number): { count: number; since: number } | undefined {
    const entry = this.#failures.get(key);
    if (entry && now - entry.since > LoginThrottle.WINDOW_MS) {
      this.#failures.delete(key);
      return undefined;
    }
    return entry;
  }

  #touch(key: string, entry: { count: number; since: number }): void {
    this.#failures.delete(key);
    this.#failures.set(key, entry);
  }
}

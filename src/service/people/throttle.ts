// Failed logins, counted so that guessing is slow and nobody can lock a user out (OWASP's
// "device cookies"): per address, per (username, address), per username for devices that have
// not logged in as that user, and per such device. The counts live in the storage, so replicas
// behind a balancer share them: N replicas do not give an attacker N times the attempts.
import type { LoginFailureCount, LoginFailureStore } from './store.ts';

/** Who is trying to log in. */
export interface LoginAttempt {
  /** The client's address, as the trusted proxies tell it. */
  address: string;
  username: string;
  /** The id of the device cookie this browser or client holds for this username (it logged in as
   * this user before: people/devices.ts verified the cookie), or null. */
  device: string | null;
}

/** What `begin` decided. */
export interface Begun {
  /** Seconds the attempt must wait; 0 when it may go on to the password. */
  wait: number;
  /** The keys the attempt was counted under (none when refused). */
  counted: readonly string[];
  /** Refused, and the first refusal of this lockout on this replica. */
  firstRefusal: boolean;
}

/** Counts at their limit: `id` names them and their windows, `wait` the seconds until they end. */
interface Lockout {
  id: string;
  wait: number;
}

/** A kind of count: its limit and its key. */
interface Ladder {
  limit: number;
  key: string;
}

/**
 * Slows down password guessing, for every replica on the storage. Within 15 minutes of a count's
 * first failure, a login is refused (429, Retry-After) after
 *   20 failures from its address (any usernames: one password sprayed over many usernames),
 *   5 failures for its username from its address,
 *   10 failures for its username from devices that have not logged in as that user, or
 *   5 failures of its device, for a device that has (past them, it counts as a new device).
 * A device that logged in as the user before (a valid device cookie) is not held back by the
 * username's count, so guessing from elsewhere cannot lock the user out.
 *
 * Nothing is forgotten before its window ends (prune removes a count only after it): the counts
 * are rows, not memory, and a failure costs a password hash and an audit row besides, so a flood
 * of new addresses and usernames grows the table by a few rows per hashed password and window.
 */
export class LoginThrottle {
  static readonly WINDOW_MS = 15 * 60_000;
  static readonly LIMITS = { address: 20, addressAndUsername: 5, username: 10, device: 5 } as const;
  /** How many lockouts this replica remembers having reported (see `begin`'s `firstRefusal`). */
  static readonly REPORTED_LOCKOUTS = 10_000;
  readonly #store: LoginFailureStore;
  /** The lockouts (the counts at their limit) whose refusal this replica has reported, each with
   * when it ends. Memory only: forgetting one costs one more audit entry, never a missed one. */
  readonly #reported = new Map<string, number>();

  constructor(store: LoginFailureStore) {
    this.#store = store;
  }

  /** Seconds until this attempt may be made; 0 when it may now. Reads only: see `begin`. */
  async retryAfterSeconds(attempt: LoginAttempt, now = Date.now()): Promise<number> {
    const counts = await this.#store.loginFailures(keysOf(attempt), new Date(now));
    return lockoutOf(laddersOf(attempt, counts), counts, now)?.wait ?? 0;
  }

  /** A failure of this attempt, counted. */
  async fail(attempt: LoginAttempt, now = Date.now()): Promise<void> {
    const counts = await this.#store.loginFailures(keysOf(attempt), new Date(now));
    await this.#store.countLoginFailure(
      laddersOf(attempt, counts).map((l) => l.key),
      new Date(now),
      LoginThrottle.WINDOW_MS,
    );
  }

  /** The check and the count at once, before the password is checked: `wait` seconds when the
   * attempt must wait (nothing counted); else it is counted as a failure already, under the keys
   * `counted`, so that attempts made at the same time, on any replica, take turns and no more of
   * them get through than the limits allow. `succeed` takes the count back if the password is right. */
  async begin(attempt: LoginAttempt, now = Date.now()): Promise<Begun> {
    // Refused on what the counts say without a lock: a flood of refused attempts costs a read
    // each, no write and no lock.
    const counts = await this.#store.loginFailures(keysOf(attempt), new Date(now));
    const refused = lockoutOf(laddersOf(attempt, counts), counts, now);
    if (refused) return { wait: refused.wait, counted: [], firstRefusal: this.#firstReport(refused, now) };
    let counted: string[] = [];
    let lockout: Lockout | null = null;
    await this.#store.countLoginAttempt(keysOf(attempt), new Date(now), LoginThrottle.WINDOW_MS, (locked) => {
      const ladders = laddersOf(attempt, locked);
      lockout = lockoutOf(ladders, locked, now);
      counted = lockout ? [] : ladders.map((l) => l.key);
      return counted;
    });
    const found = lockout as Lockout | null;
    return found ? { wait: found.wait, counted, firstRefusal: this.#firstReport(found, now) } : { wait: 0, counted, firstRefusal: false };
  }

  /** True the first time this replica refuses an attempt for this lockout: that refusal is worth
   * an audit entry, the flood behind it is not. */
  #firstReport(lockout: Lockout, now: number): boolean {
    const endsAt = this.#reported.get(lockout.id);
    if (endsAt !== undefined && endsAt > now) return false;
    if (this.#reported.size >= LoginThrottle.REPORTED_LOCKOUTS) {
      for (const [id, end] of this.#reported) if (end <= now) this.#reported.delete(id);
      // Still full of live lockouts: the oldest reported go first (Map keeps insertion order).
      for (const id of this.#reported.keys()) {
        if (this.#reported.size < LoginThrottle.REPORTED_LOCKOUTS) break;
        this.#reported.delete(id);
      }
    }
    this.#reported.set(lockout.id, now + lockout.wait * 1000);
    return true;
  }

  /** The right password: the failures of this address for this username, and of this device, are
   * forgotten (not the username's: an attacker would gain a new round with each of the user's
   * logins), and the rest of what `begin` counted for this attempt is taken back. */
  async succeed(attempt: LoginAttempt, counted: readonly string[] = [], now = Date.now()): Promise<void> {
    const forgotten = [pairKey(attempt), ...(attempt.device === null ? [] : [deviceKey(attempt.device)])];
    await this.#store.forgetLoginFailures(forgotten);
    const back = counted.filter((key) => !forgotten.includes(key));
    if (back.length > 0) await this.#store.uncountLoginFailure(back, new Date(now));
  }
}

/** Every count the attempt may go to (laddersOf chooses among them). */
function keysOf(attempt: LoginAttempt): string[] {
  const keys = [`address ${attempt.address}`, pairKey(attempt), userKey(attempt)];
  return attempt.device === null ? keys : [...keys, deviceKey(attempt.device)];
}

/** The counts a failure of this attempt goes to and that may refuse it. A device that logged in
 * as the user before (and has not failed too often since) answers for the counts of its address,
 * of its address and username, and of its own, not for the username's. */
function laddersOf(attempt: LoginAttempt, counts: ReadonlyMap<string, LoginFailureCount>): Ladder[] {
  const { address, addressAndUsername, username, device } = LoginThrottle.LIMITS;
  const common = [
    { limit: address, key: `address ${attempt.address}` },
    { limit: addressAndUsername, key: pairKey(attempt) },
  ];
  const known = attempt.device !== null && (counts.get(deviceKey(attempt.device))?.failures ?? 0) < device;
  return known ? [...common, { limit: device, key: deviceKey(attempt.device!) }] : [...common, { limit: username, key: userKey(attempt) }];
}

/** The counts of the ladders at their limit (their keys and windows name the lockout) and the
 * seconds until none is; null when none is. */
function lockoutOf(ladders: readonly Ladder[], counts: ReadonlyMap<string, LoginFailureCount>, now: number): Lockout | null {
  let wait = 0;
  const at: string[] = [];
  for (const { limit, key } of ladders) {
    const count = counts.get(key);
    if (!count || count.failures < limit) continue;
    const seconds = Math.ceil((count.expiresAt.getTime() - now) / 1000);
    if (seconds <= 0) continue;
    wait = Math.max(wait, seconds);
    at.push(`${key} until ${count.expiresAt.getTime()}`);
  }
  return wait > 0 ? { id: at.sort().join('\n'), wait } : null;
}

const userKey = (attempt: LoginAttempt) => `user ${attempt.username.toLowerCase()}`;
const pairKey = (attempt: LoginAttempt) => `pair ${attempt.address} ${attempt.username.toLowerCase()}`;
const deviceKey = (device: string) => `device ${device}`;

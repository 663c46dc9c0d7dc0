// After a platform says it applied parameters with a reload of its own (Cloud B's configuration
// write, Cloud C's flags patch), the agent's session sees the new values once its backend has
// taken that reload. Shared by the targets whose management interface reloads for them.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Db } from '../database/db.ts';
import { errorMessage, type Logger } from '../base/log.ts';
import { sameSetting } from '../database/settings.ts';

export const VISIBLE_TIMEOUT_MS = 15_000;

/**
 * Waits (bounded) until pg_settings shows `expected`; the read-back after the target's write then
 * judges what it sees, so running out of time is a warning here, not an error. A session lost
 * meanwhile (a restart someone else made) is opened again. `platform` names who reported the
 * values applied ("Cloud B").
 */
export async function untilVisible(db: Db, expected: Record<string, string>, log: Logger, platform: string): Promise<void> {
  const names = Object.keys(expected);
  if (names.length === 0) return;
  const deadline = Date.now() + VISIBLE_TIMEOUT_MS;
  for (;;) {
    let rows: { name: string; setting: string }[];
    try {
      rows = await db.query<{ name: string; setting: string }>('SELECT name, setting FROM pg_settings WHERE name = ANY($1)', [names]);
    } catch (err) {
      if (Date.now() > deadline) throw err;
      log.debug(`${platform}: pg_settings not readable yet (${errorMessage(err)}): waiting for the server to take a session`);
      await db.waitUntilReachable(Math.max(1_000, deadline - Date.now()));
      continue;
    }
    const lagging = rows.filter((r) => !sameSetting(r.setting, expected[r.name] ?? r.setting)).map((r) => r.name);
    if (lagging.length === 0) return;
    if (Date.now() > deadline) {
      log.warn(
        `${platform} reports ${lagging.join(', ')} as applied, but the server does not show ${lagging.length === 1 ? 'it' : 'them'} yet after ${VISIBLE_TIMEOUT_MS / 1000} s`,
      );
      return;
    }
    await sleep(200);
  }
}

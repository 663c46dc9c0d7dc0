// Waiting for something a real process does, with a deadline that names what was awaited: the
// tests', the benchmarks' and the demo's one way to wait.
import { setTimeout as sleep } from 'node:timers/promises';

/** Calls `probe` every `everyMs` until it returns something truthy; throws after `timeoutMs`, or
 * as soon as `signal` aborts (with its reason). */
export async function until<T>(
  what: string,
  probe: () => Promise<T | undefined | null | false>,
  timeoutMs = 30_000,
  everyMs = 200,
  signal?: AbortSignal,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    signal?.throwIfAborted();
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(everyMs, undefined, signal && { signal });
  }
}

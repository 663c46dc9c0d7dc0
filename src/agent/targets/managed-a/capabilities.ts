// Which of the optional Cloud A actions (permissions.ts) the policy grants, decided in one
// place, once per process. None is probed with a call of its own: each is learned at its first
// use, since every one has a fallback. The reads (describe, metrics) are all made by --check, so
// --check knows them and prints one WARN line per refused action; the writes (reset, the
// cluster group's modify) cannot be tried without a change, so they are learned at the first
// write that needs them, and the write falls back at once.
import type { Logger } from '../../base/log.ts';
import { awsCall, isAccessDenied } from './aws.ts';
import { OPTIONAL_ACTIONS, type OptionalAction } from './permissions.ts';

export class Capabilities {
  readonly #refused = new Set<OptionalAction>();
  readonly #log: Logger | undefined;

  constructor(log?: Logger) {
    this.#log = log;
  }

  /** False once Cloud A has refused `action`; true until then (it is tried). */
  allows(action: OptionalAction): boolean {
    return !this.#refused.has(action);
  }

  /** The optional actions Cloud A refused so far. */
  refused(): OptionalAction[] {
    return [...this.#refused];
  }

  /** Notes that Cloud A refused `action`; said once. */
  refuse(action: OptionalAction): void {
    if (this.#refused.has(action)) return;
    this.#refused.add(action);
    this.#log?.info(`${action} is not allowed by the policy, which is fine: ${withoutLine(action)}`);
  }

  /**
   * Runs `call` with the optional `action` when it is not known to be refused; when Cloud A
   * refuses it (AccessDenied), notes that and runs `fallback` instead, now and from then on.
   */
  async use<T>(action: OptionalAction, call: () => Promise<T>, fallback: () => Promise<T>): Promise<T> {
    if (!this.allows(action)) return fallback();
    try {
      return await awsCall(action, call);
    } catch (err) {
      if (!isAccessDenied(err)) throw err;
      this.refuse(action);
      return fallback();
    }
  }
}

/** What the agent does without `action`: the text of its --check WARN line. */
export function withoutLine(action: OptionalAction): string {
  return `without ${action} ${OPTIONAL_ACTIONS[action].without}`;
}

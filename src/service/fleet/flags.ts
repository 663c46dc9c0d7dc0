// The states a database of the fleet can be in (attention.ts decides which apply).

/**
 * The states a database can be in, in the order a person should look at them:
 * - awaiting_approval: a verified configuration waits for a person's decision, and nothing else
 *   moves until someone gives it;
 * - agent_lost: the agent stopped reporting without saying goodbye: nothing is measured or
 *   guarded there, and whatever broke it will not mend itself;
 * - gain_gone: the watch no longer sees the kept configuration's gain (watch/);
 * - blocked: the agent says it cannot apply changes (a `default.*` parameter group, …): no
 *   session can do anything until someone fixes that;
 * - session_failed: the latest session ended in failure, which its message explains;
 * - workload_changed, advice: worth a look, nothing is wrong (advice: the diagnoses argue for a
 *   change between sessions, as last computed after the reports arrived);
 * - agent_stopped, no_agent: nobody watches, but by someone's choice (or not set up yet);
 * - tuning: a session runs, by itself; kept: a verified configuration holds; idle: nothing to say.
 * A database has every flag that applies; the first in this order ranks it.
 */
export const FLEET_FLAGS = [
  'awaiting_approval',
  'agent_lost',
  'gain_gone',
  'blocked',
  'session_failed',
  'workload_changed',
  'advice',
  'agent_stopped',
  'no_agent',
  'tuning',
  'kept',
  'idle',
] as const;
export type FleetFlag = (typeof FLEET_FLAGS)[number];

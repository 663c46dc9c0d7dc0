// Waiting out an operation someone else runs on the flexible server before changing anything: a
// restart from the portal, a configuration change by another tool. While one runs the server is
// Restarting or Updating (https://learn.microsoft.com/rest/api/postgresql/servers/get,
// ServerState), writes are refused with 409 ServerIsBusy, and during a restart PostgreSQL itself
// is down, so the agent's own reads of pg_settings would fail too. Checking the state first is
// what the service's other clients learned to do
// (https://github.com/hashicorp/terraform-provider-azurerm/pull/29221).
import { setTimeout as sleep } from 'node:timers/promises';
import type { Db } from '../../database/db.ts';
import type { Logger } from '../../base/log.ts';
import type { ManagedBFlexApi } from './api.ts';

/** States an operation passes through: over in seconds (a configuration) to a minute or two (a restart). */
const PASSING_STATES = new Set(['restarting', 'updating']);

export function isPassingState(state: string): boolean {
  return PASSING_STATES.has(state.toLowerCase());
}

export interface ReadyDeps {
  api: ManagedBFlexApi;
  db: Db;
  log: Logger;
  serverName: string;
}

/**
 * The server's state once no operation runs on it any more, or still the passing one after
 * `timeoutMs`. After a restart, also waits until PostgreSQL takes the agent's session again.
 */
export async function settledState({ api, db, log, serverName }: ReadyDeps, timeoutMs: number): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  let state = (await api.getServer()).state ?? '';
  if (!isPassingState(state)) return state;
  log.info(`Cloud B: the flexible server ${serverName} is ${state}: waiting for it to be Ready before changing anything`);
  for (let delay = 500; isPassingState(state) && Date.now() < deadline; delay = Math.min(delay * 2, 5_000)) {
    await sleep(Math.min(delay, Math.max(0, deadline - Date.now())));
    state = (await api.getServer()).state ?? '';
  }
  if (!isPassingState(state)) await db.waitUntilReachable(Math.max(10_000, deadline - Date.now()));
  return state;
}

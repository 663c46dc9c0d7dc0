// A target's connection to its database, as the agent gives it (src/agent/database/db.ts makes it).
import type { ConnectionSecurity } from '../postgres/connect.ts';

export interface Db {
  /** Runs one statement (marked, see markStatement) and returns its rows. */
  query<T extends object = Record<string, unknown>>(text: string, params?: readonly unknown[]): Promise<T[]>;
  /** The backend pid of the current session, to leave it out of activity counts. */
  readonly backendPid: number;
  /** How the current session is encrypted and verified. */
  readonly security: ConnectionSecurity;
  /** Waits until the server accepts a new session (after a restart), up to `timeoutMs`. */
  waitUntilReachable(timeoutMs: number): Promise<void>;
  close(): Promise<void>;
}

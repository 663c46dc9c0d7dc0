// What the watch on kept configurations asks of its storage: which databases are due to be
// judged, the watch's state per database, and saving a new state together with the event it
// raises, once (the save is conditional on the state it was computed from).
import type { Interval } from '../../measure/verify.ts';
import type { StoredReport } from '../databases/store.ts';
import type { OutboxEvent } from '../notify/store.ts';
import type { WatchState } from './verdict.ts';
import type { WorkloadComparison } from './workload.ts';

/** A database whose kept configuration is watched, and is due to be judged again. */
export interface WatchDue {
  databaseId: string;
  organizationId: string;
  databaseName: string;
  /** The session that kept the configuration. */
  sessionId: string;
  /** When the agent acknowledged the keep. */
  keptAt: Date;
  /** The reports from here on are the watch's: the keep, or the end of a later session (whose
   * trials ran other configurations), whichever is later. */
  watchFrom: Date;
}

/** The watch's record of one database (for the kept configuration of `sessionId`). */
export interface WatchRecord {
  databaseId: string;
  sessionId: string;
  state: WatchState;
  stateSince: Date;
  /** The runtime ratio over the baseline now, as last judged. */
  runtime: Interval | null;
  judgedAt: Date;
  workloadCheckedAt: Date | null;
  /** Since when the mix is no longer the verified one; null while it is. */
  workloadChangedSince: Date | null;
  workload: WorkloadComparison | null;
}

/** An event the save raises: an agent_events row (level warn) and the webhook's id. */
export interface WatchEvent {
  id: string;
  code: 'kept_gain_gone' | 'workload_changed';
  message: string;
  at: Date;
}

export interface WatchStore {
  /** Databases with a kept configuration, no active session, and a watch judged longer than
   * `everySeconds` ago (or never), at most `limit`. */
  watchDue(everySeconds: number, limit: number): Promise<WatchDue[]>;
  watchRecord(databaseId: string): Promise<WatchRecord | null>;
  /** The database's reports received at or after `since`, oldest first (at most `limit`). */
  watchReports(databaseId: string, since: Date, limit: number): Promise<StoredReport[]>;
  /**
   * Saves `record` if the stored one is still `previous` (judged at the same time; null: none
   * stored), and then inserts `events` and their `webhooks` into the outbox, all in one
   * transaction. False when another replica saved first: nothing written.
   */
  saveWatch(
    record: WatchRecord,
    previous: WatchRecord | null,
    events: readonly WatchEvent[],
    webhooks?: readonly OutboxEvent[],
  ): Promise<boolean>;
  /** How many watched databases are in each state, and how many see their workload changed (the metrics). */
  watchCounts(): Promise<{ byState: Record<WatchState, number>; workloadChanged: number }>;
}

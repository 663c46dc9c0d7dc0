// What the advice between sessions keeps in the storage: each database's advice as last computed
// (refresh.ts), so that the fleet's single statement shows "advice pending" without computing
// it, and which databases are due for a new computation.
import type { AdviceFinding } from './advice.ts';
import type { AdviceState } from './queries.ts';

/** A database's advice as last computed. */
export interface StoredAdvice {
  databaseId: string;
  state: AdviceState;
  /** What the diagnoses found, strongest first; empty unless state is `advice`. */
  findings: AdviceFinding[];
  /** The parameters they would change. */
  parameters: string[];
  /** The newest report the computation read; null when it read none. */
  reportsTo: Date | null;
}

/** A database due for its advice to be computed again. */
export interface AdviceDue {
  databaseId: string;
  organizationId: string;
}

export interface AdviceStore {
  /**
   * Databases whose agent reported since their advice was last computed (or never computed), at
   * least `everySeconds` ago; and those whose advice is older than `staleSeconds` (it clears once
   * no report is left in its window). Longest waiting first, at most `limit`.
   */
  adviceDue(everySeconds: number, staleSeconds: number, limit: number): Promise<AdviceDue[]>;
  /** Writes the database's advice, computed now (by the storage's clock). */
  saveAdvice(advice: StoredAdvice): Promise<void>;
}

// What the planner said about a trial's candidate (plan-aware sessions, plans.ts), as the
// session's iteration records keep it.

/** A heavy statement whose plan the candidate changes, for people and for the step lines. */
export interface PlanChange {
  queryId: string;
  /** Redacted, when the agent sends texts. */
  text?: string;
  shareOfTime: number;
  /** The candidate's total cost over the known-good's (the planner's units). */
  costFactor: number;
  /** What changed, in words ("a subplan is now hashed", "Index Scan using t_pkey on t → Seq Scan on t"). */
  words: string[];
}

/** What the planner said about a trial's candidate, against the known-good configuration. */
export interface IterationPlans {
  /** The plan commands asked (the last one answered the candidate as it went out). */
  commandIds: string[];
  /** changes: measured, with these plan changes; unchanged: measured, no plan changes (it moves
   * other than planner parameters); neutral: skipped; refused: refused before it ran;
   * unavailable: the planner could not be asked, measured as without. */
  verdict: 'changes' | 'unchanged' | 'neutral' | 'refused' | 'unavailable';
  changes: PlanChange[];
  /** Why, for people. */
  note: string;
  /** The memory parameters whose thresholds were asked for with this trial (once a session each). */
  thresholdsAsked?: string[];
  /** The memory thresholds found (the smallest value that flips a heavy statement's plan), when asked. */
  thresholds?: Array<{ name: string; value: number; queryId: string; text?: string; shareOfTime: number; words: string[] }>;
}

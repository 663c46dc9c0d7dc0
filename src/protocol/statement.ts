// A statement as pg_stat_statements tells statements apart, and which statements the workload's
// figures count. The agent keys its snapshots and the service its query mixes by the same key,
// and both follow the same top-level rule, so a mix measured by one is read the same by the other.

/** 't': counted at top level; 'n': nested inside a function (pg_stat_statements.track = all). */
type StatementLevel = 't' | 'n';

/** `${userId}:${dbId}:${queryId}:${t|n}`: its user, database, query id and level. Stored in tuning
 * sessions' query mixes, so its encoding never changes. */
export type StatementKey = `${number}:${number}:${string}:${StatementLevel}`;

export interface StatementIdentifiers {
  readonly userId: number;
  readonly dbId: number;
  readonly queryId: string;
  /** Null before pg_stat_statements 1.9 (PostgreSQL 14), which does not tell the levels apart. */
  readonly toplevel: boolean | null;
}

/** Before 1.9 there is no level (null), and every entry is top-level ('t'). */
export function statementKey(s: StatementIdentifiers): StatementKey {
  return `${s.userId}:${s.dbId}:${s.queryId}:${s.toplevel === false ? 'n' : 't'}`;
}

/** Whether a statement counts in the workload's figures: top-level ones do, and so does every one
 * before 1.9, where nothing tells the levels apart. Nested statements do not: their time is
 * already inside their caller's, which would count it twice. */
export function isTopLevel(s: { readonly toplevel: boolean | null }): boolean {
  return s.toplevel !== false;
}

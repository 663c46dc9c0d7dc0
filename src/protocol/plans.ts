// What the agent's planner probe (src/agent/plans/) may send about the statements carrying the
// time: per queryid, the shape of its generic plan (the fingerprint) and its total cost, under the
// current settings and under a candidate's session-settable values. Never a literal, a parameter
// value or table data: node types and strategies, relation and index names (identifiers the
// statement's text names too), counts and costs. The text, when sent, is redacted as reports' are.
// Strict and bounded, like the report (report.ts).
import { z } from 'zod';
import { REPORT_LIMITS } from './report.ts';

export const PLAN_LIMITS = {
  /** Statements probed: the top of pg_stat_statements up to this share of the total time… */
  topShareOfTime: 0.8,
  /** …and at most this many. */
  maxStatements: 50,
  /** Plan nodes listed in a fingerprint (a plan with more is cut, and says so). */
  maxNodes: 500,
  maxLabelLength: 300,
} as const;

const label = z.string().max(PLAN_LIMITS.maxLabelLength);
const count = z.number().int().nonnegative();
const queryId = z.string().regex(/^-?\d{1,20}$/);

/** The shape of a plan: what a parameter the planner reads can change, and nothing else. */
export const PlanFingerprintSchema = z.strictObject({
  /** Every node, in pre-order: "Hash Join (Anti)", "Seq Scan on orders", "Aggregate (Hashed)",
   * "SubPlan 1 (hashed)", "Sort", "Gather (2 workers)". */
  nodes: z.array(label).max(PLAN_LIMITS.maxNodes),
  /** True when the plan had more nodes than `nodes` holds. */
  truncated: z.boolean(),
  /** Join methods with their join type, in pre-order: "Nested Loop (Inner)", "Hash Join (Anti)". */
  joins: z.array(label).max(PLAN_LIMITS.maxNodes),
  /** Scan methods with the relation (and index) scanned: "Index Scan using orders_pkey on orders". */
  scans: z.array(label).max(PLAN_LIMITS.maxNodes),
  /** Subplans run per row (plain) or looked up in a hash table built once (hashed). */
  subplans: z.strictObject({ plain: count, hashed: count }),
  /** Sort nodes; `method` only where EXPLAIN shows one (EXPLAIN without ANALYZE shows none). */
  sorts: z.array(z.strictObject({ node: label, method: label.optional() })).max(PLAN_LIMITS.maxNodes),
  /** Hash nodes (the inner side of hash joins) and hashed aggregates (HashAggregate, mixed). */
  hashes: count,
  hashAggregates: count,
  /** Parallel workers planned, over every Gather and Gather Merge. */
  workersPlanned: count,
  /** Whether the plan would be JIT-compiled (jit on and total cost above jit_above_cost). */
  jit: z.boolean(),
});
export type PlanFingerprint = z.infer<typeof PlanFingerprintSchema>;

export const PlanSchema = z.strictObject({
  fingerprint: PlanFingerprintSchema,
  /** sha-256 of the fingerprint, 16 hex digits: equal digests, same plan shape. */
  digest: z.string().regex(/^[0-9a-f]{16}$/),
  /** The planner's total cost of the root node, in its own units. */
  totalCost: z.number().nonnegative(),
});
export type Plan = z.infer<typeof PlanSchema>;

export const StatementPlansSchema = z.strictObject({
  queryId,
  /** Redacted as in reports, and only when include_queries allows texts. */
  text: z.string().max(REPORT_LIMITS.maxQueryTextLength).optional(),
  /** Its share of the total execution time in pg_stat_statements (0..1). */
  shareOfTime: z.number().min(0).max(1),
  /** The generic plan under the current settings. */
  current: PlanSchema.optional(),
  /** The generic plan under the candidate's settings, when one was given. */
  candidate: PlanSchema.optional(),
  /** Whether the candidate's plan has another shape than the current one. */
  changed: z.boolean().optional(),
  /** Why it was not planned (refused before sending, or what PostgreSQL answered, without its text). */
  notPlanned: z.string().max(1000).optional(),
  /** A command PostgreSQL runs without a plan (DDL, transaction control, SET): no planner
   * parameter changes how it runs. */
  planless: z.literal(true).optional(),
});
export type StatementPlans = z.infer<typeof StatementPlansSchema>;

export const PlanProbeSchema = z.strictObject({
  /** `generic_plan`: EXPLAIN (GENERIC_PLAN) on PostgreSQL 16+; `prepare`: PREPARE with
   * plan_cache_mode = force_generic_plan and EXPLAIN EXECUTE with NULL parameters (13-15). */
  method: z.enum(['generic_plan', 'prepare']),
  /** The candidate's values the plans were made under (SET LOCAL): the session-settable ones. */
  settings: z.record(z.string().max(REPORT_LIMITS.maxNameLength), z.string().max(1000)),
  /** The candidate's parameters that cannot be set in a session, so were left out, and why. */
  notPlannableSettings: z.array(z.strictObject({ name: z.string().max(REPORT_LIMITS.maxNameLength), reason: z.string().max(500) })),
  statements: z.array(StatementPlansSchema).max(PLAN_LIMITS.maxStatements),
});
export type PlanProbe = z.infer<typeof PlanProbeSchema>;

/** The memory parameters whose plan thresholds the probe can search for (a plan command's
 * `thresholds`): the planner compares a hash table's or a sort's size with them. */
export const THRESHOLD_PARAMETERS = ['work_mem', 'hash_mem_multiplier'] as const;
export const ThresholdParameterSchema = z.enum(THRESHOLD_PARAMETERS);
export type ThresholdParameter = z.infer<typeof ThresholdParameterSchema>;

/** Per heavy statement whose plan flips between a threshold search's low and high: the smallest
 * value (pg_settings unit: kB for work_mem) found by bisection on the planner to flip it, with the
 * plans just below and at it. */
export const PlanThresholdSchema = z.strictObject({
  name: ThresholdParameterSchema,
  /** The range searched, after the agent bounded it by the catalog's bounds for its machine. */
  low: z.number().nonnegative(),
  high: z.number().nonnegative(),
  statements: z
    .array(
      z.strictObject({
        queryId,
        text: z.string().max(REPORT_LIMITS.maxQueryTextLength).optional(),
        shareOfTime: z.number().min(0).max(1),
        value: z.number().nonnegative(),
        below: PlanSchema,
        at: PlanSchema,
      }),
    )
    .max(PLAN_LIMITS.maxStatements),
});
export type PlanThreshold = z.infer<typeof PlanThresholdSchema>;

/** A plan command's most candidates and threshold searches: one command stays short (each
 * statement's EXPLAIN is bounded by its timeouts) and its acknowledgement small. */
export const PLAN_COMMAND_LIMITS = { candidates: 3, thresholds: THRESHOLD_PARAMETERS.length } as const;

/** What a plan command's acknowledgement carries: one probe per candidate, in order, and the
 * threshold searches asked for. */
export const PlanAnswerSchema = z.strictObject({
  candidates: z.array(PlanProbeSchema).max(PLAN_COMMAND_LIMITS.candidates),
  thresholds: z.array(PlanThresholdSchema).max(PLAN_COMMAND_LIMITS.thresholds),
});
export type PlanAnswer = z.infer<typeof PlanAnswerSchema>;

// A plan's shape from EXPLAIN (FORMAT JSON): its fingerprint (what leaves the host, see
// src/protocol/plans.ts) and its node tree as compact text (for people: `tuner-agent plans`).
// Both read node types, strategies, relation and index names and costs only: never a filter, a
// condition or an output list, which may hold a literal of a statement kept verbatim.
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { PLAN_LIMITS, type Plan, type PlanFingerprint } from '../../protocol/plans.ts';

interface PlanNode {
  'Node Type': string;
  Strategy?: string | undefined;
  'Join Type'?: string | undefined;
  'Partial Mode'?: string | undefined;
  'Parent Relationship'?: string | undefined;
  'Subplan Name'?: string | undefined;
  'Relation Name'?: string | undefined;
  'Index Name'?: string | undefined;
  'Sort Method'?: string | undefined;
  'Workers Planned'?: number | undefined;
  'Total Cost': number;
  'Plan Rows'?: number | undefined;
  Plans?: PlanNode[] | undefined;
  [key: string]: unknown;
}

const PlanNodeSchema: z.ZodType<PlanNode> = z.lazy(() =>
  z.looseObject({
    'Node Type': z.string(),
    Strategy: z.string().optional(),
    'Join Type': z.string().optional(),
    'Partial Mode': z.string().optional(),
    'Parent Relationship': z.string().optional(),
    'Subplan Name': z.string().optional(),
    'Relation Name': z.string().optional(),
    'Index Name': z.string().optional(),
    'Sort Method': z.string().optional(),
    'Workers Planned': z.number().int().nonnegative().optional(),
    'Total Cost': z.number(),
    'Plan Rows': z.number().optional(),
    Plans: z.array(PlanNodeSchema).optional(),
  }),
);

/** EXPLAIN (FORMAT JSON)'s one row: an array of one object with the root node. */
export const ExplainJsonSchema = z.tuple([z.looseObject({ Plan: PlanNodeSchema, JIT: z.unknown().optional() })]);
export type ExplainJson = z.infer<typeof ExplainJsonSchema>;

const JOINS = new Set(['Nested Loop', 'Hash Join', 'Merge Join']);
const SORTS = new Set(['Sort', 'Incremental Sort']);

/** "SubPlan 1" → hashed, when its parent's expressions say `hashed SubPlan 1` (13-17 print
 * "(hashed SubPlan 1)", 18 "(hashed SubPlan 1).col1"): the JSON has no field of its own for it. */
function hashedSubplans(node: PlanNode): Set<string> {
  const names = new Set<string>();
  for (const [key, value] of Object.entries(node)) {
    if (key === 'Plans') continue;
    const texts = typeof value === 'string' ? [value] : Array.isArray(value) ? value.filter((v) => typeof v === 'string') : [];
    for (const text of texts) for (const m of text.matchAll(/\bhashed (SubPlan \d+)/g)) names.add(m[1]!);
  }
  return names;
}

function scanLabel(node: PlanNode): string {
  const using = node['Index Name'] ? ` using ${node['Index Name']}` : '';
  const on = node['Relation Name'] ? ` on ${node['Relation Name']}` : '';
  return `${node['Node Type']}${using}${on}`;
}

/** One node in words: its type and what decides how it runs. */
function nodeLabel(node: PlanNode, hashed: boolean): string {
  const type = node['Node Type'];
  const qualifiers: string[] = [];
  if (node.Strategy) qualifiers.push(node.Strategy);
  if (node['Join Type']) qualifiers.push(node['Join Type']);
  if (node['Partial Mode'] && node['Partial Mode'] !== 'Simple') qualifiers.push(node['Partial Mode']);
  if (node['Workers Planned'] !== undefined) qualifiers.push(`${node['Workers Planned']} workers`);
  if (node['Sort Method']) qualifiers.push(node['Sort Method']);
  const base = node['Relation Name'] ? scanLabel(node) : type;
  const withQualifiers = qualifiers.length > 0 ? `${base} (${qualifiers.join(', ')})` : base;
  const subplan = node['Parent Relationship'] === 'SubPlan' && node['Subplan Name'];
  return subplan ? `${node['Subplan Name']} (${hashed ? 'hashed' : 'plain'}): ${withQualifiers}` : withQualifiers;
}

/** Pre-order walk with each node's depth and whether it is a hashed subplan. */
function walk(root: PlanNode, visit: (node: PlanNode, depth: number, hashed: boolean) => void): void {
  const step = (node: PlanNode, depth: number, hashed: boolean) => {
    visit(node, depth, hashed);
    const hashedNames = hashedSubplans(node);
    for (const child of node.Plans ?? []) step(child, depth + 1, hashedNames.has(child['Subplan Name'] ?? ''));
  };
  step(root, 0, false);
}

const cut = (text: string) => (text.length > PLAN_LIMITS.maxLabelLength ? `${text.slice(0, PLAN_LIMITS.maxLabelLength - 1)}…` : text);

export interface JitRule {
  /** current_setting('jit') = on */
  enabled: boolean;
  /** jit_above_cost; -1 turns JIT off. */
  aboveCost: number;
}

export function fingerprintOf(explain: ExplainJson, jit: JitRule): PlanFingerprint {
  const root = explain[0].Plan;
  const fp: PlanFingerprint = {
    nodes: [],
    truncated: false,
    joins: [],
    scans: [],
    subplans: { plain: 0, hashed: 0 },
    sorts: [],
    hashes: 0,
    hashAggregates: 0,
    workersPlanned: 0,
    // The planner's own rule (standard_planner): JIT when on and the plan costs more than
    // jit_above_cost. EXPLAIN shows a JIT section only where the server was built with LLVM.
    jit: explain[0].JIT !== undefined || (jit.enabled && jit.aboveCost >= 0 && root['Total Cost'] > jit.aboveCost),
  };
  const add = (list: string[], text: string) => {
    if (list.length < PLAN_LIMITS.maxNodes) list.push(cut(text));
    else fp.truncated = true;
  };
  walk(root, (node, _depth, hashed) => {
    const type = node['Node Type'];
    add(fp.nodes, nodeLabel(node, hashed));
    if (JOINS.has(type)) add(fp.joins, `${type}${node['Join Type'] ? ` (${node['Join Type']})` : ''}`);
    if (node['Relation Name'] || type.endsWith('Scan')) add(fp.scans, scanLabel(node));
    if (node['Parent Relationship'] === 'SubPlan') fp.subplans[hashed ? 'hashed' : 'plain']++;
    if (SORTS.has(type) && fp.sorts.length < PLAN_LIMITS.maxNodes)
      fp.sorts.push({ node: type, ...(node['Sort Method'] && { method: cut(node['Sort Method']) }) });
    if (type === 'Hash') fp.hashes++;
    if (node.Strategy === 'Hashed' || node.Strategy === 'Mixed') fp.hashAggregates++;
    fp.workersPlanned += node['Workers Planned'] ?? 0;
  });
  return fp;
}

export function digestOf(fingerprint: PlanFingerprint): string {
  return createHash('sha256').update(JSON.stringify(fingerprint)).digest('hex').slice(0, 16);
}

export function planOf(explain: ExplainJson, jit: JitRule): Plan {
  const fingerprint = fingerprintOf(explain, jit);
  return { fingerprint, digest: digestOf(fingerprint), totalCost: explain[0].Plan['Total Cost'] };
}

/** The node tree, one line per node, indented by depth, with its cost and estimated rows. */
export function planTree(explain: ExplainJson): string[] {
  const lines: string[] = [];
  walk(explain[0].Plan, (node, depth, hashed) => {
    const rows = node['Plan Rows'] !== undefined ? ` rows=${node['Plan Rows']}` : '';
    lines.push(`${'  '.repeat(depth)}${depth > 0 ? '-> ' : ''}${nodeLabel(node, hashed)}  (cost=${node['Total Cost']}${rows})`);
  });
  return lines;
}

/** What differs between two fingerprints, in words: nodes gone (-) and come (+), JIT, workers. */
export function planChanges(before: PlanFingerprint, after: PlanFingerprint): string[] {
  const counts = (list: readonly string[]) => {
    const m = new Map<string, number>();
    for (const x of list) m.set(x, (m.get(x) ?? 0) + 1);
    return m;
  };
  const a = counts(before.nodes);
  const b = counts(after.nodes);
  const changes: string[] = [];
  for (const [label, n] of a) for (let i = b.get(label) ?? 0; i < n; i++) changes.push(`- ${label}`);
  for (const [label, n] of b) for (let i = a.get(label) ?? 0; i < n; i++) changes.push(`+ ${label}`);
  if (before.jit !== after.jit) changes.push(after.jit ? '+ JIT' : '- JIT');
  if (before.workersPlanned !== after.workersPlanned) changes.push(`workers planned: ${before.workersPlanned} → ${after.workersPlanned}`);
  if (changes.length === 0 && JSON.stringify(before) !== JSON.stringify(after)) changes.push('the same nodes in another order');
  return changes;
}

// Issue 44 item 4: what a plan-aware session reads in the planner's answer (src/service/tuning/plans.ts):
// the verdicts (refused, plan-neutral, measured), the words for a plan change, and the value a
// threshold proposes. The plans are as the agent's probe sends them (PlanProbeSchema parses each).
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { test } from 'node:test';
import type { NumericDimension } from '../src/optimizer/index.ts';
import { PlanProbeSchema, type Plan, type PlanFingerprint, type PlanProbe } from '../src/protocol/plans.ts';
import { describePlanChange, judgeCandidate, thresholdValue } from '../src/service/tuning/plans.ts';

const fingerprint = (nodes: string[], extra: Partial<PlanFingerprint> = {}): PlanFingerprint => ({
  nodes,
  truncated: false,
  joins: [],
  scans: nodes.filter((n) => n.includes('Scan')),
  subplans: { plain: 0, hashed: 0 },
  sorts: [],
  hashes: 0,
  hashAggregates: 0,
  workersPlanned: 0,
  jit: false,
  ...extra,
});
const plan = (fp: PlanFingerprint, totalCost: number): Plan => ({
  fingerprint: fp,
  digest: createHash('sha256').update(JSON.stringify(fp)).digest('hex').slice(0, 16),
  totalCost,
});
const INDEX = fingerprint(['Index Scan using items_pkey on items']);
const SEQ = fingerprint(['Seq Scan on items']);
const lookup = { queryId: '42', text: 'SELECT v FROM items WHERE id = $1' };

/** A probe under one configuration's values: each statement's plan as `candidate`. */
function probe(
  statements: Array<{ queryId: string; text?: string; shareOfTime: number; plan?: Plan; planless?: true; notPlanned?: string }>,
): PlanProbe {
  return PlanProbeSchema.parse({
    method: 'generic_plan',
    settings: {},
    notPlannableSettings: [],
    statements: statements.map(({ plan: p, ...s }) => ({ ...s, ...(p && { current: p, candidate: p }) })),
  });
}

test('describePlanChange names what changed: a hashed subplan, a scan that became another', () => {
  const plain = fingerprint(['Aggregate', 'Seq Scan on orders', 'SubPlan 1 (plain)', 'Materialize', 'Seq Scan on coupons'], {
    subplans: { plain: 1, hashed: 0 },
  });
  const hashed = fingerprint(['Aggregate', 'Seq Scan on orders', 'SubPlan 1 (hashed)', 'Seq Scan on coupons'], {
    subplans: { plain: 0, hashed: 1 },
  });
  const words = describePlanChange(plain, hashed);
  assert.match(words[0]!, /a subplan is now hashed/);
  assert.ok(words.includes('SubPlan 1 (plain), Materialize → SubPlan 1 (hashed)'), JSON.stringify(words));
  assert.deepEqual(describePlanChange(INDEX, SEQ), ['Index Scan using items_pkey on items → Seq Scan on items']);
});

test('a heavy statement made 3 times as costly refuses the candidate, naming it; under 5 % of the time it is only measured', () => {
  const reference = probe([{ ...lookup, shareOfTime: 0.9, plan: plan(INDEX, 1.2) }]);
  const refused = judgeCandidate(['random_page_cost'], reference, probe([{ ...lookup, shareOfTime: 0.9, plan: plan(SEQ, 4.5) }]));
  assert.equal(refused.verdict, 'refused');
  assert.match(
    refused.note,
    /SELECT v FROM items WHERE id = \$1.*90 % of the time, 3\.8 times as costly \(Index Scan using items_pkey on items → Seq Scan on items\)/,
  );
  const light = judgeCandidate(
    ['random_page_cost'],
    probe([{ ...lookup, shareOfTime: 0.04, plan: plan(INDEX, 1.2) }]),
    probe([{ ...lookup, shareOfTime: 0.04, plan: plan(SEQ, 4.5) }]),
  );
  assert.equal(light.verdict, 'changes');
  const cheaper = judgeCandidate(['random_page_cost'], reference, probe([{ ...lookup, shareOfTime: 0.9, plan: plan(SEQ, 2.9) }]));
  assert.equal(cheaper.verdict, 'changes', 'a plan change under 3 times the cost is measured');
});

test('plan-neutral only when every parameter moved is a planner one, no plan changes, and nothing heavy went unplanned', () => {
  const same = [{ ...lookup, shareOfTime: 0.7, plan: plan(INDEX, 1.2) }];
  const ddl = { queryId: '7', shareOfTime: 0.3, planless: true as const, notPlanned: 'a utility statement (CREATE)' };
  assert.equal(
    judgeCandidate(['random_page_cost', 'effective_cache_size'], probe([...same, ddl]), probe([...same, ddl])).verdict,
    'neutral',
  );
  assert.equal(
    judgeCandidate(['random_page_cost', 'work_mem'], probe(same), probe(same)).verdict,
    'unchanged',
    'work_mem acts beyond the plan',
  );
  // A parameter the probe could not SET counts only when the candidate moves it.
  const unsettable = (p: PlanProbe): PlanProbe => ({ ...p, notPlannableSettings: [{ name: 'max_wal_size', reason: 'sighup' }] });
  assert.equal(judgeCandidate(['random_page_cost'], unsettable(probe(same)), unsettable(probe(same))).verdict, 'neutral');
  assert.equal(judgeCandidate(['max_wal_size'], unsettable(probe(same)), unsettable(probe(same))).verdict, 'unchanged');
  const hidden = { queryId: '8', shareOfTime: 0.3, notPlanned: "the agent's user lacks a privilege" };
  const unknown = judgeCandidate(['random_page_cost'], probe([...same, hidden]), probe([...same, hidden]));
  assert.equal(unknown.verdict, 'unchanged');
  assert.match(unknown.note, /could not be planned/);
});

test('a threshold proposes the heaviest statement’s value with 25 % headroom, within the bounds, only above the candidate', () => {
  const workMem: NumericDimension = {
    kind: 'numeric',
    name: 'work_mem',
    type: 'integer',
    unit: 'kB',
    scale: 'log',
    min: 1024,
    max: 60_000,
  };
  const thresholds = [{ name: 'work_mem', value: 40_913, queryId: '1', shareOfTime: 0.8, words: ['a subplan is now hashed'] }];
  assert.equal(thresholdValue(workMem, 30_000, thresholds)?.value, Math.ceil(40_913 * 1.25));
  assert.equal(thresholdValue(workMem, 45_000, thresholds), null, 'above it already');
  assert.equal(thresholdValue({ ...workMem, max: 50_000 }, 30_000, thresholds)?.value, 50_000, 'within the bounds');
  assert.equal(thresholdValue(workMem, 30_000, []), null);
});

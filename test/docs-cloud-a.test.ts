// docs/cloud-a.md against the policy the agent prints: the default document is the spec's
// exactly; every optional action (--extended) is listed with what it adds and what the agent
// does without it; and the set-up commands read the printed document and attach it in each of
// the ways the spec names.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { OPTIONAL_ACTIONS, policyDocument } from '../src/agent/targets/managed-a/permissions.ts';

const DOC = readFileSync(join(import.meta.dirname, '..', 'docs', 'cloud-a.md'), 'utf8');

/** The spec's five statements, its neutral prefixes spelled as AWS spells them. */
const SPEC_ACTIONS = new Set([
  'ec2:DescribeInstanceTypes',
  'rds:DescribeDBInstances',
  'cloudwatch:GetMetricStatistics',
  'pi:GetResourceMetrics',
  'rds:ModifyDBParameterGroup',
  'rds:RebootDBInstance',
]);

test("the printed default document is the spec's, and docs/cloud-a.md lists each optional action of --extended, and no other", () => {
  for (const cluster of [false, true])
    assert.deepEqual(new Set(policyDocument({ cluster }).Statement.flatMap((s) => s.Action)), SPEC_ACTIONS);
  const extended = policyDocument({ extended: true, cluster: true }).Statement.flatMap((s) => s.Action);
  const optional = extended.filter((action) => !SPEC_ACTIONS.has(action));
  assert.deepEqual([...optional].sort(), Object.keys(OPTIONAL_ACTIONS).sort());
  const start = DOC.indexOf("**The spec's five statements are enough.**");
  assert.ok(start >= 0, 'the section on the optional actions is there');
  const section = DOC.slice(start, DOC.indexOf('\n### ', start));
  const rows = [...section.matchAll(/^\| `([a-z]+:[A-Za-z]+)` \| (\w+) \| ([^|]+) \| ([^|]+) \|$/gm)];
  assert.deepEqual(rows.map((r) => r[1]).sort(), [...optional].sort());
  for (const [, action, sid] of rows) assert.equal(sid, OPTIONAL_ACTIONS[action as keyof typeof OPTIONAL_ACTIONS].sid, action);
  assert.match(section, /`--check` prints one `WARN` line per refused action/);
  assert.match(section, /permissions --managed-a --extended/);
});

test('docs/cloud-a.md creates the policy from the printed document and attaches it to a role or a user', () => {
  for (const command of [
    './tuner-agent permissions --managed-a > tuner-agent-policy.json',
    '--policy-document file://tuner-agent-policy.json',
    'aws iam attach-role-policy --role-name',
    'aws iam attach-user-policy --user-name',
    'aws rds create-db-parameter-group',
    'aws rds create-db-cluster-parameter-group',
    'aws rds modify-db-instance',
    'aws rds modify-db-cluster',
    'aws rds reboot-db-instance',
  ]) {
    assert.ok(DOC.includes(command), command);
  }
});

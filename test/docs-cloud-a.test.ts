// docs/cloud-a.md against the policy the agent prints: every action beyond the spec's five
// statements is listed, with what fails without it, and the set-up commands read the printed
// document and attach it in each of the ways the spec names.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { policyDocument } from '../src/agent/targets/managed-a/permissions.ts';

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

test('docs/cloud-a.md lists each action the agent needs beyond the spec, and no other', () => {
  const printed = policyDocument().Statement.flatMap((s) => s.Action);
  const extra = printed.filter((action) => !SPEC_ACTIONS.has(action));
  const start = DOC.indexOf("**A policy with only the spec's five statements is not enough.**");
  assert.ok(start >= 0, 'the section on the extra actions is there');
  const section = DOC.slice(start, DOC.indexOf('\n### ', start));
  const listed = [...section.matchAll(/^\| (`[^|]+`) \|/gm)].flatMap((m) => [...m[1]!.matchAll(/`([a-z]+:[A-Za-z]+)`/g)].map((a) => a[1]!));
  assert.deepEqual([...listed].sort(), [...extra].sort());
  const count = ['zero', 'one', 'two', 'three', 'four', 'five', 'six', 'seven', 'eight', 'nine'][extra.length];
  assert.match(section, new RegExp(`calls ${count} actions that the spec's list\\s+lacks`));
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

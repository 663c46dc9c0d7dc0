// Whether a member's pg_settings row runs what Patroni's dynamic configuration says
// (src/agent/targets/patroni/members.ts): units, booleans, absent parameters, local overrides.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { agreement, memberUrl, type MemberSettingRow } from '../src/agent/targets/patroni/members.ts';

const row = (over: Partial<MemberSettingRow>): MemberSettingRow => ({
  name: 'work_mem',
  setting: '4096',
  unit: 'kB',
  vartype: 'integer',
  source: 'configuration file',
  sourcefile: '/data/postgresql.conf',
  pending_restart: false,
  ...over,
});

test('a set value agrees in any unit Patroni keeps it in', () => {
  assert.equal(agreement(row({ setting: '16384' }), '16MB'), 'agrees');
  assert.equal(agreement(row({ setting: '16384' }), 16384), 'agrees');
  assert.deepEqual(agreement(row({ setting: '4096' }), '16MB'), {
    differs: 'work_mem is 4096 kB (from postgresql.conf), the dynamic configuration says 16MB',
  });
  const sb = row({ name: 'shared_buffers', unit: '8kB', setting: '16384', pending_restart: true });
  assert.equal(agreement(sb, '256MB'), 'pending-restart');
  assert.equal(agreement(row({ name: 'jit', vartype: 'bool', unit: null, setting: 'off' }), false), 'agrees');
  assert.equal(agreement(row({ name: 'jit', vartype: 'bool', unit: null, setting: 'on' }), 'true'), 'agrees');
  assert.equal(agreement(row({ name: 'random_page_cost', vartype: 'real', unit: null, setting: '1.1' }), '1.10'), 'agrees');
});

test("an absent parameter agrees unless Patroni's file or ALTER SYSTEM still sets it", () => {
  assert.equal(agreement(row({ source: 'default', sourcefile: null }), undefined), 'agrees');
  assert.equal(agreement(row({ sourcefile: '/data/postgresql.base.conf' }), undefined), 'agrees');
  assert.deepEqual(agreement(row({ setting: '8192' }), undefined), {
    differs: 'work_mem is 8192 kB (from postgresql.conf), absent from the dynamic configuration',
  });
  assert.deepEqual(agreement(row({ setting: '8192', sourcefile: '/data/postgresql.auto.conf' }), undefined), {
    differs: 'work_mem is 8192 kB (from ALTER SYSTEM in postgresql.auto.conf), absent from the dynamic configuration',
  });
});

test("a member is reached with connection_url's credentials at the host and port Patroni gives", () => {
  assert.equal(
    memberUrl('postgresql://agent_user:pw@primary.svc:5432/postgres?sslmode=require&host=/run/pg', { host: '10.0.0.2', port: 5433 }),
    'postgresql://agent_user:pw@10.0.0.2:5433/postgres?sslmode=require',
  );
});

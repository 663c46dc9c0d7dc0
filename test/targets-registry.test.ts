// A fourth target is a folder and one registry line: the noop fixture (test/fixtures/targets/noop/)
// added to the built-in registry is seen by the CLI (flag, help, permissions, creation, peers),
// the knob catalog (the parameters it tunes, its restart mode) and the service (its label, the
// session's reload-only rule).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { helpText, main, parseInvocation } from '../src/agent/process/cli.ts';
import { loadConfig } from '../src/agent/config/load.ts';
import { createLogger } from '../src/agent/base/log.ts';
import type { Db } from '../src/agent/database/db.ts';
import { TARGETS } from '../src/agent/targets/registry.ts';
import { catalogFor, effectiveMode } from '../src/knobs/index.ts';
import { TargetKindSchema } from '../src/protocol/v1.ts';
import { NewDatabaseInputSchema } from '../src/service/databases/inputs.ts';
import { targetLabel } from '../src/service/setup/snippets.ts';
import { reloadOnlyReason } from '../src/service/tuning/actions.ts';
import { noopDefinition } from './fixtures/targets/noop/index.ts';

const registry = TARGETS.with(noopDefinition);

test('the built-in registry does not know the fixture, and a kind is defined once', () => {
  assert.ok(!TARGETS.has('noop'));
  assert.deepEqual(TARGETS.kinds, ['local', 'managed-a', 'managed-a-cluster', 'managed-b-flex', 'managed-c', 'patroni']);
  assert.throws(() => registry.with(noopDefinition), /target kind noop is defined twice/);
});

test('the protocol fixes a kind’s spelling only; the service accepts the registry’s kinds for a new database', () => {
  assert.ok(TargetKindSchema.safeParse('noop').success);
  assert.ok(!TargetKindSchema.safeParse('No Op').success);
  assert.ok(NewDatabaseInputSchema.safeParse({ name: 'x', target: 'managed-a-cluster' }).success);
  const unknown = NewDatabaseInputSchema.safeParse({ name: 'x', target: 'noop' });
  assert.ok(!unknown.success);
  assert.match(unknown.error.issues[0]!.message, /expected one of local, managed-a, managed-a-cluster, managed-b-flex/);
});

test('the CLI parses --noop, lists it in its help, and refuses two targets', () => {
  assert.equal(parseInvocation(['--noop', '--check'], registry).target, 'noop');
  assert.throws(() => parseInvocation(['--noop'], TARGETS), /Unknown option '--noop'/);
  assert.throws(() => parseInvocation(['--noop', '--local'], registry), /choose one target, not --local and --noop/);
  assert.throws(() => parseInvocation(['--check'], registry), /--patroni or --noop/);
  assert.match(helpText(registry), /^ {2}--noop {16}a target that changes nothing \(tests only\)$/m);
});

test('tuner-agent permissions --noop prints the fixture’s document', async () => {
  const out: string[] = [];
  const err: string[] = [];
  const io = { out: (t: string) => out.push(t), err: (t: string) => err.push(t) };
  const code = await main(['permissions', '--noop'], {}, '/nonexistent', io, registry);
  assert.equal(code, 0, err.join(''));
  assert.equal(out.join(''), '# the noop target needs no rights\n');
});

test('the definition creates the target the CLI runs, and names its peers', async () => {
  const env = {
    AGENT_POSTGRESQL_CONNECTION_URL: 'postgresql://agent_user@localhost/postgres',
    AGENT_NOOP_ENDPOINT: 'https://noop.invalid',
  };
  // Its own section is read with the registry that has it (test/targets-closed.test.ts: every path).
  const { config } = loadConfig({ cwd: '/nonexistent', env, target: 'noop', needsService: false, registry });
  const definition = registry.definitionOf('noop');
  const target = await definition.create('noop', { db: {} as Db, config, log: createLogger({ debug: false, write: () => {} }) });
  assert.equal(target.kind, 'noop');
  await target.writeOverrides({ work_mem: { set: true, value: '8MB' } }, { allowRestart: false });
  assert.deepEqual(await target.readOverrides(['work_mem', 'jit']), { work_mem: { set: true, value: '8MB' }, jit: { set: false } });
  assert.deepEqual(await target.preflight(), [
    { name: 'noop: nothing to check', ok: true, detail: 'the noop target needs no rights (its API: https://noop.invalid)' },
  ]);
  assert.deepEqual(
    definition.peers('noop', config, {}).map((p) => p.url),
    ['https://noop.invalid/'],
  );
});

test('the catalog tunes what the capabilities say, reload-only where the target never restarts', () => {
  // The catalog is given capabilities as data (it never looks a kind up in a registry).
  assert.deepEqual(
    catalogFor(registry.capabilitiesOf('noop'), 'restart').map((k) => k.name),
    ['work_mem', 'random_page_cost'],
  );
  assert.equal(effectiveMode(registry.capabilitiesOf('noop'), 'restart'), 'reload-only');
  assert.throws(() => TARGETS.capabilitiesOf('noop'), /unknown target noop/);
  // The built-in targets' capabilities give the catalog it had: Cloud B the spec's 13, reload-only.
  assert.equal(catalogFor(TARGETS.capabilitiesOf('managed-b-flex'), 'restart').length, 13);
  assert.equal(effectiveMode(TARGETS.capabilitiesOf('managed-b-flex'), 'restart'), 'reload-only');
  assert.equal(effectiveMode(TARGETS.capabilitiesOf('local'), 'restart'), 'restart');
});

test('the service labels it and keeps its sessions reload-only', () => {
  assert.equal(targetLabel('noop', registry), 'A target that changes nothing (tests)');
  assert.equal(reloadOnlyReason('noop', registry), 'noop is reload-only (the noop target has no server to restart)');
  assert.equal(reloadOnlyReason('managed-b-flex'), 'managed-b-flex is reload-only (the agent does not restart flexible servers)');
  assert.equal(reloadOnlyReason('local'), null);
});

// scripts/test-tiers.ts: each test file's tier is read from what it needs, through the helpers it
// imports and the scripts it runs, so that `npm run test:fast` leaves out exactly the files that
// start a cluster, Chromium or the agent binary (or say they are slow).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { testTiers } from '../scripts/test-tiers.ts';

const tiers = new Map(testTiers().map((t) => [t.file, t]));

test('a file that starts a cluster, Chromium or the binary is slow, directly or through a helper or a script', () => {
  for (const [file, why] of [
    ['test/cluster.test.ts', /startCluster from src\/lab\/cluster\.ts/],
    ['test/e2e-session.test.ts', /test\/helpers\/agent-cluster\.ts → startCluster/],
    ['test/faults-apply.test.ts', /test\/helpers\/faults\.ts → test\/helpers\/agent-cluster\.ts/],
    ['test/web.test.ts', /test\/helpers\/browser\.ts/],
    ['test/agent-darwin.test.ts', /test\/helpers\/agent-binary\.ts/],
    ['test/demo.test.ts', /scripts\/demo\.ts → src\/lab\/stack\.ts → startCluster/],
    ['test/sessions.test.ts', /says test-tier: slow/],
  ] as const) {
    const tier = tiers.get(file);
    assert.equal(tier?.tier, 'slow', file);
    assert.match(tier.reason ?? '', why, file);
  }
});

test('a file that only takes a free port from the cluster module, or the service fixture, is fast', () => {
  for (const file of ['test/service.test.ts', 'test/faults-requests.test.ts', 'test/knobs.test.ts', 'test/test-tiers.test.ts'])
    assert.deepEqual(tiers.get(file), { file, tier: 'fast', reason: null });
});

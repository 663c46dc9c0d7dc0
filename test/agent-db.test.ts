// The agent's session (src/agent/database/db.ts) on a throwaway cluster: after the server ended
// it, callers that need it at once share one new connection, and closing leaves none open.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { AGENT_APPLICATION_NAME, connectDb } from '../src/agent/database/db.ts';
import { startCluster, type Cluster } from '../src/lab/cluster.ts';
import { until } from './helpers/until.ts';

let cluster: Cluster;

before(async () => {
  cluster = await startCluster();
});
after(async () => {
  await cluster?.destroy();
});

const agentSessions = async () =>
  (
    await cluster.sql<{ n: number }>(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1`, [
      AGENT_APPLICATION_NAME,
    ])
  )[0]!.n;

test('after the server ends the session, concurrent callers reconnect once, and close leaves nothing open', async () => {
  const db = await connectDb(cluster.agentUrl);
  try {
    assert.equal(await agentSessions(), 1);
    await cluster.sql('SELECT pg_terminate_backend($1)', [db.backendPid]);
    await until('the session to end', async () => (await agentSessions()) === 0);
    // A report collected while a revert reads back: both find no connection at the same moment.
    // Before the fix each opened its own, and all but the last stayed open, owned by nobody: an
    // agent holding one never exits.
    const rows = await Promise.all(Array.from({ length: 5 }, (_, i) => db.query<{ i: number }>('SELECT $1::int AS i', [i])));
    assert.deepEqual(
      rows.map((r) => r[0]!.i),
      [0, 1, 2, 3, 4],
    );
    assert.equal(await agentSessions(), 1);
  } finally {
    await db.close();
  }
  await until('no session left', async () => (await agentSessions()) === 0, 5_000);
});

// End to end on a real throwaway cluster with pg_stat_statements: the secret-bearing statements of
// the corpus run in it (PostgreSQL keeps their literals in pg_stat_statements), and neither the
// report the agent's collector builds nor what `tuner-agent --once` prints holds any of them.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { connectDb, type Db } from '../src/agent/database/db.ts';
import { buildMetricsReport, createCollector, diffSnapshots } from '../src/agent/collect/index.ts';
import { startCluster, type Cluster } from '../src/lab/cluster.ts';
import { runAgent } from './helpers/agent-process.ts';
import { CORPUS, REDACT_SETUP } from './helpers/redact-corpus.ts';

const RUNNABLE = CORPUS.filter((c) => c.runs);

let cluster: Cluster;
let db: Db;
let dir: string;

before(async () => {
  cluster = await startCluster();
  db = await connectDb(cluster.agentUrl);
  for (const sql of REDACT_SETUP) await cluster.sql(sql);
  dir = mkdtempSync(join(tmpdir(), 'tuner-redact-'));
  writeFileSync(join(dir, 'agent.yaml'), `postgresql:\n  connection_url: ${cluster.agentUrl}\n  include_queries: true\n`);
});
after(async () => {
  await db?.close();
  await cluster?.destroy();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** The secrets of `statements` (whole) found in `output`. */
function secretsIn(output: string, statements = CORPUS): string[] {
  return statements.flatMap((c) => c.secrets).filter((secret) => output.includes(secret));
}

test("the collector's report holds the statements, redacted, and none of their secrets", async () => {
  const collector = createCollector(db, { includeQueries: true });
  const first = await collector.collect();
  for (const { sql } of RUNNABLE) await cluster.sql(sql);
  const report = buildMetricsReport(diffSnapshots(first, await collector.collect()), { includeQueries: true, topN: 500 });
  const texts = report.statements.top.map((s) => s.text ?? '');
  // pg_stat_statements did keep them verbatim: the test would prove nothing otherwise.
  const kept = await cluster.sql<{ query: string }>(`SELECT query FROM pg_stat_statements WHERE query LIKE '%k9/Fq+Zt==%'`);
  assert.equal(kept.length, 1, 'pg_stat_statements keeps the ALTER USER with its password');

  assert.deepEqual(secretsIn(JSON.stringify(report), RUNNABLE), []);
  for (const { redacted } of RUNNABLE) assert.ok(texts.includes(redacted), `${redacted} is in the report`);
});

test('--once prints the report without the secrets', async () => {
  // A password, and a secret in a comment without any keyword.
  const statements = [RUNNABLE[0]!, RUNNABLE.find((c) => c.sql.includes('keywordless_block'))!];
  let done = false;
  const run = runAgent(['--local', '--once', '--interval', '2'], { cwd: dir }).finally(() => (done = true));
  // The statements run until the agent is done, so that some fall between its two snapshots
  // however long it takes to start on a loaded machine.
  while (!done) for (const { sql } of statements) await cluster.sql(sql);
  const { code, stdout, stderr } = await run;
  assert.equal(code, 0, stderr);
  for (const { redacted } of statements) assert.ok(stdout.includes(JSON.stringify(redacted)), `${redacted} is in the report`);
  // The secrets of the statements this cluster ran. The others never reached it, and one of them
  // is a CVV of 123, which the report's own figures (a byte count, a runtime) may hold: CI once
  // failed on it.
  assert.deepEqual(secretsIn(stdout + stderr, RUNNABLE), []);
});

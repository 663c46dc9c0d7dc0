// The service redacts statement texts itself, for an older agent that sends them with their
// literals and for reports stored before it did: a report with a secret-bearing text is stored
// redacted (the body in the storage holds no secret), and a stored body that still holds one is
// shown redacted on reports/latest and on the dashboard. On the PostgreSQL storage, so that the
// test can read and write the stored bodies itself.
import assert from 'node:assert/strict';
import { gunzipSync, gzipSync } from 'node:zlib';
import { after, before, test } from 'node:test';
import pg from 'pg';
import { AgentStartResponseSchema } from '../src/protocol/v1.ts';
import { startAdminService, type AdminService } from './helpers/service-admin.ts';
import { reportRequest, sampleMetrics, startRequest } from './helpers/service-reports.ts';

const SECRET = 'AgentPw-S3cret!x';
const SECRET_TEXT = `ALTER USER agent_user PASSWORD '${SECRET}'`;
const REDACTED_TEXT = 'ALTER USER agent_user PASSWORD $1';
const NORMALIZED_TEXT = 'SELECT abalance FROM pgbench_accounts WHERE aid = $1';
// A secret in a comment with no keyword at all: the comment reaches storage empty.
const COMMENT_SECRET = 'Kw0rdless-Xq71';
const COMMENT_TEXT = `SELECT abalance FROM pgbench_accounts WHERE aid = $1 /* ${COMMENT_SECRET} */`;
const COMMENT_REDACTED = 'SELECT abalance FROM pgbench_accounts WHERE aid = $1 /* */';

let lab: AdminService;
let storage: pg.Client;

before(async () => {
  lab = await startAdminService('postgres');
  storage = new pg.Client({ connectionString: lab.store.databaseUrl });
  await storage.connect();
});
after(async () => {
  await storage?.end();
  await lab?.close();
});

test('a secret-bearing text is stored and shown redacted, also from a body stored before redaction', async () => {
  const { admin } = lab;
  const { databaseId, agent } = await lab.database('orders');
  const lease = AgentStartResponseSchema.parse((await agent.start(startRequest(), { gzip: true })).body);

  const metrics = sampleMetrics({ topStatements: 3 });
  metrics.statements.top[0]!.text = SECRET_TEXT;
  metrics.statements.top[1]!.text = NORMALIZED_TEXT;
  metrics.statements.top[2]!.text = COMMENT_TEXT;
  const sent = await agent.report(reportRequest(lease.leaseId, 0, { metrics }), { gzip: true });
  assert.equal(sent.status, 200, JSON.stringify(sent.body));

  const storedBodies = async () =>
    (await storage.query<{ body: Buffer }>('SELECT body FROM reports')).rows.map((r) => gunzipSync(r.body).toString('utf8'));
  const [stored] = await storedBodies();
  assert.ok(stored && !stored.includes(SECRET) && !stored.includes(COMMENT_SECRET), 'the stored body holds no secret');
  assert.ok(stored.includes(JSON.stringify(REDACTED_TEXT)) && stored.includes(JSON.stringify(NORMALIZED_TEXT)));
  assert.ok(stored.includes(JSON.stringify(COMMENT_REDACTED)));

  const shown = async () => {
    const latest = await admin.get<{ report: { metrics: { statements: { top: Array<{ text?: string }> } } } }>(
      `/api/manage/databases/${databaseId}/reports/latest`,
    );
    assert.equal(latest.status, 200);
    const page = await admin.get<string>(`/databases/${databaseId}`);
    assert.equal(page.status, 200);
    return { texts: latest.body.report.metrics.statements.top.map((s) => s.text), api: JSON.stringify(latest.body), page: page.body };
  };
  const fresh = await shown();
  assert.deepEqual(fresh.texts.slice(0, 3), [REDACTED_TEXT, NORMALIZED_TEXT, COMMENT_REDACTED]);
  assert.ok(fresh.page.includes(REDACTED_TEXT), 'the dashboard shows the redacted text');

  // A row stored before the service redacted: its body still holds the secret.
  const legacy = stored
    .replace(JSON.stringify(REDACTED_TEXT), JSON.stringify(SECRET_TEXT))
    .replace(JSON.stringify(COMMENT_REDACTED), JSON.stringify(COMMENT_TEXT));
  await storage.query('UPDATE reports SET body = $1', [gzipSync(legacy)]);
  assert.ok((await storedBodies())[0]!.includes(SECRET));
  const old = await shown();
  assert.deepEqual(old.texts.slice(0, 3), [REDACTED_TEXT, NORMALIZED_TEXT, COMMENT_REDACTED]);
  for (const output of [old.api, old.page]) {
    assert.ok(!output.includes(SECRET) && !output.includes('S3cret!x') && !output.includes(COMMENT_SECRET), output.slice(0, 200));
  }
});

// API tokens over real HTTP: an admin makes one with a role and an expiry; its secret is shown
// once and stored hashed; it authenticates the people's API with Authorization: Bearer (no cookie,
// no CSRF token), with its role; its actions are in the audit log under its name; revoked or
// expired, it is refused saying so; the agents' API and the pages do not take it; a token cannot
// make tokens.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import pg from 'pg';
import { startAdminService, type AdminService } from './helpers/service-admin.ts';
import { assertClientError, type JsonResponse } from './helpers/service.ts';

let lab: AdminService;
before(async () => {
  lab = await startAdminService('postgres');
});
after(() => lab?.close());

async function withToken<T>(secret: string, method: string, path: string, body?: unknown): Promise<JsonResponse<T>> {
  const response = await fetch(`${lab.service.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${secret}`, ...(body !== undefined && { 'content-type': 'application/json' }) },
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // a page, or nothing
  }
  return { status: response.status, headers: response.headers, body: parsed as T };
}

interface TokenJson {
  id: string;
  name: string;
  role: string;
  prefix: string;
  expiresAt: string;
  revokedAt: string | null;
  lastUsedAt: string | null;
}

test('a token with a role, shown once, hashed, audited under its name, revocable; expired refused', async () => {
  const { admin, service } = lab;
  const { databaseId, apiKeyId } = await admin.createDatabase('automated');

  assertClientError(await admin.post('/api/manage/tokens', { name: 'ci', role: 'operator' }), 400, 'bad_request', 'body.expiresInDays');
  assertClientError(
    await admin.post('/api/manage/tokens', { name: 'ci', role: 'root', expiresInDays: 30 }),
    400,
    'bad_request',
    'body.role',
  );
  assertClientError(
    await admin.post('/api/manage/tokens', { name: 'ci', role: 'viewer', expiresInDays: 1000 }),
    400,
    'bad_request',
    'body.expiresInDays',
  );
  const made = await admin.post<{ token: TokenJson; secret: string }>('/api/manage/tokens', {
    name: 'nightly-ci',
    role: 'operator',
    expiresInDays: 30,
  });
  assert.equal(made.status, 201, JSON.stringify(made.body));
  const { secret, token } = made.body;
  assert.match(secret, /^tunerpat_[A-Za-z0-9_-]{43}$/);
  assert.ok(secret.startsWith(token.prefix));
  assertClientError(
    await admin.post('/api/manage/tokens', { name: 'nightly-ci', role: 'viewer', expiresInDays: 1 }),
    409,
    'conflict',
    'nightly-ci',
  );

  // Only its hash is stored; the listing never shows it.
  const storage = new pg.Client({ connectionString: lab.store.databaseUrl });
  await storage.connect();
  try {
    const rows = (await storage.query<{ row: string }>('SELECT row_to_json(t)::text AS row FROM api_tokens t')).rows.map((r) => r.row);
    assert.equal(rows.length, 1);
    assert.ok(!rows[0]!.includes(secret.slice('tunerpat_'.length)), 'the secret is not stored');
    const audit = (await storage.query<{ row: string }>('SELECT row_to_json(a)::text AS row FROM audit_events a')).rows
      .map((r) => r.row)
      .join('\n');
    assert.ok(!audit.includes(secret.slice('tunerpat_'.length)), 'nor in the audit log');
  } finally {
    await storage.end();
  }
  const listed = await admin.get<{ tokens: TokenJson[] }>('/api/manage/tokens');
  assert.ok(!JSON.stringify(listed.body).includes(secret));

  // It works on the people's API with its role, without a cookie or a CSRF token.
  const databases = await withToken<{ databases: Array<{ id: string }> }>(secret, 'GET', '/api/manage/databases');
  assert.equal(databases.status, 200);
  assert.deepEqual(
    databases.body.databases.map((d) => d.id),
    [databaseId],
  );
  const command = await withToken(secret, 'POST', `/api/manage/databases/${databaseId}/commands`, { kind: 'revert', to: 'baseline' });
  assert.equal(command.status, 201, JSON.stringify(command.body));
  assertClientError(
    await withToken(secret, 'POST', `/api/manage/databases/${databaseId}/keys/${apiKeyId}/revoke`),
    403,
    'forbidden',
    /only an admin/,
  );
  assertClientError(await withToken(secret, 'GET', '/api/manage/tokens'), 403, 'forbidden', /an API token cannot/);

  // Audited under its name, from its address.
  const events = (
    await admin.get<{ events: Array<{ action: string; actor: { username: string; kind: string; via: string }; address: string }> }>(
      '/api/manage/audit?action=command.revert',
    )
  ).body.events;
  assert.deepEqual(
    events.map((e) => [e.actor, e.address]),
    [[{ username: 'nightly-ci', kind: 'token', via: 'token' }, '127.0.0.1']],
  );

  // Not the agents' API, nor the pages.
  const agent = await fetch(`${service.url}/api/v1/databases/${databaseId}/agent/start`, {
    method: 'POST',
    headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
    body: '{}',
  });
  assert.equal(agent.status, 401);
  const page = await fetch(`${service.url}/databases`, { headers: { authorization: `Bearer ${secret}` }, redirect: 'manual' });
  assert.equal(page.status, 303, 'the pages want a login session');

  // Revoked: refused at once, saying so.
  assert.equal((await admin.post(`/api/manage/tokens/${token.id}/revoke`)).status, 204);
  assertClientError(await withToken(secret, 'GET', '/api/manage/databases'), 401, 'unauthorized', 'revoked');
  assert.ok(
    (await admin.get<{ events: Array<{ action: string }> }>('/api/manage/audit?action=api_token.revoked')).body.events.length === 1,
  );

  // Expired: refused, naming when. (Made valid for a day, then its expiry moved into the past.)
  const short = await admin.post<{ token: TokenJson; secret: string }>('/api/manage/tokens', {
    name: 'short',
    role: 'viewer',
    expiresInDays: 1,
  });
  assert.equal((await withToken(short.body.secret, 'GET', '/api/manage/databases')).status, 200);
  const clock = new pg.Client({ connectionString: lab.store.databaseUrl });
  await clock.connect();
  await clock.query(`UPDATE api_tokens SET expires_at = now() - interval '1 minute' WHERE id = $1`, [short.body.token.id]);
  await clock.end();
  assertClientError(
    await withToken(short.body.secret, 'GET', '/api/manage/databases'),
    401,
    'unauthorized',
    /the API token "short" expired at/,
  );
  assertClientError(await withToken('tunerpat_not-a-token', 'GET', '/api/manage/databases'), 401, 'unauthorized', 'expected an API token');
  assertClientError(await withToken('', 'GET', '/api/manage/databases'), 401, 'unauthorized');
});

// The audit log, end to end over real HTTP on both storages: an operator's session start and an
// admin's key revocation are in it with their actors and addresses; logins, refused ones, people
// and roles too; filters, pages and the JSON-lines export; viewers read their databases' log but
// not the organization's. Append-only: no route changes an entry, and the storage itself refuses
// an UPDATE, a DELETE or a TRUNCATE except retention's delete of old entries. No secret
// (password, API key, login or CSRF token) is ever in it.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { recordAudit } from '../src/service/audit/record.ts';
import { openFreshStorage } from './helpers/fleet-fixture.ts';
import { ADMIN_PASSWORD, PersonClient, STORAGE_KINDS, assertClientError } from './helpers/service.ts';
import { startAdminService, type AdminService } from './helpers/service-admin.ts';
import { SimulatedAgent } from './sessions-agent.ts';

interface EventJson {
  id: number;
  at: string;
  actor: { username: string; kind: string; via: string | null };
  address: string | null;
  action: string;
  databaseId?: string;
  details: Record<string, unknown>;
}
type Page = { events: EventJson[]; next: number | null };

for (const kind of STORAGE_KINDS) {
  describe(`the audit log on ${kind}`, () => {
    let lab: AdminService;
    before(async () => {
      lab = await startAdminService(kind);
    });
    after(() => lab?.close());

    test("an operator's session start and an admin's key revocation, with actors and addresses; filters, pages, export", async () => {
      const { service, admin } = lab;
      const secrets: string[] = [ADMIN_PASSWORD, admin.csrfToken, admin.cookie.split('=')[1]!];
      const password = `op-${randomBytes(12).toString('base64url')}`;
      secrets.push(password);
      assert.equal((await admin.post('/api/manage/users', { username: 'olga', password, role: 'operator' })).status, 201);
      const viewerCreated = await admin.post<{ user: { id: string }; password: string }>('/api/manage/users', {
        username: 'vic',
        role: 'viewer',
      });
      secrets.push(viewerCreated.body.password);
      const refused = await new PersonClient(service.url).post('/api/manage/login', {
        username: 'olga',
        password: 'not-her-password-at-all',
      });
      assert.equal(refused.status, 401);
      secrets.push('not-her-password-at-all');
      const olga = await PersonClient.login(service.url, 'olga', password);
      secrets.push(olga.csrfToken, olga.cookie.split('=')[1]!);

      const { databaseId, apiKey, apiKeyId } = await admin.createDatabase('audited');
      secrets.push(apiKey);
      const agent = new SimulatedAgent(service.url, databaseId, apiKey);
      await agent.start();
      await agent.report();
      const started = await olga.post<{ session: { id: string } }>(`/api/manage/databases/${databaseId}/tuning-sessions`, {
        windowSeconds: 2,
        warmupSeconds: 0,
        iterations: 3,
      });
      assert.equal(started.status, 201, JSON.stringify(started.body));
      assert.equal((await olga.post(`/api/manage/databases/${databaseId}/tuning-sessions/${started.body.session.id}/stop`)).status, 200);
      const second = await admin.post<{ apiKey: string }>(`/api/manage/databases/${databaseId}/keys`, { label: 'spare' });
      secrets.push(second.body.apiKey);
      assert.equal((await admin.post(`/api/manage/databases/${databaseId}/keys/${apiKeyId}/revoke`)).status, 204);
      assert.equal((await admin.patch(`/api/manage/users/${viewerCreated.body.user.id}`, { role: 'operator' })).status, 200);

      const all = (await admin.get<Page>('/api/manage/audit')).body.events;
      const find = (action: string) => all.find((e) => e.action === action);
      const start = find('tuning_session.started');
      assert.ok(start, JSON.stringify(all.map((e) => e.action)));
      assert.deepEqual(
        [start.actor, start.address, start.databaseId],
        [{ username: 'olga', kind: 'user', via: 'password' }, '127.0.0.1', databaseId],
      );
      assert.equal(start.details['sessionId'], started.body.session.id);
      const revoke = find('api_key.revoked');
      assert.ok(revoke);
      assert.deepEqual(
        [revoke.actor.username, revoke.address, revoke.databaseId, revoke.details['keyId']],
        ['admin', '127.0.0.1', databaseId, apiKeyId],
      );
      assert.deepEqual(find('tuning_session.stopped')?.details['state'], { before: 'baseline', after: 'stopped' });
      assert.deepEqual(find('user.role_changed')?.details['role'], { before: 'viewer', after: 'operator' });
      assert.deepEqual(
        [find('login.refused')?.actor.username, find('login.refused')?.address, find('login.refused')?.details['reason']],
        ['olga', '127.0.0.1', 'wrong password'],
      );
      for (const action of ['login', 'user.created', 'database.created', 'api_key.created']) assert.ok(find(action), action);
      assert.ok(
        all.every((e, i) => i === 0 || all[i - 1]!.id > e.id),
        `newest first: ${all.map((e) => e.id).join(',')}`,
      );

      // Filters and pages.
      const byOlga = (await admin.get<Page>('/api/manage/audit?actor=olga')).body.events;
      assert.ok(byOlga.length >= 3 && byOlga.every((e) => e.actor.username === 'olga'));
      const ofDatabase = (await admin.get<Page>(`/api/manage/audit?databaseId=${databaseId}&action=api_key.revoked`)).body.events;
      assert.deepEqual(
        ofDatabase.map((e) => e.id),
        [revoke.id],
      );
      const first = (await admin.get<Page>('/api/manage/audit?limit=2')).body;
      assert.equal(first.events.length, 2);
      const next = (await admin.get<Page>(`/api/manage/audit?limit=2&before=${first.next}`)).body;
      assert.deepEqual(
        next.events.map((e) => e.id),
        all.slice(2, 4).map((e) => e.id),
      );
      const future = (await admin.get<Page>(`/api/manage/audit?since=${new Date(Date.now() + 60_000).toISOString()}`)).body;
      assert.deepEqual(future.events, []);
      assertClientError(await admin.get('/api/manage/audit?action=everything'), 400, 'bad_request', 'query.action');
      assertClientError(await admin.get('/api/manage/audit?since=yesterday'), 400, 'bad_request', 'query.since');

      // The export: every entry, one JSON object a line.
      const exported = await fetch(`${service.url}/api/manage/audit/export`, { headers: { cookie: admin.cookie } });
      assert.equal(exported.status, 200);
      assert.match(exported.headers.get('content-type') ?? '', /application\/x-ndjson/);
      const exportText = await exported.text();
      const lines = exportText
        .trimEnd()
        .split('\n')
        .map((l) => JSON.parse(l) as EventJson);
      assert.deepEqual(
        lines.map((e) => e.id),
        (await admin.get<Page>('/api/manage/audit?limit=500')).body.events.map((e) => e.id),
      );

      // Who may read it: the organization's log is for admins; a database's for anyone of it.
      assertClientError(await olga.get('/api/manage/audit'), 403, 'forbidden', /only an admin can read the organization's audit log/);
      assert.equal((await olga.get(`/api/manage/audit?databaseId=${databaseId}`)).status, 200);
      const page = await olga.get<string>(`/databases/${databaseId}/audit`);
      assert.equal(page.status, 200);
      assert.match(page.body, /api_key\.revoked/);
      assert.equal((await olga.get<string>('/audit')).status, 403);
      assert.match((await admin.get<string>('/audit?action=login.refused')).body, /wrong password/);

      // No secret anywhere in the log, in the API, the export or the pages.
      // (A page carries its reader's own CSRF token in its forms: that is not the log's.)
      const ownCsrf = (html: string) => html.replaceAll(/name="_csrf" value="[^"]*"/g, '');
      const everything = [JSON.stringify(all), exportText, ownCsrf(page.body), ownCsrf((await admin.get<string>('/audit')).body)];
      for (const secret of secrets) for (const text of everything) assert.ok(!text.includes(secret), 'a secret is in the audit log');
    });

    test('a lockout by the login throttle is recorded once, at its first refusal, not at every refused attempt', async () => {
      const { service, admin } = lab;
      const password = `lo-${randomBytes(12).toString('base64url')}`;
      assert.equal((await admin.post('/api/manage/users', { username: 'lockie', password, role: 'viewer' })).status, 201);
      const statuses: number[] = [];
      for (let i = 0; i < 9; i++) {
        const tried = await new PersonClient(service.url).post('/api/manage/login', { username: 'lockie', password: `guess-${i}-wrong` });
        statuses.push(tried.status);
      }
      // 5 failures for the username from this address, then refused without a password check.
      assert.deepEqual(statuses, [401, 401, 401, 401, 401, 429, 429, 429, 429]);
      const events = (await admin.get<Page>('/api/manage/audit?action=login.refused&actor=lockie')).body.events;
      const reasons = events.map((e) => e.details['reason']);
      assert.equal(reasons.filter((r) => r === 'wrong password').length, 5, JSON.stringify(reasons));
      const lockouts = events.filter((e) => e.details['reason'] === 'too many failed logins');
      assert.equal(lockouts.length, 1, JSON.stringify(reasons));
      const retryAfter = lockouts[0]!.details['retryAfterSeconds'];
      assert.ok(typeof retryAfter === 'number' && retryAfter > 0 && retryAfter <= 15 * 60, String(retryAfter));
      assert.ok(lockouts[0]!.address, 'the lockout names the address');
      assert.ok(!JSON.stringify(events).includes('guess-'), 'a tried password reached the audit log');
    });

    test('no route changes an entry', async () => {
      const { admin } = lab;
      const [latest] = (await admin.get<Page>('/api/manage/audit?limit=1')).body.events;
      assert.ok(latest);
      const paths: string[] = ['/api/manage/audit', `/api/manage/audit/${latest.id}`, '/api/manage/audit/export'];
      for (const method of ['POST', 'PUT', 'PATCH', 'DELETE']) {
        for (const path of paths) {
          const response: { status: number } = await admin.request(method, path, method === 'DELETE' ? undefined : { action: 'login' });
          assert.equal(response.status, 404, `${method} ${path}`);
        }
        const page = await fetch(`${lab.service.url}/audit`, {
          method,
          headers: { cookie: admin.cookie, 'content-type': 'application/x-www-form-urlencoded' },
          body: `_csrf=${admin.csrfToken}`,
        });
        assert.equal(page.status, 404, `${method} /audit`);
      }
      const [again] = (await admin.get<Page>(`/api/manage/audit?limit=1&before=${latest.id + 1}`)).body.events;
      assert.deepEqual(again, latest);
    });
  });

  test(`the ${kind} storage keeps the audit log append-only; retention deletes only old entries`, async () => {
    const { driver, storage, dispose } = await openFreshStorage(kind);
    try {
      const user = await storage.createOrganization('org', 'auditor', 'not-a-real-hash');
      const actor = { ...user, via: 'password' as const, address: '10.0.0.1', token: null };
      await recordAudit({ stores: { audit: storage } }, actor, 'user.created', { username: 'x' });
      await driver.query(
        `INSERT INTO audit_events (at, organization_id, actor_kind, actor_name, action, details) VALUES (now() - interval '500 days', $1, 'user', 'old', 'login', '{}')`,
        [user.organizationId],
      );
      await assert.rejects(driver.query(`UPDATE audit_events SET actor_name = 'someone else'`), /append-only/);
      await assert.rejects(driver.query('DELETE FROM audit_events'), /append-only/);
      await assert.rejects(driver.query('TRUNCATE audit_events'), /append-only|not assigned/);
      // Declaring a retention lets through the delete of entries older than it, and nothing newer.
      await assert.rejects(
        driver.transaction(async (tx) => {
          await tx.query("SELECT set_config('tuner.audit_retention_days', '400', true)");
          await tx.query('DELETE FROM audit_events');
        }),
        /append-only/,
      );
      const pruned = await storage.prune({ maxAgeDays: 30, maxReportsPerDatabase: 100, maxEventsPerDatabase: 100, auditMaxAgeDays: 400 });
      assert.equal(pruned.auditEvents, 1);
      const left = await storage.listAudit(user.organizationId, { limit: 10 });
      assert.deepEqual(
        left.map((e) => [e.action, e.actor.name, e.address]),
        [['user.created', 'auditor', '10.0.0.1']],
      );
      // The one writer refuses a detail that would hold a secret.
      await assert.rejects(recordAudit({ stores: { audit: storage } }, actor, 'user.created', { password: 'x' }), /secret/);
      await assert.rejects(recordAudit({ stores: { audit: storage } }, actor, 'api_key.created', { key: { apiKey: 'x' } }), /secret/);
    } finally {
      await dispose();
    }
  });
}

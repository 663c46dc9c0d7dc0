// The tuning service over real HTTP on loopback, with its real storage, on both storages:
// people's API → agent start → reports → command round trip → ack; the lease rules; hostile
// requests; organizations kept apart; a restart on the same storage.
import assert from 'node:assert/strict';
import { gzipSync } from 'node:zlib';
import { after, before, describe, test } from 'node:test';
import {
  AgentStartResponseSchema,
  ErrorResponseSchema,
  MAX_BODY_BYTES,
  ReportResponseSchema,
  routes,
  type CommandAckRequest,
} from '../src/protocol/v1.ts';
import { AgentClient, PersonClient, STORAGE_KINDS, assertClientError, type TestService } from './helpers/service.ts';
import { LeaseClock, startAdminService, type AdminService } from './helpers/service-admin.ts';
import { reportRequest, sampleMetrics, startRequest } from './helpers/service-reports.ts';
import { until } from './helpers/until.ts';
import { hashPassword } from '../src/service/people/passwords.ts';

const ALICE_PASSWORD = 'alice-password-for-tests';

interface CommandView {
  id: string;
  state: string;
  command: { id: string; kind: string };
  sentCount: number;
  outcome: { status: string; effective: Record<string, string>; errors: string[] } | null;
}

async function startAgent(agent: AgentClient, options: Parameters<typeof startRequest>[0] = {}) {
  const response = await agent.start(startRequest(options), { gzip: true });
  assert.equal(response.status, 200, JSON.stringify(response.body));
  return AgentStartResponseSchema.parse(response.body);
}

async function report(agent: AgentClient, leaseId: string, seq: number, options: Parameters<typeof reportRequest>[2] = {}) {
  const response = await agent.report(reportRequest(leaseId, seq, options), { gzip: true });
  assert.equal(response.status, 200, JSON.stringify(response.body));
  return ReportResponseSchema.parse(response.body);
}

async function commands(person: PersonClient, databaseId: string): Promise<CommandView[]> {
  const response = await person.get<{ commands: CommandView[] }>(`/api/manage/databases/${databaseId}/commands`);
  assert.equal(response.status, 200);
  return response.body.commands;
}

for (const kind of STORAGE_KINDS) {
  describe(`tuning service on ${kind} storage`, () => {
    let lab: AdminService;
    let service: TestService;
    let admin: PersonClient;
    const clock = new LeaseClock();

    before(async () => {
      // Lease length max(3 × interval, 1 s): a database set to a 1 s interval has 3 s leases.
      lab = await startAdminService(kind, { env: { TUNER_LEASE_MIN_SECONDS: '1' }, start: { leaseClock: clock.now } });
      ({ service, admin } = lab);
    });
    after(() => lab?.close());

    test('a command goes round: people issue it, the next report carries it, the ack records the outcome', async () => {
      const { databaseId, apiKey } = await admin.createDatabase('orders');
      assert.match(apiKey, /^tuner_[A-Za-z0-9_-]{43}$/);
      const agent = new AgentClient(service.url, databaseId, apiKey);

      const lease = await startAgent(agent);
      assert.equal(lease.reportIntervalSeconds, 60);
      assert.ok(new Date(lease.leaseExpiresAt).getTime() > Date.now() + 170_000, 'lease of 3 × 60 s');

      const first = await report(agent, lease.leaseId, 0, { metrics: sampleMetrics({ topStatements: 100, avgQueryRuntimeMs: 0.5 }) });
      assert.equal(first.command, null);
      assert.equal(first.nextReportInSeconds, 60);

      const latest = await admin.get<{
        report: { seq: number; metrics: { derived: { avgQueryRuntimeMs: number }; statements: { top: unknown[] } } };
      }>(`/api/manage/databases/${databaseId}/reports/latest`);
      assert.equal(latest.status, 200);
      assert.equal(latest.body.report.seq, 0);
      assert.equal(latest.body.report.metrics.derived.avgQueryRuntimeMs, 0.5);
      assert.equal(latest.body.report.metrics.statements.top.length, 100);

      const issued = await admin.post<{ command: CommandView }>(`/api/manage/databases/${databaseId}/commands`, {
        kind: 'apply',
        values: { work_mem: '64MB', random_page_cost: 1.1 },
        keep: true,
      });
      assert.equal(issued.status, 201, JSON.stringify(issued.body));
      assert.equal(issued.body.command.state, 'pending');
      const commandId = issued.body.command.id;

      const second = await report(agent, lease.leaseId, 1);
      assert.deepEqual(second.command, {
        id: commandId,
        kind: 'apply',
        values: { work_mem: '64MB', random_page_cost: 1.1 },
        allowRestart: false,
        keep: true,
      });
      assert.equal((await commands(admin, databaseId))[0]?.state, 'sent');

      // Not acknowledged: sent again, same id (the agent deduplicates by id).
      const third = await report(agent, lease.leaseId, 2);
      assert.equal(third.command?.id, commandId);

      const ack: CommandAckRequest = {
        leaseId: lease.leaseId,
        status: 'applied',
        effective: { work_mem: '65536', random_page_cost: '1.1' },
        errors: [],
        restarted: false,
        restored: false,
      };
      const acked = await agent.ack(commandId, ack);
      assert.equal(acked.status, 204, JSON.stringify(acked.body));
      // A retried ack is harmless.
      assert.equal((await agent.ack(commandId, ack)).status, 204);

      const listed = (await commands(admin, databaseId))[0]!;
      assert.equal(listed.state, 'applied');
      assert.equal(listed.sentCount, 2);
      assert.deepEqual(listed.outcome?.effective, { work_mem: '65536', random_page_cost: '1.1' });
      assert.equal((await report(agent, lease.leaseId, 3)).command, null);

      // A revert, refused by the agent: the refusal and its reason are kept.
      const revert = await admin.post<{ command: CommandView }>(`/api/manage/databases/${databaseId}/commands`, {
        kind: 'revert',
        to: 'baseline',
      });
      assert.equal(revert.status, 201);
      const fourth = await report(agent, lease.leaseId, 4);
      assert.deepEqual(fourth.command, { id: revert.body.command.id, kind: 'revert', to: 'baseline' });
      await agent.ack(revert.body.command.id, { ...ack, status: 'refused', effective: {}, errors: ['nothing to revert'] });
      const refused = (await commands(admin, databaseId))[0]!;
      assert.equal(refused.state, 'refused');
      assert.deepEqual(refused.outcome?.errors, ['nothing to revert']);

      // The report interval set by a person reaches the agent with its next report.
      const interval = await admin.post(`/api/manage/databases/${databaseId}/report-interval`, { reportIntervalSeconds: 15 });
      assert.equal(interval.status, 200, JSON.stringify(interval.body));
      const fifth = await report(agent, lease.leaseId, 5, {
        events: [
          {
            at: new Date().toISOString(),
            level: 'warn',
            code: 'guardrail_breach',
            message: 'p99 runtime up 40 %: reverted to known-good',
            commandId,
          },
        ],
      });
      assert.equal(fifth.nextReportInSeconds, 15);
      // The agent learns of 15 s from this answer and was on 60 s until now: the lease the fourth
      // report renewed for 3 × 60 s is not cut to 3 × 15 s under it.
      assert.ok(Date.parse(fifth.leaseExpiresAt) >= Date.parse(fourth.leaseExpiresAt), 'the lease is not cut by a shorter interval');
      const events = await admin.get<{ events: Array<{ code: string; commandId: string }> }>(`/api/manage/databases/${databaseId}/events`);
      assert.deepEqual(
        events.body.events.map((e) => [e.code, e.commandId]),
        [['guardrail_breach', commandId]],
      );

      const status = await admin.get<{ database: { agent: { connected: boolean; hostname: string; lastReportAt: string } } }>(
        `/api/manage/databases/${databaseId}`,
      );
      assert.equal(status.body.database.agent.connected, true);
      assert.equal(status.body.database.agent.hostname, 'db-host-1');

      assert.equal((await agent.stop({ leaseId: lease.leaseId })).status, 204);
    });

    test('one live agent per database: a second is refused naming the holder; resume, stop and expiry let one in', async () => {
      const { databaseId, apiKey } = await admin.createDatabase('lease rules');
      const agentA = new AgentClient(service.url, databaseId, apiKey);
      const agentB = new AgentClient(service.url, databaseId, apiKey);
      const leaseA = await startAgent(agentA, { hostname: 'host-a', pid: 111 });

      const refused = await agentB.start(startRequest({ hostname: 'host-b', pid: 222 }));
      assertClientError(refused, 409, 'agent_conflict', /host host-a, pid 111, agent 0\.1\.0, started \d{4}-\d\d-\d\dT/);
      assertClientError(
        await agentB.start(startRequest({ hostname: 'host-b', resumeLeaseId: 'not-the-lease' })),
        409,
        'agent_conflict',
        'host-a',
      );

      // Agent A restarted in its directory presents its lease and takes it back at once.
      const resumed = await startAgent(agentA, { hostname: 'host-a', pid: 112, resumeLeaseId: leaseA.leaseId });
      assert.equal(resumed.leaseId, leaseA.leaseId);

      // A foreign lease id can neither report, acknowledge, nor stop the holder.
      assertClientError(await agentB.report(reportRequest('foreign-lease', 0)), 409, 'lease_expired', 'start again');
      assertClientError(await agentB.stop({ leaseId: 'foreign-lease' }), 409, 'lease_expired');
      await report(agentA, leaseA.leaseId, 0);

      // Stop releases: the old lease cannot report, a new agent gets in.
      assert.equal((await agentA.stop({ leaseId: leaseA.leaseId })).status, 204);
      assertClientError(await agentA.report(reportRequest(leaseA.leaseId, 1)), 409, 'lease_expired');
      await admin.post(`/api/manage/databases/${databaseId}/report-interval`, { reportIntervalSeconds: 1 });
      const leaseB = await startAgent(agentB, { hostname: 'host-b', pid: 222 });
      assert.notEqual(leaseB.leaseId, leaseA.leaseId);

      // Expiry: with a 1 s interval the lease lasts 3 s; once it lapses another agent gets in, and
      // the lapsed agent is told to start again. A renewal never moves the lease's end closer: one
      // the lease clock counts from 3.3 s ago leaves the lease as it was.
      const renewed = await report(agentB, leaseB.leaseId, 0);
      assert.equal(renewed.nextReportInSeconds, 1);
      assertClientError(await agentA.start(startRequest({ hostname: 'host-a' })), 409, 'agent_conflict', 'host-b');
      clock.shift(-3_300);
      const early = await report(agentB, leaseB.leaseId, 1);
      clock.shift(3_300);
      assert.equal(early.leaseExpiresAt, renewed.leaseExpiresAt, 'a renewal never moves the end closer');
      assertClientError(await agentA.start(startRequest({ hostname: 'host-a' })), 409, 'agent_conflict', 'host-b');
      const leaseA2 = await until(
        'the 3 s lease to lapse',
        async () => {
          const answer = await agentA.start(startRequest({ hostname: 'host-a', pid: 113 }));
          return answer.status === 200 ? AgentStartResponseSchema.parse(answer.body) : null;
        },
        15_000,
        100,
      );
      assertClientError(await agentB.report(reportRequest(leaseB.leaseId, 2)), 409, 'lease_expired');
      await report(agentA, leaseA2.leaseId, 0);
      await agentA.stop({ leaseId: leaseA2.leaseId });
    });

    test('hostile and malformed agent requests get a 4xx with a clear message, and the service keeps answering', async () => {
      const { databaseId, apiKey, apiKeyId } = await admin.createDatabase('hostile');
      const agent = new AgentClient(service.url, databaseId, apiKey);
      const lease = await startAgent(agent);
      const good = reportRequest(lease.leaseId, 0);
      const url = `${service.url}${routes.report(databaseId)}`;
      const raw = (body: string | Buffer, headers: Record<string, string>, target = url) =>
        fetch(target, { method: 'POST', headers: { authorization: `Bearer ${apiKey}`, ...headers }, body }).then(async (r) => ({
          status: r.status,
          body: await r.json(),
          headers: r.headers,
        }));
      const json = { 'content-type': 'application/json' };

      // Wrong types, missing fields, unknown fields, values out of range, deep inside the report.
      assertClientError(await agent.report({ ...good, seq: 'one' }), 400, 'bad_request', 'body.seq');
      const { leaseId: _dropped, ...noLease } = good;
      assertClientError(await agent.report(noLease), 400, 'bad_request', 'body.leaseId');
      assertClientError(await agent.report({ ...good, extra: true }), 400, 'bad_request', 'extra');
      const metrics = sampleMetrics({ topStatements: 3 });
      (metrics.statements.top[1] as { calls: number }).calls = -5;
      assertClientError(await agent.report({ ...good, metrics }), 400, 'bad_request', 'body.metrics.statements.top[1].calls');
      assertClientError(
        await agent.report({ ...good, events: Array.from({ length: 101 }, () => good.events[0]) }),
        400,
        'bad_request',
        'body.events',
      );
      assertClientError(await agent.start({ ...startRequest(), protocolVersion: 2 }), 400, 'bad_request', 'body.protocolVersion');
      assertClientError(await agent.start(startRequest({ target: 'managed-b-flex' })), 400, 'bad_request', 'set up for target local');
      assertClientError(await agent.report([1, 2, 3]), 400, 'bad_request', 'expected object');
      // Allowed by the schemas, beyond what PostgreSQL stores: refused naming the field, or stored.
      assertClientError(await agent.report({ ...good, sentAt: '0000-01-01T00:00:00Z' }), 400, 'bad_request', 'body.sentAt');
      assertClientError(await agent.report({ ...good, sentAt: '2026-01-01T00:00:00+23:00' }), 400, 'bad_request', 'body.sentAt');
      const event = { at: new Date().toISOString(), level: 'info', code: 'x', message: 'ok' };
      assertClientError(
        await agent.report({ ...good, events: [{ ...event, at: '0000-01-01T00:00:00Z' }] }),
        400,
        'bad_request',
        'body.events[0].at',
      );
      assertClientError(
        await agent.report({ ...good, events: [event, { ...event, message: 'nul \u0000 here' }] }),
        400,
        'bad_request',
        'body.events[1].message',
      );
      assertClientError(
        await agent.start({ ...startRequest(), host: { hostname: 'a\u0000b', pid: 1 } }),
        400,
        'bad_request',
        'body.host.hostname',
      );
      const bigMetrics = sampleMetrics({ topStatements: 2 });
      bigMetrics.activity.connections.total = 2 ** 40;
      assert.equal((await agent.report({ ...good, seq: 2 ** 50, metrics: bigMetrics })).status, 200);
      assertClientError(await raw('{"leaseId": ', json), 400, 'bad_request', 'not valid JSON');
      assertClientError(await raw('', json), 400, 'bad_request');
      assertClientError(await raw('{"__proto__": {"polluted": true}, "leaseId": "x"}', json), 400, 'bad_request');
      assertClientError(await raw(`${'['.repeat(200_000)}${']'.repeat(200_000)}`, json), 400, 'bad_request');

      // Sizes: raw, and gzipped (a zip bomb stops at the limit).
      const huge = JSON.stringify({ ...good, padding: 'x'.repeat(MAX_BODY_BYTES) });
      assertClientError(await raw(huge, json), 413, 'payload_too_large');
      const bomb = gzipSync(Buffer.alloc(64 * MAX_BODY_BYTES, 0x20));
      assert.ok(bomb.length < 100_000, 'the bomb is small on the wire');
      assertClientError(await raw(bomb, { ...json, 'content-encoding': 'gzip' }), 413, 'payload_too_large');
      assertClientError(await raw(JSON.stringify(good), { ...json, 'content-encoding': 'gzip' }), 400, 'bad_request', 'gzip');
      assertClientError(
        await raw(gzipSync(JSON.stringify(good)).subarray(0, 50), { ...json, 'content-encoding': 'gzip' }),
        400,
        'bad_request',
        'gzip',
      );
      assertClientError(await raw(JSON.stringify(good), { ...json, 'content-encoding': 'br' }), 415, 'unsupported_media_type');

      // Content types.
      assertClientError(await raw(JSON.stringify(good), { 'content-type': 'text/plain' }), 415, 'unsupported_media_type');
      assertClientError(
        await raw('leaseId=x&seq=1', { 'content-type': 'application/x-www-form-urlencoded' }),
        415,
        'unsupported_media_type',
      );

      // Who is asking: no key, a wrong key, a revoked key: 401. A live key named with another
      // database's id, or with an id that does not exist: the same 404 (check the database id),
      // which says nothing about which ids exist.
      const other = await admin.createDatabase('another');
      const unknownId = '7d1c7a50-1d4e-4b8a-9c36-5a3f0a6f2b11';
      assertClientError(
        await agent.post(routes.report(databaseId), good, { headers: { authorization: '' } }),
        401,
        'unauthorized',
        'Authorization: Bearer',
      );
      assertClientError(
        await new AgentClient(service.url, databaseId, 'tuner_wrongwrongwrongwrongwrongwrongwrongwrongwro').report(good),
        401,
        'unauthorized',
      );
      assertClientError(
        await new AgentClient(service.url, databaseId, other.apiKey).report(good),
        404,
        'not_found',
        'check tuner.database_id',
      );
      const forUnknown = await new AgentClient(service.url, unknownId, apiKey).report(good);
      const forOther = await new AgentClient(service.url, other.databaseId, apiKey).report(good);
      assertClientError(forUnknown, 404, 'not_found', 'not a key of database');
      assertClientError(forOther, 404, 'not_found', 'not a key of database');
      assert.equal(
        (forUnknown.body as { error: { message: string } }).error.message.replace(unknownId, 'ID'),
        (forOther.body as { error: { message: string } }).error.message.replace(other.databaseId, 'ID'),
      );
      assertClientError(await new AgentClient(service.url, databaseId, `${apiKey} extra`).report(good), 401, 'unauthorized');
      assertClientError(await new AgentClient(service.url, databaseId, 'é'.repeat(20)).report(good), 401, 'unauthorized');
      assertClientError(
        await agent.post(routes.report(databaseId), good, { headers: { authorization: `Basic ${Buffer.from('a:b').toString('base64')}` } }),
        401,
        'unauthorized',
        'Bearer',
      );

      // Ids in the path: traversal, SQL, NUL, very long, not a UUID.
      for (const id of ['..%2F..%2Fetc%2Fpasswd', "x'%3B%20DROP%20TABLE%20reports%3B--", '%00', 'not-a-uuid', `${'a'.repeat(150)}`]) {
        const response = await raw(JSON.stringify(good), json, `${service.url}/api/v1/databases/${id}/reports`);
        assert.ok(response.status >= 400 && response.status < 500, `${id}: ${response.status}`);
        assert.ok(ErrorResponseSchema.safeParse(response.body).success, `${id}: error body`);
      }
      assertClientError(
        await raw(JSON.stringify(good), json, `${service.url}/api/v1/databases/${'a'.repeat(400)}/reports`),
        414,
        'bad_request',
        'longer',
      );
      assertClientError(
        await raw(JSON.stringify(good), json, `${service.url}/api/v1/databases/${databaseId}/../../admin`),
        404,
        'not_found',
      );
      const ack = { leaseId: lease.leaseId, status: 'applied', effective: {}, errors: [], restarted: false, restored: false };
      assertClientError(await agent.ack('..%2F..%2Fx', ack), 404, 'not_found');
      assertClientError(await agent.ack('7d1c7a50-1d4e-4b8a-9c36-5a3f0a6f2b11', ack), 404, 'not_found');
      assertClientError(
        await agent.ack('7d1c7a50-1d4e-4b8a-9c36-5a3f0a6f2b11', { ...ack, status: 'done' }),
        400,
        'bad_request',
        'body.status',
      );

      // A revoked key stops working at once.
      const revoke = await admin.post(`/api/manage/databases/${databaseId}/keys/${apiKeyId}/revoke`);
      assert.equal(revoke.status, 204);
      assertClientError(await agent.report(good), 401, 'unauthorized');

      // Still standing.
      const health = await fetch(`${service.url}/healthz`);
      assert.equal(health.status, 200);
      const fresh = await admin.post<{ apiKey: string }>(`/api/manage/databases/${databaseId}/keys`, { label: 'second' });
      assert.equal(fresh.status, 201);
      const again = new AgentClient(service.url, databaseId, fresh.body.apiKey);
      // The lease's last report was seq 2 ** 50 (above): its sequence goes on from there.
      await report(again, lease.leaseId, 2 ** 50 + 1);
    });

    test("organizations are apart: a person never sees nor touches another organization's database", async () => {
      // The people's API adds people to the admin's own organization; another organization is made
      // in the storage, as the first admin's is.
      await service.storage.createOrganization(`alice-org-${kind}`, `alice-${kind}`, await hashPassword(ALICE_PASSWORD));
      const alice = await PersonClient.login(service.url, `alice-${kind}`, ALICE_PASSWORD);
      const adminDb = await admin.createDatabase('admin only');
      const aliceDb = await alice.createDatabase('alice db', 'managed-a');

      const aliceList = await alice.get<{ databases: Array<{ id: string }> }>('/api/manage/databases');
      assert.deepEqual(
        aliceList.body.databases.map((d) => d.id),
        [aliceDb.databaseId],
      );
      assertClientError(await alice.get(`/api/manage/databases/${adminDb.databaseId}`), 404, 'not_found');
      assertClientError(await alice.get(`/api/manage/databases/${adminDb.databaseId}/commands`), 404, 'not_found');
      assertClientError(await alice.get(`/api/manage/databases/${adminDb.databaseId}/reports/latest`), 404, 'not_found');
      assertClientError(
        await alice.post(`/api/manage/databases/${adminDb.databaseId}/commands`, { kind: 'revert', to: 'baseline' }),
        404,
        'not_found',
      );
      assertClientError(await alice.post(`/api/manage/databases/${adminDb.databaseId}/keys`, {}), 404, 'not_found');
      assertClientError(await alice.post(`/api/manage/databases/${adminDb.databaseId}/keys/${adminDb.apiKeyId}/revoke`), 404, 'not_found');
      assertClientError(
        await alice.post(`/api/manage/databases/${adminDb.databaseId}/report-interval`, { reportIntervalSeconds: 5 }),
        404,
        'not_found',
      );
      const adminUsers = await admin.get<{ users: Array<{ id: string; username: string }> }>('/api/manage/users');
      assert.ok(!adminUsers.body.users.some((u) => u.username === `alice-${kind}`), "another organization's people are not listed");
      const adminId = adminUsers.body.users.find((u) => u.username === 'admin')!.id;
      assertClientError(await alice.patch(`/api/manage/users/${adminId}`, { role: 'viewer' }), 404, 'not_found');
      // The admin's key still works: alice's revoke did nothing.
      await startAgent(new AgentClient(service.url, adminDb.databaseId, adminDb.apiKey));
    });

    test("the people's API checks sessions, CSRF tokens and input", async () => {
      const anonymous = new PersonClient(service.url);
      assertClientError(await anonymous.get('/api/manage/databases'), 401, 'unauthorized');
      assertClientError(
        await anonymous.post('/api/manage/login', { username: 'admin', password: 'wrong password' }),
        401,
        'unauthorized',
        'wrong username or password',
      );
      assertClientError(await anonymous.post('/api/manage/login', { username: 'admin' }), 400, 'bad_request', 'body.password');

      const noCsrf = new PersonClient(service.url);
      noCsrf.cookie = admin.cookie;
      assertClientError(await noCsrf.post('/api/manage/databases', { name: 'x', target: 'local' }), 403, 'forbidden', 'CSRF');
      assertClientError(await admin.post('/api/manage/databases', { name: '', target: 'local' }), 400, 'bad_request', 'body.name');
      assertClientError(await admin.post('/api/manage/databases', { name: 'x', target: 'mainframe' }), 400, 'bad_request', 'body.target');
      const { databaseId } = await admin.createDatabase('inputs');
      const path = `/api/manage/databases/${databaseId}/commands`;
      assertClientError(await admin.post(path, { kind: 'apply', values: { 'Work-Mem; DROP': '1' } }), 400, 'bad_request', 'body.values');
      assertClientError(await admin.post(path, { kind: 'apply', values: {} }), 400, 'bad_request', 'at least one parameter');
      assertClientError(
        await admin.post(path, { kind: 'apply', values: { work_mem: { nested: 1 } } }),
        400,
        'bad_request',
        'body.values.work_mem',
      );
      assertClientError(await admin.post(path, { kind: 'shutdown' }), 400, 'bad_request', 'body.kind');
      assertClientError(await admin.post(path, { kind: 'revert', to: 'yesterday' }), 400, 'bad_request', 'body.to');
      assertClientError(
        await admin.post(`/api/manage/databases/${databaseId}/report-interval`, { reportIntervalSeconds: 0 }),
        400,
        'bad_request',
        'body.reportIntervalSeconds',
      );
      assertClientError(await admin.get('/api/manage/databases/not-a-uuid'), 400, 'bad_request', 'path.databaseId');
      assertClientError(await admin.get(`/api/manage/databases/${databaseId}/commands?limit=100000`), 400, 'bad_request', 'query.limit');
    });

    test('retention keeps the newest reports of each database', async () => {
      const { databaseId, apiKey } = await admin.createDatabase('retention');
      const agent = new AgentClient(service.url, databaseId, apiKey);
      const lease = await startAgent(agent);
      for (let seq = 0; seq < 8; seq++) await report(agent, lease.leaseId, seq, { metrics: null });
      const removed = await service.storage.prune({
        maxAgeDays: 30,
        maxReportsPerDatabase: 3,
        maxEventsPerDatabase: 3,
        auditMaxAgeDays: 400,
      });
      assert.ok(removed.reports >= 5, `removed ${removed.reports}`);
      assert.equal(removed.analyzed, kind === 'pglite', 'PGlite, without autovacuum, gets its statistics from the retention job');
      const latest = await admin.get<{ report: { seq: number } }>(`/api/manage/databases/${databaseId}/reports/latest`);
      assert.equal(latest.body.report.seq, 7);
      const adminUser = (await service.storage.findUserForLogin('admin'))!.user;
      const series = await service.storage.reportSeries(adminUser.organizationId, databaseId, 100);
      assert.equal(series.length, 3);
      await agent.stop({ leaseId: lease.leaseId });
    });

    test('restarted on the same storage, the service keeps accounts, keys, databases and reports', async () => {
      const { databaseId, apiKey } = await admin.createDatabase('survives restarts');
      const agent = new AgentClient(service.url, databaseId, apiKey);
      const lease = await startAgent(agent);
      await report(agent, lease.leaseId, 0, { metrics: sampleMetrics({ avgQueryRuntimeMs: 0.777 }) });
      await admin.post(`/api/manage/databases/${databaseId}/commands`, { kind: 'revert', to: 'known-good' });
      await agent.stop({ leaseId: lease.leaseId });
      const before = (await admin.get<{ databases: unknown[] }>('/api/manage/databases')).body.databases;

      await lab.restart();
      ({ service, admin } = lab);
      assert.deepEqual(service.announced, [], 'no second admin on restart');

      assert.deepEqual((await admin.get<{ databases: unknown[] }>('/api/manage/databases')).body.databases, before);
      const latest = await admin.get<{ report: { metrics: { derived: { avgQueryRuntimeMs: number } } } }>(
        `/api/manage/databases/${databaseId}/reports/latest`,
      );
      assert.equal(latest.body.report.metrics.derived.avgQueryRuntimeMs, 0.777);
      const again = new AgentClient(service.url, databaseId, apiKey);
      const lease2 = await startAgent(again);
      const next = await report(again, lease2.leaseId, 0);
      assert.equal(next.command?.kind, 'revert', 'the pending command survived too');
      await PersonClient.login(service.url, `alice-${kind}`, 'x').catch((err: Error) => assert.match(err.message, /401/));
    });
  });
}

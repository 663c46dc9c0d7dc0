// Reports the service can trust, on both storages: per lease, sequence numbers increase (a repeat
// is acknowledged and stored once, an older one refused with its code, and the agent's client
// turns that refusal into a new start); sentAt is checked against the service's clock; "latest"
// is the report received last, whatever the agent's clock says. And the key of another database
// gets the status docs/protocol.md says.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { AgentStartResponseSchema, REPORT_CLOCK_TOLERANCE, ReportResponseSchema, type ReportRequest } from '../src/protocol/v1.ts';
import { LeaseExpiredError, createServiceClient } from '../src/agent/sending/service-client.ts';
import { protocolDoc } from '../src/service/docs/protocol-doc.ts';
import type { PersonClient } from './helpers/service.ts';
import { AgentClient, STORAGE_KINDS, assertClientError, type TestService } from './helpers/service.ts';
import { startAdminService, type AdminService } from './helpers/service-admin.ts';
import { reportRequest, sampleMetrics, startRequest } from './helpers/service-reports.ts';

const SECOND = 1000;
const DAY = 24 * 3600 * SECOND;

for (const kind of STORAGE_KINDS) {
  describe(`reports on ${kind} storage`, () => {
    let lab: AdminService;
    let service: TestService;
    let admin: PersonClient;
    let organizationId: string;

    before(async () => {
      lab = await startAdminService(kind);
      ({ service, admin } = lab);
      organizationId = (await service.storage.findUserForLogin('admin'))!.user.organizationId;
    });
    after(() => lab?.close());

    async function agentOf(name: string) {
      const { databaseId, apiKey } = await admin.createDatabase(name);
      const agent = new AgentClient(service.url, databaseId, apiKey);
      const started = await agent.start(startRequest(), { gzip: true });
      assert.equal(started.status, 200, JSON.stringify(started.body));
      return { databaseId, apiKey, agent, leaseId: AgentStartResponseSchema.parse(started.body).leaseId };
    }

    /** A report whose one event names it, so that stored events tell which reports were stored. */
    function tagged(leaseId: string, seq: number, tag: string, patch: Partial<ReportRequest> = {}): ReportRequest {
      const at = new Date().toISOString();
      return { ...reportRequest(leaseId, seq), events: [{ at, level: 'info', code: 'tag', message: tag }], ...patch };
    }

    async function stored(databaseId: string) {
      const events = await admin.get<{ events: { code: string; message: string }[] }>(
        `/api/manage/databases/${databaseId}/events?limit=100`,
      );
      assert.equal(events.status, 200);
      return {
        reports: (await service.storage.reportSeries(organizationId, databaseId, 100)).length,
        tags: events.body.events
          .filter((e) => e.code === 'tag')
          .map((e) => e.message)
          .sort(),
      };
    }

    async function latest(databaseId: string) {
      const response = await admin.get<{ report: { seq: number; sentAt: string } }>(`/api/manage/databases/${databaseId}/reports/latest`);
      assert.equal(response.status, 200);
      return response.body.report;
    }

    test('a report sent again under the same seq is acknowledged like the first, and stored once', async () => {
      const { databaseId, agent, leaseId } = await agentOf('repeat');
      const first = await agent.report(tagged(leaseId, 0, 'first', { metrics: sampleMetrics({ avgQueryRuntimeMs: 0.5 }) }));
      assert.equal(first.status, 200, JSON.stringify(first.body));
      // The agent's answer was lost; it sends the same report again (the same seq).
      const again = await agent.report(tagged(leaseId, 0, 'again', { metrics: sampleMetrics({ avgQueryRuntimeMs: 9 }) }));
      assert.equal(again.status, 200, JSON.stringify(again.body));
      const answer = ReportResponseSchema.parse(again.body);
      assert.ok(new Date(answer.leaseExpiresAt).getTime() > Date.now(), 'the lease is renewed by the repeat');
      assert.deepEqual(await stored(databaseId), { reports: 1, tags: ['first'] });
      assert.equal((await latest(databaseId)).seq, 0);

      // Two copies at once: one is stored.
      const copy = tagged(leaseId, 1, 'twice');
      const both = await Promise.all([agent.report(copy), agent.report(copy)]);
      assert.deepEqual(
        both.map((r) => r.status),
        [200, 200],
      );
      assert.deepEqual(await stored(databaseId), { reports: 2, tags: ['first', 'twice'] });
    });

    test('a report older than the lease’s last one is refused with report_out_of_order; nothing changes', async () => {
      const { databaseId, apiKey, agent, leaseId } = await agentOf('older');
      for (const seq of [0, 1, 2]) assert.equal((await agent.report(tagged(leaseId, seq, `r${seq}`))).status, 200);
      assertClientError(await agent.report(tagged(leaseId, 1, 'old')), 409, 'report_out_of_order', /body\.seq: report 1 .* after report 2/);
      assert.deepEqual(await stored(databaseId), { reports: 3, tags: ['r0', 'r1', 'r2'] });
      assert.equal((await agent.report(tagged(leaseId, 3, 'r3'))).status, 200);

      // The agent's client makes it a new start; a start (here, taking its own lease back) begins
      // a new sequence, and the report goes out under it.
      const client = createServiceClient({ serverUrl: service.url, apiKey, databaseId });
      await assert.rejects(client.report(tagged(leaseId, 1, 'stale')), LeaseExpiredError);
      const resumed = await client.start(startRequest({ resumeLeaseId: leaseId }));
      assert.equal(resumed.leaseId, leaseId);
      await client.report(tagged(leaseId, 0, 'after-start'));
      assert.deepEqual(await stored(databaseId), { reports: 5, tags: ['after-start', 'r0', 'r1', 'r2', 'r3'] });
    });

    test('sentAt is checked against the service’s clock, within the documented tolerance', async () => {
      const { databaseId, agent, leaseId } = await agentOf('clock');
      const now = Date.now();
      const at = (ms: number) => new Date(ms).toISOString();
      assertClientError(
        await agent.report(tagged(leaseId, 0, 'y9999', { sentAt: '9999-12-31T23:59:59Z' })),
        400,
        'bad_request',
        'body.sentAt',
      );
      assertClientError(
        await agent.report(tagged(leaseId, 0, 'ahead', { sentAt: at(now + REPORT_CLOCK_TOLERANCE.aheadSeconds * SECOND + 60 * SECOND) })),
        400,
        'bad_request',
        /body\.sentAt: .* ahead of the service's clock/,
      );
      assertClientError(
        await agent.report(tagged(leaseId, 0, 'y1999', { sentAt: '1999-01-01T00:00:00Z' })),
        400,
        'bad_request',
        /body\.sentAt: .* behind/,
      );
      assert.ok(REPORT_CLOCK_TOLERANCE.behindSeconds * SECOND > 4 * DAY, 'the queue’s longest age, 5 days, is within the tolerance');
      assert.equal((await agent.report(tagged(leaseId, 0, 'days-old', { sentAt: at(now - 4 * DAY) }))).status, 200);
      assert.equal((await agent.report(tagged(leaseId, 1, 'a-minute-ahead', { sentAt: at(now + 60 * SECOND) }))).status, 200);
      assert.deepEqual(await stored(databaseId), { reports: 2, tags: ['a-minute-ahead', 'days-old'] });
    });

    test('a live key of another database gets 404, as docs/protocol.md says, whether or not the id exists', async () => {
      const { agent, leaseId } = await agentOf('key-a');
      const other = await admin.createDatabase('key-b');
      const body = tagged(leaseId, 0, 'x');
      const forOther = await new AgentClient(service.url, other.databaseId, agent.apiKey).report(body);
      const forUnknown = await new AgentClient(service.url, randomUUID(), agent.apiKey).report(body);
      assertClientError(forOther, 404, 'not_found');
      assertClientError(forUnknown, 404, 'not_found');
      const auth = protocolDoc()
        .split('\n- **')
        .find((p) => p.startsWith('Authentication'))!;
      assert.match(auth.replace(/\s+/g, ' '), /a live key of another database gets 404 `not_found`/);
      assert.doesNotMatch(auth, /key of another database[^.]*401/);
    });

    test('"latest" is the report received last, not the one the agent dated last', async () => {
      const { databaseId, agent, leaseId } = await agentOf('latest');
      const now = Date.now();
      const ahead = new Date(now + 4 * 60 * SECOND).toISOString();
      assert.equal((await agent.report(tagged(leaseId, 0, 'ahead', { sentAt: ahead }))).status, 200);
      assert.equal((await agent.report(tagged(leaseId, 1, 'behind', { sentAt: new Date(now - DAY).toISOString() }))).status, 200);
      assert.equal((await latest(databaseId)).seq, 1);
      // A report dated 9999 is refused, so it cannot become the latest either.
      assert.equal((await agent.report(tagged(leaseId, 2, 'y9999', { sentAt: '9999-01-01T00:00:00Z' }))).status, 400);
      assert.equal((await latest(databaseId)).seq, 1);
    });
  });
}

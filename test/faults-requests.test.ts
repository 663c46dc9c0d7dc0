// Bad requests to the real service, each refused with the protocol's error body and a message
// that names the field: text PostgreSQL cannot store (NUL, a lone surrogate) wherever it comes
// from, a username that is taken, and a client too slow to send its request.
import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, test } from 'node:test';
import { ErrorResponseSchema } from '../src/protocol/v1.ts';
import { reportRequest, startRequest } from './helpers/service-reports.ts';
import { AgentClient, STORAGE_KINDS, assertClientError } from './helpers/service.ts';
import { startAdminService, type AdminService } from './helpers/service-admin.ts';

const running: AdminService[] = [];

before(async () => {
  for (const kind of STORAGE_KINDS) running.push(await startAdminService(kind));
});

after(async () => {
  for (const lab of running) await lab.close();
});

for (const [i, kind] of STORAGE_KINDS.entries()) {
  test(`text that cannot be stored is refused naming the field (${kind} storage)`, async () => {
    const { service, admin: person } = running[i]!;
    assertClientError(
      await person.post('/api/manage/databases', { name: 'nul\u0000name', target: 'local' }),
      400,
      'bad_request',
      'body.name',
    );
    assertClientError(
      await person.post('/api/manage/databases', { name: 'lone \ud800 surrogate', target: 'local' }),
      400,
      'bad_request',
      'body.name',
    );
    const { databaseId, apiKey } = await person.createDatabase('storable');
    assertClientError(
      await person.post(`/api/manage/databases/${databaseId}/commands`, { kind: 'apply', values: { work_mem: '64MB\u0000' } }),
      400,
      'bad_request',
      'body.values.work_mem',
    );
    assertClientError(
      await person.post(`/api/manage/databases/${databaseId}/keys`, { label: 'key \udc00' }),
      400,
      'bad_request',
      'body.label',
    );

    const agent = new AgentClient(service.url, databaseId, apiKey);
    const lease = (await agent.start<{ leaseId: string }>(startRequest())).body.leaseId;
    const event = { at: new Date().toISOString(), level: 'info' as const, code: 'x', message: 'ok' };
    assertClientError(
      await agent.report(reportRequest(lease, 0, { events: [event, { ...event, message: 'a lone \ud800 surrogate' }] })),
      400,
      'bad_request',
      'body.events[1].message',
    );
    assertClientError(
      await agent.report(reportRequest(lease, 0, { events: [{ ...event, code: '\udfff' }] })),
      400,
      'bad_request',
      'body.events[0].code',
    );
    assert.equal((await agent.report(reportRequest(lease, 0, { events: [{ ...event, message: 'a pair 😀 is fine' }] }))).status, 200);
  });

  test(`a username that is taken is a conflict, not a bad request (${kind} storage)`, async () => {
    const { admin: person } = running[i]!;
    assert.equal((await person.post('/api/manage/users', { username: `dup-${kind}` })).status, 201);
    assertClientError(await person.post('/api/manage/users', { username: `dup-${kind}` }), 409, 'conflict', `dup-${kind}`);
  });
}

test(
  'a client too slow to send its request gets a 408 in the protocol error body, at the request timeout',
  { timeout: 60_000 },
  async () => {
    const lab = await startAdminService('pglite', { start: { requestTimeoutMs: 2_000 } });
    running.push(lab);
    const { service } = lab;
    const { hostname, port } = new URL(service.url);
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = connect(Number(port), hostname);
      let text = '';
      socket.on('data', (d) => (text += d.toString()));
      socket.on('close', () => resolve(text));
      socket.on('error', reject);
      // Headers, then a tenth of the announced body, then nothing.
      socket.write(
        'POST /api/manage/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"username"',
      );
      // Well past the 2 s timeout; far less than Node's default 30 s check of connections.
      setTimeout(() => reject(new Error(`no answer within 15 s; got so far: ${JSON.stringify(text)}`)), 15_000).unref();
    });
    assert.match(answer, /^HTTP\/1\.1 408 /);
    const body = ErrorResponseSchema.safeParse(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)));
    assert.ok(body.success, `an error body of the protocol: ${answer}`);
    assert.match(body.data.error.message, /2 s/);
  },
);

// What nobody outside can do to the service (issue #29): make it work hard before it knows who is
// asking (deep or wide JSON, text it cannot store deep inside), lock a user out of logging in,
// flush the login throttle, or put an address of their choosing into the installer.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { MAX_BODY_BYTES } from '../src/protocol/v1.ts';
import { MAX_JSON_DEPTH, MAX_JSON_ELEMENTS, jsonShapeProblem } from '../src/service/http/body.ts';
import { LOGIN_BODY_BYTES } from '../src/service/http/login.ts';
import { findUnstorable } from '../src/service/http/storable.ts';
import { reportRequest, sampleMetrics, sampleTargetMetrics, SAMPLE_SETTINGS } from './helpers/service-reports.ts';
import {
  ADMIN_PASSWORD,
  AgentClient,
  PersonClient,
  assertClientError,
  createServiceStore,
  startTestService,
  type ServiceStore,
  type TestService,
} from './helpers/service.ts';

const running: Array<{ service: TestService; store: ServiceStore }> = [];

after(async () => {
  for (const { service, store } of running) {
    await service.close();
    await store.dispose();
  }
});

async function service(env: Record<string, string> = {}): Promise<TestService> {
  const store = await createServiceStore('pglite');
  const started = await startTestService(store, env);
  running.push({ service: started, store });
  return started;
}

const nested = (depth: number, inner: string) => `${'['.repeat(depth)}${inner}${']'.repeat(depth)}`;

async function postJson(url: string, body: string, headers: Record<string, string> = {}) {
  const response = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
  const text = await response.text();
  return { status: response.status, body: JSON.parse(text) as unknown, headers: response.headers };
}

// --- Bounded work before authentication -------------------------------------------------------

test('the JSON check refuses at the depth limit having read no further than it', () => {
  // The finding's body: 808 KB nested 4,000 deep; here a whole MAX_BODY_BYTES of brackets.
  const deep = '['.repeat(MAX_BODY_BYTES);
  const problem = jsonShapeProblem(deep);
  assert.ok(problem, 'refused');
  assert.equal(problem.code, 'bad_request');
  assert.match(problem.message, new RegExp(`deeper than ${MAX_JSON_DEPTH} levels`));
  assert.equal(problem.read, MAX_JSON_DEPTH + 1, 'stopped at the first bracket past the limit');
  // Brackets inside strings are text, not nesting.
  assert.equal(jsonShapeProblem(JSON.stringify({ text: '['.repeat(10_000), escaped: '\\"[[[[' })), null);
  assert.equal(jsonShapeProblem(nested(MAX_JSON_DEPTH, '"x"')), null, 'exactly the limit is fine');
});

test('the JSON check refuses past the element limit, and every real body is far below both limits', () => {
  const wide = `[${'0,'.repeat(MAX_JSON_ELEMENTS + 10)}0]`;
  const problem = jsonShapeProblem(wide);
  assert.ok(problem, 'refused');
  assert.equal(problem.code, 'payload_too_large');
  assert.ok(problem.read < MAX_JSON_ELEMENTS * 2 + 2, `stopped at the limit: read ${problem.read} of ${wide.length} characters`);
  // The largest report the protocol allows: 500 statements, 200 settings, metrics and events.
  const at = new Date().toISOString();
  const largest = {
    ...reportRequest('00000000-0000-4000-8000-000000000000', 1, {
      metrics: sampleMetrics({ topStatements: 500 }),
      events: Array.from({ length: 100 }, (_, i) => ({ at, level: 'info' as const, code: 'x', message: `event ${i}` })),
    }),
    settings: Array.from({ length: 200 }, (_, i) => ({ ...SAMPLE_SETTINGS[i % SAMPLE_SETTINGS.length]! })),
    targetMetrics: Array.from({ length: 200 }, () => sampleTargetMetrics()[0]!),
  };
  assert.equal(jsonShapeProblem(JSON.stringify(largest), { depth: 8, elements: MAX_JSON_ELEMENTS / 4 }), null);
});

test('the stored-text check walks a deep body once and names the first offender', () => {
  // Before: a recursive walk copying the path at every level overflowed the stack here (a 500).
  const value = JSON.parse(`{"a":[1,"ok",{"b":${nested(4000, '"\\u0000"')}}]}`) as unknown;
  const found = findUnstorable(value);
  assert.ok(found);
  assert.match(found.problem, /NUL/);
  assert.deepEqual(found.path.slice(0, 4), ['a', 2, 'b', 0]);
  assert.equal(found.path.length, 3 + 4000);
  assert.deepEqual(findUnstorable({ ok: ['fine', { 'bad\ud800key': 1 }] })?.path, ['ok', 1, 'bad\ud800key']);
  assert.equal(findUnstorable({ ok: ['a pair 😀 is fine'] }), null);
});

test('deep or large bodies before logging in are refused at once, with a 4xx, never a 500', { timeout: 120_000 }, async () => {
  const { url } = await service();
  const login = `${url}/api/manage/login`;
  // The finding: 808 KB nested 4,000 deep, the innermost a NUL; a 500 before.
  const finding = `{"username":${nested(4000, `"${'x'.repeat(800_000)}\\u0000"`)},"password":"x"}`;
  assertClientError(await postJson(login, finding), 413, 'payload_too_large');
  // Under the login's own limit, still too deep for any body.
  assert.ok(LOGIN_BODY_BYTES > 2 * 1000 + 40);
  assertClientError(await postJson(login, `{"username":${nested(1000, '"\\u0000"')},"password":"x"}`), 400, 'bad_request', /deeper than/);
  // Within the depth limit, the schema refuses before anything else looks inside.
  assertClientError(await postJson(login, `{"username":${nested(20, '"\\u0000"')},"password":"x"}`), 400, 'bad_request', 'body.username');
  // A NUL where the schema wants text: a 400 naming the field.
  assertClientError(await postJson(login, JSON.stringify({ username: 'ad\u0000min', password: 'x' })), 400, 'bad_request', 'body.username');
  // Without a session, the rest of the people's API does not read the body at all.
  assertClientError(await postJson(`${url}/api/manage/databases`, nested(MAX_BODY_BYTES / 2 - 10, '0')), 401, 'unauthorized');
  assert.equal((await fetch(`${url}/healthz`)).status, 200);
});

test('authenticated bodies too deep are refused before they are parsed; a NUL deep inside is a 400', { timeout: 120_000 }, async () => {
  const { url } = await service();
  const person = await PersonClient.login(url, 'admin', ADMIN_PASSWORD);
  const { databaseId, apiKey } = await person.createDatabase('deep');
  const agent = new AgentClient(url, databaseId, apiKey);
  assertClientError(await agent.start(JSON.parse(nested(MAX_JSON_DEPTH + 1, '1'))), 400, 'bad_request', /deeper than/);
  const headers = { cookie: person.cookie, 'x-csrf-token': person.csrfToken };
  assertClientError(
    await postJson(`${url}/api/manage/databases`, `{"name":"deep","target":"local","extra":${nested(30, '"\\u0000"')}}`, headers),
    400,
    'bad_request',
    'body',
  );
  assertClientError(
    await postJson(
      `${url}/api/manage/databases/${databaseId}/commands`,
      JSON.stringify({ kind: 'apply', values: { work_mem: '64MB\u0000' } }),
      headers,
    ),
    400,
    'bad_request',
    'body.values.work_mem',
  );
});

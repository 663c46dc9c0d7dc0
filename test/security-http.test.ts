// What nobody outside can do to the service (issue #29): make it work hard before it knows who is
// asking (deep or wide JSON, text it cannot store deep inside), lock a user out of logging in,
// flush the login throttle, or put an address of their choosing into the installer.
import assert from 'node:assert/strict';
import { get as httpGet } from 'node:http';
import { connect } from 'node:net';
import { after, test } from 'node:test';
import { MAX_BODY_BYTES, MAX_JSON_DEPTH, MAX_JSON_ELEMENTS, routes } from '../src/protocol/v1.ts';
import { jsonShapeProblem } from '../src/service/http/body.ts';
import { DEVICE_COOKIE, LOGIN_BODY_BYTES } from '../src/service/http/login.ts';
import { CSRF_FIELD } from '../src/service/http/login-sessions.ts';
import { FORM_BODY_BYTES } from '../src/service/http/pages.ts';
import { findUnstorable } from '../src/service/http/storable.ts';
import { deviceOf, issueDeviceToken } from '../src/service/people/devices.ts';
import { LoginThrottle } from '../src/service/people/throttle.ts';
import { reportRequest, sampleMetrics, sampleTargetMetrics, SAMPLE_SETTINGS } from './helpers/service-reports.ts';
import { ADMIN_PASSWORD, AgentClient, PersonClient, assertClientError, openTestStorage } from './helpers/service.ts';
import { serviceStarter } from './helpers/service-admin.ts';

const service = serviceStarter();

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
  // Nor does the agent API without its key.
  const agentPath = routes.report('00000000-0000-4000-8000-000000000000');
  assertClientError(await postJson(`${url}${agentPath}`, nested(MAX_BODY_BYTES / 2 - 10, '0')), 401, 'unauthorized');
  assert.equal((await fetch(`${url}/healthz`)).status, 200);
});

/** Sends a POST's headers and `sent` of the `length` bytes they announce, never the rest, and
 * returns the answer's head: an answer that comes was given before the body was read. */
async function answerBeforeBody(url: string, path: string, headers: Record<string, string>, length: number, sent: string): Promise<string> {
  const { hostname, port } = new URL(url);
  const socket = connect(Number(port), hostname);
  try {
    return await new Promise<string>((resolve, reject) => {
      let text = '';
      socket.on('data', (d: Buffer) => {
        text += d.toString('latin1');
        if (text.includes('\r\n\r\n')) resolve(text.slice(0, text.indexOf('\r\n\r\n')));
      });
      socket.on('error', reject);
      socket.on('close', () => reject(new Error(`closed without an answer: ${JSON.stringify(text)}`)));
      const head = Object.entries({ host: hostname, ...headers, 'content-length': String(length) }).map(([k, v]) => `${k}: ${v}\r\n`);
      socket.write(`POST ${path} HTTP/1.1\r\n${head.join('')}\r\n${sent}`);
      // Far less than the request timeout (30 s), far more than any answer takes.
      setTimeout(() => reject(new Error(`no answer within 10 s while the body was incomplete`)), 10_000).unref();
    });
  } finally {
    socket.destroy();
  }
}

test('pages: an unauthenticated POST is answered before its body is read, whatever its type', { timeout: 120_000 }, async () => {
  const { url } = await service();
  // The finding: 1 MiB of brackets to POST /databases was parsed (no depth limit), then answered 303.
  const deep = nested(MAX_BODY_BYTES / 2 - 10, '0');
  for (const type of ['application/json', 'application/x-www-form-urlencoded', 'text/plain']) {
    const head = await answerBeforeBody(url, '/databases', { 'content-type': type }, Buffer.byteLength(deep), deep.slice(0, 64 * 1024));
    assert.match(head, /^HTTP\/1\.1 303 /, `${type}: ${head}`);
    assert.match(head, /\r\nlocation: \/login(\r\n|$)/i, head);
  }
  // Sent whole, twenty at a time: each is refused, and the service answers at once after.
  const whole = await Promise.all(
    Array.from({ length: 20 }, () =>
      fetch(`${url}/databases`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: deep, redirect: 'manual' }),
    ),
  );
  assert.deepEqual([...new Set(whole.map((r) => r.status))], [303]);
  assert.equal((await fetch(`${url}/healthz`)).status, 200);
});

test('pages: a logged-in POST takes forms only, at most FORM_BODY_BYTES', { timeout: 120_000 }, async () => {
  const { url } = await service();
  const person = await PersonClient.login(url, 'admin', ADMIN_PASSWORD);
  assert.equal((await fetch(`${url}/databases`, { headers: { cookie: person.cookie }, redirect: 'manual' })).status, 200);
  const post = (type: string, body: string) =>
    fetch(`${url}/databases`, { method: 'POST', headers: { cookie: person.cookie, 'content-type': type }, body, redirect: 'manual' });
  // JSON is no page's body: refused by type, before any parser looks at it.
  assert.equal((await post('application/json', nested(MAX_JSON_DEPTH + 1, '0'))).status, 415);
  assert.equal((await post('text/plain', 'name=x')).status, 415);
  assert.equal((await post('application/x-www-form-urlencoded', `name=${'x'.repeat(FORM_BODY_BYTES)}`)).status, 413);
  // A form within the limit reaches the CSRF check (this one has no token), then the stored-text check.
  assert.equal((await post('application/x-www-form-urlencoded', 'name=x')).status, 403);
  const nul = await post('application/x-www-form-urlencoded', `name=a%00b&${CSRF_FIELD}=${encodeURIComponent(person.csrfToken)}`);
  assert.equal(nul.status, 400);
  assert.match(await nul.text(), /form\.name/);
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

// --- A throttle that slows guessing without locking anyone out --------------------------------

const attempt = (address: string, username = 'admin', device: string | null = null) => ({ address, username, device });

/** A throttle on a storage of its own (the counts are rows: people/throttle.ts). */
async function storedThrottle(): Promise<LoginThrottle> {
  const { storage, dispose } = await openTestStorage('pglite');
  after(dispose);
  return new LoginThrottle(storage);
}

test('guesses from two addresses do not lock out a device that logged in before; new devices wait', async () => {
  const throttle = await storedThrottle();
  const now = Date.now();
  // The finding: five wrong passwords from one address, five from another.
  for (let i = 0; i < 5; i++) await throttle.fail(attempt('203.0.113.1'), now);
  for (let i = 0; i < 5; i++) await throttle.fail(attempt('203.0.113.2'), now);
  assert.ok(
    (await throttle.retryAfterSeconds(attempt('198.51.100.30'), now)) > 0,
    'a new device anywhere waits: the username count is full',
  );
  assert.equal(await throttle.retryAfterSeconds(attempt('198.51.100.30', 'admin', 'owner-laptop'), now), 0, 'the owner device may try');
  assert.equal(await throttle.retryAfterSeconds(attempt('198.51.100.30', 'alice'), now), 0, 'another username may');
  // The device's own failures count: past five, it is a new device again.
  for (let i = 0; i < 5; i++) await throttle.fail(attempt(`198.51.100.${40 + i}`, 'admin', 'owner-laptop'), now);
  assert.ok((await throttle.retryAfterSeconds(attempt('198.51.100.30', 'admin', 'owner-laptop'), now)) > 0, 'a device that failed 5 times');
  // Its own address holds back even a known device (5 for the pair, 20 for the address).
  for (let i = 0; i < 5; i++) await throttle.fail(attempt('192.0.2.9', 'bob', 'bob-phone'), now);
  assert.ok((await throttle.retryAfterSeconds(attempt('192.0.2.9', 'bob', 'bob-phone'), now)) > 0);
  // The right password forgets the pair's and the device's failures, not the username's.
  await throttle.succeed(attempt('192.0.2.9', 'bob', 'bob-phone'));
  assert.equal(await throttle.retryAfterSeconds(attempt('192.0.2.9', 'bob', 'bob-phone'), now), 0);
  assert.ok((await throttle.retryAfterSeconds(attempt('198.51.100.30'), now)) > 0, 'the username count stays');
});

test('a flood of failures from many addresses does not free a blocked count; counts end with their window', async () => {
  const throttle = await storedThrottle();
  const now = Date.now();
  for (let i = 0; i < 5; i++) await throttle.fail(attempt('203.0.113.7'), now);
  for (let i = 0; i < 20; i++) await throttle.fail(attempt('203.0.113.8', `user${i}`), now);
  // A thousand failures from new addresses for new usernames: nothing is evicted to make room.
  for (let i = 0; i < 1000; i++) await throttle.fail(attempt(`10.0.${i >> 8}.${i & 255}`, `spray${i}`), now);
  assert.ok((await throttle.retryAfterSeconds(attempt('203.0.113.7'), now)) > 0, 'the blocked pair is still blocked');
  assert.ok((await throttle.retryAfterSeconds(attempt('203.0.113.8', 'anyone'), now)) > 0, 'the blocked address is still blocked');
  assert.equal(
    await throttle.retryAfterSeconds(attempt('192.0.2.1', 'admin', 'owner-laptop'), now),
    0,
    'the owner device during the flood',
  );
  const later = now + LoginThrottle.WINDOW_MS + 1000;
  assert.equal(await throttle.retryAfterSeconds(attempt('203.0.113.7'), later), 0, 'the window passes');
  // A failure after the window starts a new count at 1, not at 6.
  for (let i = 0; i < 4; i++) await throttle.fail(attempt('203.0.113.7'), later);
  assert.equal(await throttle.retryAfterSeconds(attempt('203.0.113.7'), later), 0, '4 failures in the new window');
  await throttle.fail(attempt('203.0.113.7'), later);
  assert.ok((await throttle.retryAfterSeconds(attempt('203.0.113.7'), later)) > 0, 'the 5th of the new window');
});

test('a device token counts only for its user, unforged, until the password changes', () => {
  const userId = '3f0c2b1e-9d8a-4c7b-8e6f-5a4b3c2d1e0f';
  const token = issueDeviceToken(userId, 'scrypt$16384$8$1$salt$hash');
  const device = deviceOf(token, userId, 'scrypt$16384$8$1$salt$hash');
  assert.match(device ?? '', /^[A-Za-z0-9_-]{22}$/);
  assert.equal(deviceOf(token, '00000000-0000-4000-8000-000000000000', 'scrypt$16384$8$1$salt$hash'), null, 'another user');
  assert.equal(deviceOf(token, userId, 'scrypt$16384$8$1$salt$new-hash'), null, 'a new password');
  const [id, dev, sig] = token.split('.');
  assert.equal(deviceOf(`${id}.${dev}.${sig!.slice(0, -2)}AA`, userId, 'scrypt$16384$8$1$salt$hash'), null, 'forged');
  // Another spelling of the same signature bytes (the last character's 2 unused bits set) is not the token issued.
  const BASE64URL = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';
  const respelled = `${sig!.slice(0, -1)}${BASE64URL[BASE64URL.indexOf(sig!.at(-1)!) + 1]}`;
  assert.deepEqual(Buffer.from(respelled, 'base64url'), Buffer.from(sig!, 'base64url'), 'the same bytes');
  assert.equal(deviceOf(`${id}.${dev}.${respelled}`, userId, 'scrypt$16384$8$1$salt$hash'), null, 'respelled');
  assert.equal(deviceOf(undefined, userId, 'x'), null);
  assert.equal(deviceOf('garbage', userId, 'x'), null);
});

test(
  'over HTTP: attackers at two addresses cannot lock the owner out of a device that logged in before',
  { timeout: 120_000 },
  async () => {
    const { url } = await service({ TUNER_TRUST_PROXY: 'true' });
    const login = async (from: string, password: string, cookie?: string) => {
      const response = await fetch(`${url}/api/manage/login`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'x-forwarded-for': from, ...(cookie && { cookie }) },
        body: JSON.stringify({ username: 'admin', password }),
      });
      await response.arrayBuffer();
      return response;
    };
    const first = await login('198.51.100.20', ADMIN_PASSWORD);
    assert.equal(first.status, 200);
    const device = first.headers.getSetCookie().find((c) => c.startsWith(`${DEVICE_COOKIE}=`));
    assert.ok(device, 'a device cookie on login');
    assert.match(device, /HttpOnly/i);
    assert.match(device, /SameSite=Strict/i);
    // Five wrong passwords from one address, five from another.
    for (const from of ['203.0.113.1', '203.0.113.2'])
      for (let i = 0; i < 5; i++) assert.equal((await login(from, `guess-${i}`)).status, 401);
    // Before: the right password from a third address was refused for 15 minutes (429, retry-after 899).
    const ownerDevice = await login('198.51.100.30', ADMIN_PASSWORD, device.split(';')[0]);
    assert.equal(ownerDevice.status, 200, 'the owner, on the device that logged in before, from a new address');
    // Anyone else guessing for the username now waits, whatever the address.
    const newDevice = await login('198.51.100.31', ADMIN_PASSWORD);
    assert.equal(newDevice.status, 429, 'a new device waits');
    assert.ok(Number(newDevice.headers.get('retry-after')) > 0);
    assert.equal((await login('203.0.113.3', 'guess-x')).status, 429, 'a third attacker address waits too');
    // A forged device cookie is a new device: its signature's last character changed (to 'A' it
    // was the same cookie once in 16 runs, since the signature ends in 'A' as often; and 'B', 'C'
    // and 'D' decoded to the same bytes as 'A' before the service compared the text it issued).
    const token = device.split(';')[0]!.split('=')[1]!;
    const forged = `${token.slice(0, -1)}${token.endsWith('A') ? 'B' : 'A'}`;
    assert.notEqual(forged, token);
    assert.equal((await login('198.51.100.32', ADMIN_PASSWORD, `${DEVICE_COOKIE}=${forged}`)).status, 429);
  },
);

// --- The installer and the setup page name the service by its configuration only ---------------

/** GET with a Host header of the client's choosing (fetch does not let one set it). */
function getWithHost(url: string, host: string, cookie = ''): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const request = httpGet(url, { headers: { host, ...(cookie && { cookie }) } }, (response) => {
      let text = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (text += chunk));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, text }));
    });
    request.on('error', reject);
  });
}

test(
  'without --public-url, /install.sh and the setup page name the listen address, never the Host header',
  { timeout: 120_000 },
  async () => {
    const { url } = await service();
    const install = await getWithHost(`${url}/install.sh`, 'evil.example.com');
    assert.equal(install.status, 200);
    assert.ok(!install.text.includes('evil.example.com'), 'the Host header is not in the script');
    // Before: SERVICE_URL='http://evil.example.com'.
    assert.match(install.text, new RegExp(`^SERVICE_URL='${url.replace(/\./g, '\\.')}'$`, 'm'));
    assert.match(install.text, /^# this is the address the tuning service listens on, as --public-url .* is not set/m);

    const person = await PersonClient.login(url, 'admin', ADMIN_PASSWORD);
    const { databaseId } = await person.createDatabase('host-header');
    const setup = await getWithHost(`${url}/databases/${databaseId}/setup`, 'evil.example.com', person.cookie);
    assert.equal(setup.status, 200);
    assert.ok(!setup.text.includes('evil.example.com'), 'the Host header is not on the page');
    assert.ok(setup.text.includes(url), 'agent.yaml names the listen address');
    assert.match(setup.text, /id="server-url-note"/);
  },
);

test('with --public-url, /install.sh and the setup page name it, whatever the Host header', { timeout: 120_000 }, async () => {
  const { url } = await service({ TUNER_PUBLIC_URL: 'https://tuner.example.com' });
  const install = await getWithHost(`${url}/install.sh`, 'evil.example.com');
  assert.match(install.text, /^SERVICE_URL='https:\/\/tuner\.example\.com'$/m);
  assert.ok(!install.text.includes('listens on'), 'no note');
  const person = await PersonClient.login(url, 'admin', ADMIN_PASSWORD);
  const { databaseId } = await person.createDatabase('public-url');
  const setup = await getWithHost(`${url}/databases/${databaseId}/setup`, 'evil.example.com', person.cookie);
  assert.ok(!setup.text.includes('evil.example.com'));
  assert.ok(setup.text.includes('https://tuner.example.com'));
  assert.ok(!setup.text.includes('server-url-note'));
});

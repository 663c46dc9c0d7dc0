// Password guessing against the real service: spraying one password over many usernames from
// one address, and rotating a forged X-Forwarded-For behind a proxy, are both throttled, with
// 429 and Retry-After; and a flood of other addresses cannot push a blocked one out of memory
// (test/security-http.test.ts: nobody can lock a user out).
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { ConfigError, parseServiceArgs } from '../src/service/app/config.ts';
import { LoginThrottle } from '../src/service/people/throttle.ts';
import { ADMIN_PASSWORD, openTestStorage } from './helpers/service.ts';
import { serviceStarter } from './helpers/service-admin.ts';

const service = serviceStarter();

async function login(base: string, username: string, password: string, headers: Record<string, string> = {}): Promise<Response> {
  const response = await fetch(`${base}/api/manage/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...headers },
    body: JSON.stringify({ username, password }),
  });
  await response.arrayBuffer();
  return response;
}

function assertThrottled(response: Response, what: string): void {
  assert.equal(response.status, 429, what);
  const retryAfter = Number(response.headers.get('retry-after'));
  assert.ok(
    Number.isInteger(retryAfter) && retryAfter > 0 && retryAfter <= 15 * 60,
    `${what}: Retry-After ${response.headers.get('retry-after')}`,
  );
}

test('a password sprayed over many usernames from one address is throttled', { timeout: 120_000 }, async () => {
  const { url } = await service();
  const statuses: number[] = [];
  let throttled: Response | undefined;
  for (let i = 0; i < 40 && !throttled; i++) {
    const response = await login(url, `user${i}`, 'Winter2026!');
    statuses.push(response.status);
    if (response.status === 429) throttled = response;
  }
  assert.ok(throttled, `40 usernames from one address, never throttled: ${statuses.join(' ')}`);
  assertThrottled(throttled, 'the spray');
  assert.ok(statuses.length > 5, 'a few failures are allowed before the throttle');
  // The address is throttled whatever the username, the right password included.
  assertThrottled(await login(url, 'admin', ADMIN_PASSWORD), 'the spraying address');
});

test('behind a proxy, a forged X-Forwarded-For rotated on every attempt does not escape the throttle', { timeout: 120_000 }, async () => {
  const { url } = await service({ TUNER_TRUST_PROXY: 'true' });
  // The proxy appends the address it saw (the attacker's); the attacker controls what comes before.
  const attacker = '203.0.113.7';
  const statuses: number[] = [];
  let throttled: Response | undefined;
  for (let i = 0; i < 20 && !throttled; i++) {
    const response = await login(url, 'admin', `guess-${i}-password`, { 'x-forwarded-for': `10.0.${i}.1, ${attacker}` });
    statuses.push(response.status);
    if (response.status === 429) throttled = response;
  }
  assert.ok(throttled, `20 guesses with a rotated X-Forwarded-For, never throttled: ${statuses.join(' ')}`);
  assertThrottled(throttled, 'the rotation');
  assert.equal(statuses.length, 6, `throttled after 5 failures for the username from that address: ${statuses.join(' ')}`);
  // Another client of the same proxy is not blocked by the attacker's failures for that username…
  assert.equal((await login(url, 'admin', ADMIN_PASSWORD, { 'x-forwarded-for': '198.51.100.20' })).status, 200);
});

test('guesses for one username from ever new addresses are throttled too', { timeout: 120_000 }, async () => {
  const { url } = await service({ TUNER_TRUST_PROXY: 'true' });
  const statuses: number[] = [];
  let throttled: Response | undefined;
  for (let i = 0; i < 40 && !throttled; i++) {
    const response = await login(url, 'admin', `guess-${i}-password`, { 'x-forwarded-for': `198.51.${i}.9` });
    statuses.push(response.status);
    if (response.status === 429) throttled = response;
  }
  assert.ok(throttled, `40 guesses for admin from 40 addresses, never throttled: ${statuses.join(' ')}`);
  assertThrottled(throttled, 'the distributed guessing');
});

test('the throttle forgets nothing before its window ends: a flood of new entries does not unblock anyone', async () => {
  const { storage, dispose } = await openTestStorage('pglite');
  after(dispose);
  const throttle = new LoginThrottle(storage);
  const now = Date.now();
  const fail = (address: string, username: string) => throttle.fail({ address, username, device: null }, now);
  for (let i = 0; i < 5; i++) await fail('203.0.113.7', 'admin');
  const blocked = { address: '203.0.113.7', username: 'admin', device: null };
  assert.ok((await throttle.retryAfterSeconds(blocked, now)) > 0, 'blocked');
  for (let i = 0; i < 1000; i++) await fail(`198.51.${i % 250}.${i % 100}`, `other${i}`);
  assert.ok((await throttle.retryAfterSeconds(blocked, now)) > 0, 'still blocked after 1,000 more entries');
  assert.equal(await throttle.retryAfterSeconds(blocked, now + 16 * 60_000), 0, 'the window passes');
  // Prune removes only counts whose window has ended (by the storage's clock: these began now).
  await storage.prune({ maxAgeDays: 30, maxReportsPerDatabase: 1000, maxEventsPerDatabase: 1000, auditMaxAgeDays: 30 });
  assert.ok((await throttle.retryAfterSeconds(blocked, now)) > 0, 'still blocked after prune');
});

test('TUNER_TRUST_PROXY trusts only the proxies it names: none, the nearest N, or their addresses', () => {
  const trust = (value: string) => {
    const request = parseServiceArgs([], { TUNER_TRUST_PROXY: value });
    assert.equal(request.kind, 'run');
    return request.kind === 'run' ? request.config.trustProxy : undefined;
  };
  assert.equal(trust('false'), false);
  assert.equal(trust('true'), 1);
  assert.equal(trust('2'), 2);
  assert.deepEqual(trust('10.0.0.5, 10.1.0.0/16, fd00::/8'), ['10.0.0.5', '10.1.0.0/16', 'fd00::/8']);
  for (const bad of ['maybe', '10.0.0.0/33', '99']) {
    assert.throws(
      () => parseServiceArgs([], { TUNER_TRUST_PROXY: bad }),
      (err: Error) => err instanceof ConfigError && /TUNER_TRUST_PROXY: expected false, true/.test(err.message),
      bad,
    );
  }
});

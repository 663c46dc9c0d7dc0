// Two replicas of the service on one PostgreSQL storage, behind a round-robin balancer: the login
// throttle's limits hold across them (an attacker gets the attempts of one replica, not of two),
// and a device that logged in through one replica is a known device on the other, until its own
// failures, counted on both, make it a new one (issue 45, item 1).
import assert from 'node:assert/strict';
import { createServer, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, test } from 'node:test';
import { DEVICE_COOKIE } from '../src/service/http/login.ts';
import { LoginThrottle } from '../src/service/people/throttle.ts';
import { openStorage } from '../src/service/storage/open.ts';
import { ADMIN_PASSWORD, createServiceStore, startTestService, type ServiceStore, type TestService } from './helpers/service.ts';

/** An HTTP balancer: each request to the next replica in turn (not each connection: fetch keeps
 * its connection open, so a TCP balancer would send every request to one replica). */
interface Balancer {
  url: string;
  /** How many requests each replica was sent. */
  served: number[];
  close(): Promise<void>;
}

async function startBalancer(upstreams: string[]): Promise<Balancer> {
  const served = upstreams.map(() => 0);
  let next = 0;
  const server: Server = createServer((incoming, outgoing) => {
    const i = next++ % upstreams.length;
    served[i]!++;
    const upstream = new URL(upstreams[i]!);
    const forwarded = httpRequest(
      { host: upstream.hostname, port: upstream.port, method: incoming.method, path: incoming.url, headers: incoming.headers },
      (answer) => {
        outgoing.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(outgoing);
      },
    );
    forwarded.on('error', () => outgoing.writeHead(502).end());
    incoming.pipe(forwarded);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    served,
    close: () => new Promise<void>((resolve) => (server.closeAllConnections(), server.close(() => resolve()))),
  };
}

/** Two replicas on a storage of their own (a scratch database of the shared server) and a balancer
 * in front of them; stopped and dropped after the test. */
async function startReplicas(): Promise<{ store: ServiceStore; replicas: [TestService, TestService]; balancer: Balancer }> {
  const store = await createServiceStore('postgres');
  const replicas: TestService[] = [];
  after(async () => {
    for (const replica of replicas) await replica.close();
    await store.dispose();
  });
  // One after the other: the first creates the admin, the second finds it.
  for (let i = 0; i < 2; i++) replicas.push(await startTestService(store, { TUNER_TRUST_PROXY: 'true' }));
  const balancer = await startBalancer(replicas.map((r) => r.url));
  after(() => balancer.close());
  return { store, replicas: replicas as [TestService, TestService], balancer };
}

/** A login through `base` from the address the balancer says the client has. */
async function login(base: string, from: string, password: string, cookie?: string): Promise<Response> {
  const response = await fetch(`${base}/api/manage/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', 'x-forwarded-for': from, ...(cookie && { cookie }) },
    body: JSON.stringify({ username: 'admin', password }),
  });
  await response.arrayBuffer();
  return response;
}

/** Wrong passwords through the balancer until one is refused by the throttle: how many were let through. */
async function guessesAllowed(balancer: Balancer, from: (i: number) => string, max: number): Promise<number> {
  for (let i = 0; i < max; i++) {
    const response = await login(balancer.url, from(i), `guess-${i}`);
    if (response.status === 429) return i;
    assert.equal(response.status, 401, `guess ${i}`);
  }
  return max;
}

test(
  'the attempts allowed across two replicas are those of one: per username and address, per username',
  { timeout: 120_000 },
  async () => {
    const { replicas, balancer } = await startReplicas();
    // 5 for the username from one address, whichever replica answers.
    assert.equal(await guessesAllowed(balancer, () => '203.0.113.5', 12), LoginThrottle.LIMITS.addressAndUsername);
    // The username's count (10 from devices it does not know) already holds 5; a new address each time.
    assert.equal(await guessesAllowed(balancer, (i) => `198.51.100.${100 + i}`, 12), LoginThrottle.LIMITS.username - 5);
    const sent = balancer.served;
    assert.ok(
      sent.every((n) => n >= 5),
      `both replicas answered: ${sent.join(' and ')} requests`,
    );
    // Anyone else now waits on either replica, the right password included.
    for (const replica of replicas) assert.equal((await login(replica.url, '192.0.2.77', ADMIN_PASSWORD)).status, 429);
  },
);

test(
  'a device that logged in through one replica is known on the other; its failures on both count together',
  { timeout: 120_000 },
  async () => {
    const { replicas } = await startReplicas();
    const [first, second] = replicas;
    const loggedIn = await login(first.url, '198.51.100.20', ADMIN_PASSWORD);
    assert.equal(loggedIn.status, 200);
    const device = loggedIn.headers
      .getSetCookie()
      .find((c) => c.startsWith(`${DEVICE_COOKIE}=`))
      ?.split(';')[0];
    assert.ok(device, 'a device cookie from the first replica');
    // Ten wrong passwords for the username from new devices, alternating between the replicas.
    for (let i = 0; i < LoginThrottle.LIMITS.username; i++)
      assert.equal((await login(replicas[i % 2]!.url, `203.0.113.${10 + i}`, `guess-${i}`)).status, 401);
    assert.equal((await login(second.url, '198.51.100.31', ADMIN_PASSWORD)).status, 429, 'a new device waits on the second');
    assert.equal((await login(second.url, '198.51.100.30', ADMIN_PASSWORD, device)).status, 200, 'the device is known on the second');
    // The device's own failures, on both replicas: past five, it is a new device on both.
    for (let i = 0; i < LoginThrottle.LIMITS.device; i++)
      assert.equal((await login(replicas[i % 2]!.url, `198.51.100.${40 + i}`, `guess-${i}`, device)).status, 401);
    for (const replica of replicas)
      assert.equal((await login(replica.url, '198.51.100.30', ADMIN_PASSWORD, device)).status, 429, 'a device that failed 5 times');
  },
);

test('guesses sent at once to both replicas take turns: no more get through than the limit', { timeout: 120_000 }, async () => {
  const { replicas } = await startReplicas();
  // 20 wrong passwords at the same moment, from one address, half to each replica: before
  // each was checked against the counts, then counted after its password hash, so all 20
  // passed the check before the first was counted.
  const statuses = await Promise.all(
    Array.from({ length: 20 }, (_, i) => login(replicas[i % 2]!.url, '203.0.113.99', `guess-${i}`).then((r) => r.status)),
  );
  assert.equal(statuses.filter((s) => s === 401).length, LoginThrottle.LIMITS.addressAndUsername, statuses.join(' '));
  assert.equal(statuses.filter((s) => s === 429).length, 20 - LoginThrottle.LIMITS.addressAndUsername, statuses.join(' '));
  // The right password is taken back from the counts it went to: the owner logs in from another
  // address, and the username's count (5 of 10) is where it was.
  assert.equal((await login(replicas[0].url, '198.51.100.7', ADMIN_PASSWORD)).status, 200);
  for (let i = 0; i < LoginThrottle.LIMITS.username - 5; i++)
    assert.equal((await login(replicas[i % 2]!.url, `198.51.100.${60 + i}`, `guess-${i}`)).status, 401, `guess ${i}`);
  assert.equal((await login(replicas[1].url, '198.51.100.80', ADMIN_PASSWORD)).status, 429, 'the username count is full');
});

test('two replicas counting failures of the same keys at once both count', { timeout: 60_000 }, async () => {
  const store = await createServiceStore('postgres');
  const [one, two] = await Promise.all(
    [0, 1].map(() => openStorage({ dataDir: store.dataDir, databaseUrl: store.databaseUrl, poolSize: 4 })),
  );
  after(async () => (await one!.close(), await two!.close(), await store.dispose()));
  const at = new Date();
  const keys = ['address 192.0.2.200', 'pair 192.0.2.200 carol', 'user carol'];
  // 40 failures at once, half through each replica's pool; the keys in both orders.
  await Promise.all(
    Array.from({ length: 40 }, (_, i) =>
      (i % 2 ? one! : two!).countLoginFailure(i % 4 < 2 ? keys : [...keys].reverse(), at, LoginThrottle.WINDOW_MS),
    ),
  );
  const counts = await one!.loginFailures(keys, at);
  assert.deepEqual(
    keys.map((k) => counts.get(k)?.failures),
    [40, 40, 40],
  );
});

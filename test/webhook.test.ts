// The webhook against a real receiver on loopback (node:http): the signature checked the way
// docs/notifications.md tells receivers to, retries after 500s then success, one delivery per
// event id however often it is emitted, 4xx other than 429 not retried, and the bounds: it gives
// up after them and says so. The secret never appears in a log line or an outcome.
import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { createServer } from 'node:http';
import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { test } from 'node:test';
import { WebhookConfigSchema, WebhookNotifier, type WebhookEvent, type WebhookLogEntry } from '../src/service/notify/webhook.ts';
import { signWebhook, verifyWebhookSignature } from '../src/service/notify/webhook-signature.ts';
import {
  receiverAccepts as accepts,
  URL_QUERY_SECRET,
  type Received,
  type Script,
  webhookReceiverForFile,
} from './helpers/webhook-receiver.ts';

const SECRET = 'whsec-for-tests-0123456789abcdef-XYZ';

const server = webhookReceiverForFile();

/** A path of the receiver's own for one test, answering its n-th request as `script` says. */
const receiver = (script: Script) => server.path(script);

function event(kind: WebhookEvent['kind'] = 'kept_gain_gone'): WebhookEvent {
  return {
    id: randomUUID(),
    kind,
    database: { id: randomUUID(), name: 'orders (production)' },
    at: new Date('2026-11-26T08:00:00Z'),
    details: { sessionId: randomUUID(), verifiedRuntimeRatio: 0.8, measuredRuntimeRatio: 0.99 },
  };
}

function notifier(url: string, extra: Partial<Parameters<typeof WebhookConfigSchema.parse>[0]> = {}) {
  const logs: WebhookLogEntry[] = [];
  const n = new WebhookNotifier(
    { url, secret: SECRET, initialBackoffMs: 20, maxBackoffMs: 200, attemptTimeoutMs: 2000, ...extra },
    { log: (e) => logs.push(e) },
  );
  return { n, logs };
}

const receiverAccepts = (r: Received, secret = SECRET) => accepts(r, secret);

function assertNoSecrets(logs: readonly WebhookLogEntry[], ...outcomes: unknown[]) {
  const text = JSON.stringify([logs, outcomes]);
  assert.ok(!text.includes(SECRET), 'the secret is never logged');
  assert.ok(!text.includes(URL_QUERY_SECRET), "the URL's query is never logged");
}

test('the body and its signature: the receiver checks it as documented', async () => {
  const r = receiver((_n, res) => res.writeHead(204).end());
  const { n, logs } = notifier(r.url);
  const e = event();
  const outcome = await n.notify(e);
  assert.deepEqual(outcome, { status: 'delivered', eventId: e.id, attempts: 1, httpStatus: 204 });
  const [got] = r.requests();
  assert.ok(got);
  assert.equal(got.headers['content-type'], 'application/json');
  assert.equal(got.headers['tuner-event-id'], e.id);
  assert.deepEqual(JSON.parse(got.body), {
    id: e.id,
    kind: 'kept_gain_gone',
    database: e.database,
    time: '2026-11-26T08:00:00.000Z',
    details: e.details,
  });
  assert.ok(receiverAccepts(got), 'the documented procedure accepts it');
  assert.equal(verifyWebhookSignature({ secret: SECRET, header: String(got.headers['tuner-signature']), body: got.body }).ok, true);
  // Anything else is refused: another secret, a body changed by one character, an old timestamp.
  assert.equal(receiverAccepts(got, `${SECRET}x`), false);
  assert.equal(receiverAccepts({ ...got, body: got.body.replace('production', 'productioN') }), false);
  const old = Math.floor(Date.now() / 1000) - 3600;
  assert.equal(receiverAccepts({ ...got, headers: { 'tuner-signature': signWebhook(SECRET, old, got.body) } }), false);
  assert.deepEqual(verifyWebhookSignature({ secret: SECRET, header: signWebhook(SECRET, old, got.body), body: got.body }), {
    ok: false,
    reason: 'the timestamp is too far from now',
  });
  assert.equal(verifyWebhookSignature({ secret: SECRET, header: 't=1,v1=zz', body: got.body }).ok, false);
  // The Node.js example in the documentation, run as it is written there.
  const doc = readFileSync(join(import.meta.dirname, '..', 'docs', 'notifications.md'), 'utf8');
  const example = /```js\n([\s\S]*?)```/.exec(doc)?.[1];
  assert.ok(example, 'docs/notifications.md has its example');
  const { verify } = (await import(`data:text/javascript,${encodeURIComponent(`${example}\nexport { verify };`)}`)) as {
    verify: (secret: string, header: string, body: string) => boolean;
  };
  assert.equal(verify(SECRET, String(got.headers['tuner-signature']), got.body), true);
  assert.equal(verify(SECRET, String(got.headers['tuner-signature']), `${got.body} `), false);
  assertNoSecrets(logs, outcome);
});

test('500, 500, then 200: retried with growing waits, the same event and body each time', async () => {
  const r = receiver((n, res) => res.writeHead(n <= 2 ? 500 : 200).end('ok'));
  const { n, logs } = notifier(r.url, { initialBackoffMs: 100, maxBackoffMs: 1000 });
  const e = event();
  const started = Date.now();
  const outcome = await n.notify(e);
  assert.deepEqual(outcome, { status: 'delivered', eventId: e.id, attempts: 3, httpStatus: 200 });
  const requests = r.requests();
  assert.equal(requests.length, 3);
  assert.ok(
    requests.every((q) => q.body === requests[0]!.body && q.headers['tuner-event-id'] === e.id && receiverAccepts(q)),
    'every attempt is the same event, signed',
  );
  // Waits: 50..100 ms before the 2nd, 100..200 ms before the 3rd (equal jitter).
  const waits = logs.filter((l) => l.retryInMs !== undefined).map((l) => l.retryInMs!);
  assert.equal(waits.length, 2);
  assert.ok(waits[0]! >= 50 && waits[0]! <= 100 && waits[1]! >= 100 && waits[1]! <= 200, `waits ${waits.join(', ')}`);
  assert.ok(Date.now() - started >= waits[0]! + waits[1]!);
  assert.deepEqual(
    logs.map((l) => [l.level, l.attempt, l.httpStatus]),
    [
      ['warn', 1, 500],
      ['warn', 2, 500],
      ['info', 3, 200],
    ],
  );
  assertNoSecrets(logs, outcome);
});

test('one delivery per event id, however often and however concurrently it is emitted', async () => {
  const r = receiver((n, res) => res.writeHead(n === 1 ? 503 : 200).end());
  const { n } = notifier(r.url);
  const e = event('workload_changed');
  const outcomes = await Promise.all([n.notify(e), n.notify({ ...e }), n.notify(e)]);
  const later = await n.notify({ ...e, details: { changed: true } });
  assert.equal(
    r.requests().filter((q) => q.headers['tuner-event-id'] === e.id).length,
    2,
    'one delivery: its first attempt failed, one retry',
  );
  for (const o of [...outcomes, later]) assert.deepEqual(o, { status: 'delivered', eventId: e.id, attempts: 2, httpStatus: 200 });
  const other = event('workload_changed');
  assert.equal((await n.notify(other)).status, 'delivered');
  assert.equal(r.requests().length, 3, 'another event id is another delivery');
});

test('gives up after maxAttempts on 5xx, and says so', async () => {
  const r = receiver((_n, res) => res.writeHead(503).end());
  const { n, logs } = notifier(r.url, { maxAttempts: 4 });
  const e = event();
  const outcome = await n.notify(e);
  assert.equal(outcome.status, 'failed');
  assert.ok(outcome.status === 'failed' && outcome.retryable && outcome.attempts === 4, JSON.stringify(outcome));
  assert.match(outcome.status === 'failed' ? outcome.reason : '', /^gave up after 4 attempts in \d+ s; the last: HTTP 503$/);
  assert.equal(r.requests().length, 4);
  assert.equal(logs.at(-1)?.level, 'warn');
  assert.match(logs.at(-1)!.message, /gave up/);
  assertNoSecrets(logs, outcome);
});

test('gives up when the next wait would pass maxTotalSeconds, before maxAttempts', async () => {
  const r = receiver((_n, res) => res.writeHead(500).end());
  const { n } = notifier(r.url, { maxAttempts: 20, maxTotalSeconds: 1, initialBackoffMs: 400, maxBackoffMs: 5000 });
  const outcome = await n.notify(event());
  assert.ok(outcome.status === 'failed' && outcome.retryable, JSON.stringify(outcome));
  assert.ok(outcome.attempts >= 2 && outcome.attempts < 20, `attempts ${outcome.attempts}`);
  const arrivals = r.requests().map((q) => q.at);
  assert.equal(arrivals.length, outcome.attempts);
  // No attempt starts more than maxTotalSeconds after the first (a little slack for the trip).
  assert.ok(
    arrivals.at(-1)! - arrivals[0]! <= 1000 + 250,
    `the last attempt arrived ${arrivals.at(-1)! - arrivals[0]!} ms after the first`,
  );
});

test('4xx other than 429 is not retried; 429 is, after its Retry-After', async () => {
  const refused = receiver((_n, res) => res.writeHead(410).end());
  const { n, logs } = notifier(refused.url);
  const outcome = await n.notify(event());
  assert.deepEqual(outcome.status === 'failed' && [outcome.attempts, outcome.retryable, outcome.reason], [
    1,
    false,
    'the receiver answered HTTP 410',
  ]);
  assert.equal(refused.requests().length, 1);

  const redirect = receiver((_n, res) => res.writeHead(302, { location: 'http://127.0.0.1:1/elsewhere' }).end());
  const moved = await notifier(redirect.url).n.notify(event());
  assert.ok(moved.status === 'failed' && !moved.retryable && /redirect, not followed/.test(moved.reason), JSON.stringify(moved));

  const busy = receiver((k, res) => (k === 1 ? res.writeHead(429, { 'retry-after': '1' }).end() : res.writeHead(200).end()));
  const started = Date.now();
  const { n: n2 } = notifier(busy.url, { maxBackoffMs: 2000 });
  const slow = await n2.notify(event());
  assert.equal(slow.status === 'delivered' && slow.attempts, 2);
  assert.ok(Date.now() - started >= 1000, 'waited for Retry-After');
  assertNoSecrets(logs, outcome);
});

test('network errors are retried and named by their code; close() cancels what waits', async () => {
  // A port nobody listens on: connection refused.
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const port = (probe.address() as AddressInfo).port;
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  const { n, logs } = notifier(`http://127.0.0.1:${port}/hook?token=${URL_QUERY_SECRET}`, { maxAttempts: 3 });
  const outcome = await n.notify(event());
  assert.ok(outcome.status === 'failed' && outcome.attempts === 3 && /ECONNREFUSED/.test(outcome.reason), JSON.stringify(outcome));
  assert.ok(logs.every((l) => l.receiver === `http://127.0.0.1:${port}/hook`));
  assertNoSecrets(logs, outcome);

  // An answer that never comes within attemptTimeoutMs: retried.
  const hanging = receiver((k, res) => (k === 1 ? setTimeout(() => res.writeHead(200).end(), 1500) : res.writeHead(200).end()));
  const { n: patient, logs: patientLogs } = notifier(hanging.url, { attemptTimeoutMs: 300 });
  const slow = await patient.notify(event());
  assert.equal(slow.status === 'delivered' && slow.attempts, 2);
  assert.equal(patientLogs[0]?.error, 'timed out');

  const { n: closing } = notifier(`http://127.0.0.1:${port}/hook`, { initialBackoffMs: 10_000, maxBackoffMs: 10_000 });
  const pending = closing.notify(event());
  setTimeout(() => closing.close(), 100);
  const cancelled = await pending;
  assert.equal(cancelled.status, 'cancelled');
});

test('the configuration: an http(s) URL without credentials, a secret of 32 to 512 characters, never echoed', () => {
  const ok = { url: 'https://hooks.example.com/tuner', secret: SECRET };
  assert.equal(WebhookConfigSchema.safeParse(ok).success, true);
  assert.deepEqual(
    [WebhookConfigSchema.parse(ok).maxAttempts, WebhookConfigSchema.parse(ok).maxTotalSeconds],
    [8, 900],
    'bounded by default',
  );
  for (const bad of [
    { ...ok, url: 'ftp://hooks.example.com/tuner' },
    { ...ok, url: 'file:///etc/passwd' },
    { ...ok, url: 'not a url' },
    { ...ok, url: 'https://user:pw@hooks.example.com/tuner' },
    { ...ok, secret: 'short-secret' },
    { ...ok, secret: 'x'.repeat(513) },
  ]) {
    const result = WebhookConfigSchema.safeParse(bad);
    assert.equal(result.success, false, JSON.stringify(bad.url));
    assert.ok(!JSON.stringify(result.error).includes(bad.secret), 'the error does not repeat the secret');
  }
  assert.throws(
    () => new WebhookNotifier({ ...ok, secret: 'tiny-secret-value' }),
    (err: Error) => !err.message.includes('tiny-secret-value'),
  );
});

// A webhook receiver on loopback (node:http) for the webhook tests: each test takes a path of its
// own that answers as its script says, and reads back what arrived there. The signature is
// checked as docs/notifications.md tells receivers to, written apart from the code that signs.
import { createHmac, randomUUID, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before } from 'node:test';

export interface Received {
  headers: IncomingMessage['headers'];
  body: string;
  /** When the request arrived (ms). */
  at: number;
}

/** The answer to the n-th request (1, 2, …) of the path, or of the event id on it (`countBy`). */
export type Script = (n: number, res: ServerResponse, eventId: string) => void;

export interface ReceiverPath {
  url: string;
  /** What arrived, all of it or one event id's. */
  requests: (eventId?: string) => Received[];
}

export interface WebhookReceiver {
  /** A path of its own for one test; its URL carries a query secret that must never be logged. */
  path(script: Script, countBy?: 'path' | 'event'): ReceiverPath;
  close(): Promise<void>;
}

/** The query secret every receiver URL carries. */
export const URL_QUERY_SECRET = 'query-secret-not-to-log';

export async function startWebhookReceiver(): Promise<WebhookReceiver> {
  const paths = new Map<string, { script: Script; countBy: 'path' | 'event'; received: Received[] }>();
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const entry = paths.get((req.url ?? '/').split('?')[0]!);
      if (!entry) return void res.writeHead(404).end();
      entry.received.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), at: Date.now() });
      const id = String(req.headers['tuner-event-id']);
      const n = entry.countBy === 'path' ? entry.received.length : entry.received.filter((r) => r.headers['tuner-event-id'] === id).length;
      entry.script(n, res, id);
    });
  });
  // Longer than any test: the client's idle keep-alive connection is never closed by the server
  // just as the client reuses it (an ECONNRESET that would be retried, but muddles the counts).
  server.keepAliveTimeout = 120_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    path(script, countBy = 'path') {
      const path = `/hook/${randomUUID()}`;
      const entry = { script, countBy, received: [] as Received[] };
      paths.set(path, entry);
      return {
        url: `${base}${path}?token=${URL_QUERY_SECRET}`,
        requests: (eventId) => entry.received.filter((r) => eventId === undefined || r.headers['tuner-event-id'] === eventId),
      };
    },
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** A receiver for one test file: started before its tests, closed after them. */
export function webhookReceiverForFile(): Pick<WebhookReceiver, 'path'> {
  let receiver: WebhookReceiver | undefined;
  before(async () => {
    receiver = await startWebhookReceiver();
  });
  after(() => receiver?.close());
  return {
    path(script, countBy) {
      if (!receiver) throw new Error('the webhook receiver starts before the tests');
      return receiver.path(script, countBy);
    },
  };
}

/** docs/notifications.md, "Checking the signature", step by step. */
export function receiverAccepts(r: Pick<Received, 'headers' | 'body'>, secret: string): boolean {
  const header = String(r.headers['tuner-signature'] ?? '');
  const fields = Object.fromEntries(header.split(',').map((p) => p.split('=', 2) as [string, string]));
  const t = Number(fields['t']);
  if (!Number.isInteger(t) || Math.abs(Date.now() / 1000 - t) > 300) return false;
  const expected = createHmac('sha256', secret).update(`${fields['t']}.${r.body}`).digest();
  const given = Buffer.from(fields['v1'] ?? '', 'hex');
  return given.length === expected.length && timingSafeEqual(given, expected);
}

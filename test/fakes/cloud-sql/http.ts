// Small HTTP helpers for the fake Cloud C: bodies in, JSON out, Google's error shape
// (https://cloud.google.com/apis/design/errors: `{ "error": { "code", "message", "status",
// "errors": [{ "message", "domain", "reason" }] } }`, the v1 form Cloud SQL answers with).
import type { IncomingMessage, ServerResponse } from 'node:http';

export interface Reply {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
}

export const json = (status: number, body: unknown, headers: Record<string, string> = {}): Reply => ({ status, body, headers });

export function googleError(
  status: number,
  statusName: string,
  reason: string,
  message: string,
  headers: Record<string, string> = {},
): Reply {
  return json(status, { error: { code: status, message, errors: [{ message, domain: 'global', reason }], status: statusName } }, headers);
}

export async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

export function send(res: ServerResponse, reply: Reply): void {
  const text = reply.body === undefined ? '' : JSON.stringify(reply.body);
  res
    .writeHead(reply.status, {
      'content-type': 'application/json; charset=UTF-8',
      'content-length': String(Buffer.byteLength(text)),
      ...reply.headers,
    })
    .end(text);
}

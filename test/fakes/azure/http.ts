// Small HTTP helpers for the fake Cloud B: bodies in, JSON out, Azure's error shape.
import type { IncomingMessage, ServerResponse } from 'node:http';

export interface Reply {
  status: number;
  body?: unknown;
  headers?: Record<string, string>;
}

export function json(status: number, body?: unknown, headers: Record<string, string> = {}): Reply {
  return { status, ...(body !== undefined && { body }), headers };
}

/** Resource Manager's error body: `{ "error": { "code", "message" } }`. */
export function armError(status: number, code: string, message: string, headers: Record<string, string> = {}): Reply {
  return json(status, { error: { code, message } }, headers);
}

export async function readBody(req: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString('utf8');
}

export function send(res: ServerResponse, reply: Reply): void {
  const headers: Record<string, string> = { 'x-ms-request-id': crypto.randomUUID(), ...reply.headers };
  if (reply.body === undefined) {
    res.writeHead(reply.status, headers).end();
    return;
  }
  const text = JSON.stringify(reply.body);
  res
    .writeHead(reply.status, {
      'content-type': 'application/json; charset=utf-8',
      'content-length': String(Buffer.byteLength(text)),
      ...headers,
    })
    .end(text);
}

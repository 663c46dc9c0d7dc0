// The RPC protocols of CloudWatch and Performance Insights as the SDK speaks them.
//   awsJson1_0 (CloudWatch in the installed SDK): POST /, X-Amz-Target GraniteServiceVersion20100801.<Op>,
//     x-amzn-query-mode: true; errors carry x-amzn-query-error: <Code>;Sender for query compatibility.
//   awsJson1_1 (Performance Insights): POST /, X-Amz-Target PerformanceInsightsv20180227.<Op>.
//   Smithy RPC v2 CBOR (CloudWatch in newer SDKs): POST /service/<Service>/operation/<Op> with a
//     smithy-protocol: rpc-v2-cbor header, bodies in CBOR.
// Timestamps travel as epoch seconds (a number in JSON, tag 1 in CBOR).
import { decode, encode } from 'cbor2';

export type RpcProtocol = 'json-1.0' | 'json-1.1' | 'rpc-v2-cbor';

export interface RpcReply {
  status: number;
  headers: Record<string, string>;
  body: Buffer | string;
}

export function decodeRpcBody(protocol: RpcProtocol, body: Buffer): unknown {
  if (body.length === 0) return {};
  return protocol === 'rpc-v2-cbor' ? decode(body) : JSON.parse(body.toString('utf8'));
}

/** Dates become epoch seconds, recursively, for JSON. */
function epochSeconds(value: unknown): unknown {
  if (value instanceof Date) return value.getTime() / 1000;
  if (Array.isArray(value)) return value.map(epochSeconds);
  if (value && typeof value === 'object') return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, epochSeconds(v)]));
  return value;
}

export function rpcReply(protocol: RpcProtocol, payload: object): RpcReply {
  if (protocol === 'rpc-v2-cbor') {
    return {
      status: 200,
      headers: { 'content-type': 'application/cbor', 'smithy-protocol': 'rpc-v2-cbor' },
      body: Buffer.from(encode(payload)),
    };
  }
  const version = protocol === 'json-1.0' ? '1.0' : '1.1';
  return { status: 200, headers: { 'content-type': `application/x-amz-json-${version}` }, body: JSON.stringify(epochSeconds(payload)) };
}

export function rpcError(
  protocol: RpcProtocol,
  namespace: string,
  queryCompatible: boolean,
  status: number,
  code: string,
  message: string,
): RpcReply {
  const headers: Record<string, string> = { 'x-amzn-errortype': code };
  if (queryCompatible) headers['x-amzn-query-error'] = `${code};Sender`;
  const payload = { __type: queryCompatible ? `${namespace}#${code}` : code, message };
  if (protocol === 'rpc-v2-cbor') {
    return {
      status,
      headers: { ...headers, 'content-type': 'application/cbor', 'smithy-protocol': 'rpc-v2-cbor' },
      body: Buffer.from(encode(payload)),
    };
  }
  return {
    status,
    headers: { ...headers, 'content-type': `application/x-amz-json-${protocol === 'json-1.0' ? '1.0' : '1.1'}` },
    body: JSON.stringify(payload),
  };
}

/** A request timestamp: epoch seconds (JSON), a Date (CBOR tag 1) or an ISO string. */
export function timestamp(value: unknown): Date | null {
  if (value instanceof Date) return value;
  if (typeof value === 'number') return new Date(value * 1000);
  if (typeof value === 'string') {
    const d = new Date(value);
    return Number.isNaN(d.getTime()) ? null : d;
  }
  return null;
}

// A fake Cloud A on a loopback port, speaking the wire protocols the installed AWS SDK clients
// use (see wire-query.ts and wire-json.ts), backed by a real throwaway PostgreSQL. Point the
// agent at it with AWS_ENDPOINT_URL. Requests must be SigV4-signed (an Authorization header
// with a credential scope); signatures themselves are not checked. The PostgreSQL accepts TLS
// only, as an instance with rds.force_ssl = 1 does, with a certificate from a test "RDS" CA:
// the agent trusts that CA as a user would trust a CA newer than its bundles
// (postgresql.extra_ca_file).
//
//   const cluster = await startCluster({ tls: { ca: makeTestCa('fake RDS root CA') } });
//   const fake = await startFakeAws({ postgres: cluster });
//   fake.cloud.addGroup({ name: 'tuner-pg', values: { work_mem: '8192' } });
//   await fake.cloud.addInstance({ id: 'mydb', group: 'tuner-pg', postgres: true });
//   fake.inject('rds:ModifyDBParameterGroup', { code: 'Throttling', times: 2 });
//   fake.deny('rds:DescribeDBParameters');
//   const strict = await startFakeAws({ postgres: cluster, policy: specPolicy() }); // refuses what it lacks
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import type { TestCa } from '../../../src/lab/tls.ts';
import type { Cluster } from '../../../src/lab/cluster.ts';
import { DEFAULT_TIMINGS, FakeAwsError, FakeCloud, type FakeTimings } from './cloud.ts';
import { handleEc2 } from './ec2.ts';
import { PostgresEngine } from './engine.ts';
import { handleCloudWatch, handlePerformanceInsights } from './monitoring.ts';
import { handleRds } from './rds.ts';
import { decodeRpcBody, rpcError, rpcReply, type RpcProtocol, type RpcReply } from './wire-json.ts';
import { ec2Error, ec2Response, parseForm, rdsError, rdsResponse } from './wire-query.ts';

export { FakeCloud, evaluateFormula, type FakeGroup, type FakeInstance } from './cloud.ts';

type Service = 'rds' | 'ec2' | 'cloudwatch' | 'pi';

export interface RecordedCall {
  /** The IAM action, e.g. `rds:ModifyDBParameterGroup`. */
  action: string;
  /** The access key id of the SigV4 credential scope. */
  accessKeyId: string;
  protocol: 'query' | RpcProtocol;
  /** Form fields (query) or the decoded body (RPC). */
  input: Record<string, unknown>;
  /** The error code the fake answered with, if any. */
  error?: string;
}

interface Fault {
  action: string;
  code: string;
  status: number;
  message: string;
  /** Calls to let through before the first failure. */
  skip: number;
  times: number;
  /** Carry the call out, then answer with the error: an answer lost after the change was made. */
  afterApplying: boolean;
}

export interface FakeAwsOptions {
  postgres: Cluster;
  timings?: Partial<FakeTimings>;
  /** When set, other access key ids are refused as Cloud A would (InvalidClientTokenId). */
  accessKeyId?: string;
  /** Serve HTTPS with a certificate this CA issues for 127.0.0.1, as Cloud A's endpoints do
   * (plain HTTP otherwise, which the SDK accepts for custom endpoints). */
  https?: TestCa;
  /** The identity policy of the caller: an action no `Allow` statement names (exactly, or by a
   * `*` wildcard) is refused with the service's AccessDenied, as IAM refuses it. All actions
   * are allowed without one. */
  policy?: FakePolicy;
}

/** An IAM identity policy as the fake reads it: Allow statements and their actions. */
export interface FakePolicy {
  Statement: ReadonlyArray<{ Effect: string; Action: string | readonly string[] }>;
}

/** Whether `policy` allows `action` (IAM's matching: case-insensitive, `*` and `?` wildcards). */
export function policyAllows(policy: FakePolicy, action: string): boolean {
  return policy.Statement.some((s) => {
    if (s.Effect !== 'Allow') return false;
    const actions = typeof s.Action === 'string' ? [s.Action] : s.Action;
    return actions.some((pattern) =>
      new RegExp(
        `^${pattern
          .replace(/[.+^${}()|[\]\\]/g, '\\$&')
          .replace(/\*/g, '.*')
          .replace(/\?/g, '.')}$`,
        'i',
      ).test(action),
    );
  });
}

const DENIED: Record<Service, string> = {
  rds: 'AccessDenied',
  ec2: 'UnauthorizedOperation',
  cloudwatch: 'AccessDenied',
  pi: 'AccessDeniedException',
};
/** The caller the fake's AccessDenied messages name. */
const CALLER = 'arn:aws:iam::123456789012:user/tuner-agent';

/**
 * IAM's refusal as each service answers it: RDS and CloudWatch `AccessDenied` (403; CloudWatch's
 * JSON protocol carries the query code in x-amzn-query-error), EC2 `UnauthorizedOperation`
 * (403, its message begins "You are not authorized to perform this operation."), Performance
 * Insights `AccessDeniedException`; the message names the caller and the action, as IAM's
 * "no identity-based policy allows" denials do
 * (https://docs.aws.amazon.com/IAM/latest/UserGuide/troubleshoot_access-denied.html).
 */
function accessDenied(service: Service, action: string): FakeAwsError {
  const why = `User: ${CALLER} is not authorized to perform: ${action} on resource: * because no identity-based policy allows the ${action} action`;
  return new FakeAwsError(DENIED[service], service === 'ec2' ? `You are not authorized to perform this operation. ${why}` : why, 403);
}

const BAD_KEY: Record<Service, [string, number]> = {
  rds: ['InvalidClientTokenId', 403],
  ec2: ['AuthFailure', 401],
  cloudwatch: ['InvalidClientTokenId', 403],
  pi: ['UnrecognizedClientException', 403],
};

const RPC_TARGETS: Record<string, Service> = { GraniteServiceVersion20100801: 'cloudwatch', PerformanceInsightsv20180227: 'pi' };

interface Parsed {
  service: Service;
  operation: string;
  protocol: 'query' | RpcProtocol;
  input: Record<string, unknown>;
  form?: Map<string, string>;
  /** A body the protocol cannot read: refused once the call is recorded and signed. */
  unreadable?: FakeAwsError;
}

function readBody(req: IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => resolve(Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

/**
 * The body of an RPC call as an object, or why it cannot be read: a body that is not JSON (or
 * CBOR), or not an object, is a 400 SerializationException in the call's own protocol, as the
 * JSON protocols of AWS answer it (https://smithy.io/2.0/aws/protocols/aws-json-1_1-protocol.html,
 * errors: the `__type` of the body and the x-amzn-errortype header name the error).
 */
function rpcInput(protocol: RpcProtocol, body: Buffer): Pick<Parsed, 'input' | 'unreadable'> {
  let value: unknown;
  try {
    value = decodeRpcBody(protocol, body);
  } catch (err) {
    return {
      input: {},
      unreadable: new FakeAwsError('SerializationException', `The request body cannot be read: ${(err as Error).message}`),
    };
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    return { input: {}, unreadable: new FakeAwsError('SerializationException', 'The request body must be an object.') };
  return { input: value as Record<string, unknown> };
}

function parseRequest(req: IncomingMessage, body: Buffer): Parsed {
  const type = String(req.headers['content-type'] ?? '');
  if (type.startsWith('application/x-www-form-urlencoded')) {
    const form = parseForm(body.toString('utf8'));
    const version = form.get('Version');
    const service: Service = version === '2016-11-15' ? 'ec2' : 'rds';
    if (version !== '2016-11-15' && version !== '2014-10-31')
      throw new FakeAwsError('InvalidParameterValue', `unsupported Version ${version}`);
    return { service, operation: form.get('Action') ?? '', protocol: 'query', input: Object.fromEntries(form), form: new Map(form) };
  }
  const target = req.headers['x-amz-target'];
  if (typeof target === 'string') {
    const [prefix = '', operation = ''] = target.split('.');
    const service = RPC_TARGETS[prefix];
    if (!service) throw new FakeAwsError('UnknownOperationException', `unknown target ${target}`);
    const protocol: RpcProtocol = type.includes('1.0') ? 'json-1.0' : 'json-1.1';
    return { service, operation, protocol, ...rpcInput(protocol, body) };
  }
  const cbor = /^\/service\/([^/]+)\/operation\/([^/?]+)/.exec(req.url ?? '');
  if (req.headers['smithy-protocol'] === 'rpc-v2-cbor' && cbor) {
    const service = RPC_TARGETS[cbor[1]!];
    if (!service) throw new FakeAwsError('UnknownOperationException', `unknown service ${cbor[1]}`);
    return { service, operation: cbor[2]!, protocol: 'rpc-v2-cbor', ...rpcInput('rpc-v2-cbor', body) };
  }
  throw new FakeAwsError('UnknownOperationException', `cannot tell the protocol of ${req.method} ${req.url} (${type})`);
}

function errorReply(parsed: Pick<Parsed, 'service' | 'protocol'>, error: FakeAwsError): RpcReply {
  const { service, protocol } = parsed;
  if (protocol === 'query') {
    const body = service === 'ec2' ? ec2Error(error.code, error.message) : rdsError(error.code, error.message);
    return { status: error.status, headers: { 'content-type': 'text/xml' }, body };
  }
  const cloudwatch = service === 'cloudwatch';
  return rpcError(
    protocol,
    cloudwatch ? 'com.amazonaws.cloudwatch' : 'com.amazonaws.pi',
    cloudwatch,
    error.status,
    error.code,
    error.message,
  );
}

export class FakeAws {
  readonly cloud: FakeCloud;
  readonly calls: RecordedCall[] = [];
  readonly #server: Server;
  readonly #faults: Fault[] = [];
  readonly #accessKeyId: string | undefined;
  readonly #policy: FakePolicy | undefined;
  readonly #denied = new Set<string>();
  #url = '';

  readonly #scheme: 'http' | 'https';

  constructor(cloud: FakeCloud, accessKeyId: string | undefined, https?: TestCa, policy?: FakePolicy) {
    this.cloud = cloud;
    this.#accessKeyId = accessKeyId;
    this.#policy = policy;
    this.#scheme = https ? 'https' : 'http';
    const certificate = https?.issue(['127.0.0.1', 'localhost']);
    const serve = (req: IncomingMessage, res: ServerResponse) => {
      void this.handle(req).then(
        (reply) => {
          res.writeHead(reply.status, { ...reply.headers, 'x-amzn-requestid': crypto.randomUUID() });
          res.end(reply.body);
        },
        (err: unknown) => {
          res.writeHead(500, { 'content-type': 'text/plain' });
          res.end(String(err));
        },
      );
    };
    this.#server = certificate ? createHttpsServer({ cert: certificate.cert, key: certificate.key }, serve) : createServer(serve);
  }

  /** The endpoint to give the SDK (AWS_ENDPOINT_URL). */
  get url(): string {
    return this.#url;
  }

  async listen(): Promise<void> {
    await new Promise<void>((resolve) => this.#server.listen(0, '127.0.0.1', () => resolve()));
    const address = this.#server.address();
    if (!address || typeof address !== 'object') throw new Error('fake Cloud A: no address');
    this.#url = `${this.#scheme}://127.0.0.1:${address.port}`;
  }

  /** Fails the next `times` calls of `action` (after letting `skip` through) with `code`. */
  inject(
    action: string,
    fault: { code: string; status?: number; message?: string; times?: number; skip?: number; afterApplying?: boolean },
  ): void {
    this.#faults.push({
      action,
      code: fault.code,
      status: fault.status ?? (fault.code === 'RequestLimitExceeded' ? 503 : 400),
      message: fault.message ?? (/throttl|limit/i.test(fault.code) ? 'Rate exceeded' : `${fault.code} (injected by the test)`),
      skip: fault.skip ?? 0,
      times: fault.times ?? 1,
      afterApplying: fault.afterApplying ?? false,
    });
  }

  /** Refuses every call of `action` as IAM would without a policy that allows it (on top of
   * the policy the fake was started with, until clearFaults). */
  deny(action: string): void {
    this.#denied.add(action);
  }

  /** Removes every fault of `action` (or all). */
  clearFaults(action?: string): void {
    for (let i = this.#faults.length - 1; i >= 0; i--) if (!action || this.#faults[i]!.action === action) this.#faults.splice(i, 1);
    if (action) this.#denied.delete(action);
    else this.#denied.clear();
  }

  /** Whether the caller's identity may call `action`: the policy allows it and the test did not deny it. */
  allows(action: string): boolean {
    return !this.#denied.has(action) && (this.#policy === undefined || policyAllows(this.#policy, action));
  }

  callsOf(action: string): RecordedCall[] {
    return this.calls.filter((c) => c.action === action);
  }

  async close(): Promise<void> {
    this.cloud.stop();
    await this.cloud.settle();
    this.#server.closeAllConnections();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  #dispatch(parsed: Parsed): RpcReply {
    switch (parsed.service) {
      case 'rds':
        return {
          status: 200,
          headers: { 'content-type': 'text/xml' },
          body: rdsResponse(parsed.operation, handleRds(this.cloud, parsed.operation, parsed.form!)),
        };
      case 'ec2':
        return {
          status: 200,
          headers: { 'content-type': 'text/xml;charset=UTF-8' },
          body: ec2Response(parsed.operation, handleEc2(parsed.operation, parsed.form!)),
        };
      case 'cloudwatch':
        return rpcReply(parsed.protocol as RpcProtocol, handleCloudWatch(this.cloud, parsed.operation, parsed.input));
      case 'pi':
        return rpcReply(parsed.protocol as RpcProtocol, handlePerformanceInsights(this.cloud, parsed.operation, parsed.input));
    }
  }

  async handle(req: IncomingMessage): Promise<RpcReply> {
    const body = await readBody(req);
    let parsed: Parsed;
    try {
      parsed = parseRequest(req, body);
    } catch (err) {
      const error = err instanceof FakeAwsError ? err : new FakeAwsError('InternalFailure', String(err), 500);
      return errorReply({ service: 'rds', protocol: 'query' }, error);
    }
    const action = `${parsed.service}:${parsed.operation}`;
    const credential = /^AWS4-HMAC-SHA256 Credential=([^/,\s]+)\/\d{8}\/[^/]+\/([^/]+)\/aws4_request/.exec(
      String(req.headers['authorization'] ?? ''),
    );
    const call: RecordedCall = { action, accessKeyId: credential?.[1] ?? '', protocol: parsed.protocol, input: parsed.input };
    this.calls.push(call);
    try {
      if (!credential || !req.headers['x-amz-date'])
        throw new FakeAwsError('MissingAuthenticationToken', 'Request is missing Authentication Token', 403);
      if (this.#accessKeyId && credential[1] !== this.#accessKeyId) {
        const [code, status] = BAD_KEY[parsed.service];
        throw new FakeAwsError(code, 'The security token included in the request is invalid.', status);
      }
      if (parsed.unreadable) throw parsed.unreadable;
      if (!this.allows(action)) throw accessDenied(parsed.service, action);
      const fault = this.#faults.find((f) => f.action === action && f.times > 0);
      let failAfter: FakeAwsError | undefined;
      if (fault) {
        if (fault.skip > 0) fault.skip--;
        else {
          fault.times--;
          const error = new FakeAwsError(fault.code, fault.message, fault.status);
          if (!fault.afterApplying) throw error;
          failAfter = error;
        }
      }
      const reply = this.#dispatch(parsed);
      if (failAfter) throw failAfter;
      return reply;
    } catch (err) {
      const error =
        err instanceof FakeAwsError ? err : new FakeAwsError('InternalFailure', err instanceof Error ? err.message : String(err), 500);
      call.error = error.code;
      return errorReply(parsed, error);
    }
  }
}

export async function startFakeAws(options: FakeAwsOptions): Promise<FakeAws> {
  if (!options.postgres.ca)
    throw new Error('fake Cloud A: its PostgreSQL accepts TLS only, as rds.force_ssl = 1 does: start the cluster with tls: { ca }');
  const engine = await PostgresEngine.open(options.postgres);
  const cloud = new FakeCloud(engine, { ...DEFAULT_TIMINGS, ...options.timings });
  const fake = new FakeAws(cloud, options.accessKeyId, options.https, options.policy);
  await fake.listen();
  return fake;
}

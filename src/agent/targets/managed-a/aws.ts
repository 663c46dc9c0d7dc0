// The AWS SDK clients of the Cloud A target, made once and reused, and what their errors mean.
//
// Credentials: managed_a.ACCESS_KEY_ID and SECRET_ACCESS_KEY when given (evaluation), otherwise
// the SDK's default chain (environment, shared files, web identity, container task role,
// instance profile): the spec's production form, with no keys stored anywhere.
// Endpoints: the SDK's own AWS_ENDPOINT_URL and AWS_ENDPOINT_URL_<SERVICE> variables (tests
// point them at a fake Cloud A; the installed SDK honours them).
import { CloudWatchClient } from '@aws-sdk/client-cloudwatch';
import { EC2Client } from '@aws-sdk/client-ec2';
import { PIClient } from '@aws-sdk/client-pi';
import { RDSClient } from '@aws-sdk/client-rds';
import type { Outbound } from '../../../target/outbound.ts';
import type { AwsAction } from './permissions.ts';
import type { ManagedAConfig } from './config.ts';

/** The SDK retries throttling and transient errors itself, with backoff, up to this many tries. */
const SDK_MAX_ATTEMPTS = 6;

export interface AwsClients {
  readonly rds: RDSClient;
  readonly ec2: EC2Client;
  readonly cloudwatch: CloudWatchClient;
  readonly pi: PIClient;
  readonly region: string;
  /** Where the credentials come from, for people (never the keys themselves). */
  readonly credentialSource: string;
  destroy(): void;
}

export function createAwsClients(settings: ManagedAConfig, outbound?: Outbound): AwsClients {
  const { region, accessKeyId, secretAccessKey } = settings;
  if (!region) {
    throw new Error(
      'managed_a.REGION is missing: set it in agent.yaml or AGENT_CLOUDA_REGION (the region of the database, e.g. us-east-1)',
    );
  }
  if ((accessKeyId === undefined) !== (secretAccessKey === undefined)) {
    const [given, missing] = accessKeyId === undefined ? ['SECRET_ACCESS_KEY', 'ACCESS_KEY_ID'] : ['ACCESS_KEY_ID', 'SECRET_ACCESS_KEY'];
    throw new Error(
      `managed_a.${given} is set but managed_a.${missing} is not: set both (in agent.yaml or AGENT_CLOUDA_${given} and AGENT_CLOUDA_${missing}), ` +
        'or neither to use the role attached to this host',
    );
  }
  const credentials = accessKeyId !== undefined && secretAccessKey !== undefined ? { accessKeyId, secretAccessKey } : undefined;
  // The request handler carries the proxy route and the CAs (src/agent/sending/outbound.ts). The SDK's
  // credential providers (IMDS, ECS task role) make their own direct connections.
  const common = {
    region,
    maxAttempts: SDK_MAX_ATTEMPTS,
    ...(credentials && { credentials }),
    ...(outbound && { requestHandler: outbound.awsRequestHandler() }),
  };
  const rds = new RDSClient(common);
  const ec2 = new EC2Client(common);
  const cloudwatch = new CloudWatchClient(common);
  const pi = new PIClient(common);
  return {
    rds,
    ec2,
    cloudwatch,
    pi,
    region,
    credentialSource: credentials
      ? 'the access key in managed_a.ACCESS_KEY_ID / SECRET_ACCESS_KEY'
      : "the AWS SDK's default chain (environment, web identity, container task role, instance profile)",
    destroy() {
      for (const client of [rds, ec2, cloudwatch, pi]) client.destroy();
    },
  };
}

/** A failed Cloud A call, named by its IAM action, with the service's error code. */
export class AwsCallError extends Error {
  override name = 'AwsCallError';
  readonly action: AwsAction;
  /** The service's error code (e.g. `DBInstanceNotFound`, `AccessDenied`), or a word of ours. */
  readonly code: string;
  readonly codes: readonly string[];
  constructor(action: AwsAction, codes: readonly string[], message: string, cause: unknown) {
    super(message, { cause });
    this.action = action;
    this.codes = codes;
    this.code = codes[0] ?? 'Unknown';
  }
}

interface SdkErrorShape {
  name?: unknown;
  Code?: unknown;
  code?: unknown;
  message?: unknown;
  $metadata?: { httpStatusCode?: unknown };
}

/** Every code an SDK error carries: its name (the modeled exception) and its wire code. */
export function errorCodes(err: unknown): string[] {
  if (err instanceof AwsCallError) return [...err.codes];
  if (typeof err !== 'object' || err === null) return [];
  const e = err as SdkErrorShape;
  return [e.Code, e.name, e.code].filter((c): c is string => typeof c === 'string' && c !== 'Error');
}

export function hasCode(err: unknown, ...codes: string[]): boolean {
  const own = errorCodes(err);
  return codes.some((c) => own.includes(c) || own.includes(`${c}Fault`) || own.includes(`${c}Exception`));
}

function httpStatus(err: unknown): number | undefined {
  const status = (err as SdkErrorShape | null)?.$metadata?.httpStatusCode;
  return typeof status === 'number' ? status : undefined;
}

const THROTTLING = [
  'Throttling',
  'ThrottlingException',
  'RequestLimitExceeded',
  'TooManyRequestsException',
  'RequestThrottled',
  'SlowDown',
];
const CREDENTIALS_REFUSED = [
  'InvalidClientTokenId',
  'SignatureDoesNotMatch',
  'UnrecognizedClientException',
  'AuthFailure',
  'ExpiredToken',
  'ExpiredTokenException',
  'InvalidAccessKeyId',
  'IncompleteSignature',
  'MissingAuthenticationToken',
];
const ACCESS_DENIED = ['AccessDenied', 'AccessDeniedException', 'UnauthorizedOperation', 'NotAuthorizedException', 'UnauthorizedException'];

export function isThrottling(err: unknown): boolean {
  return httpStatus(err) === 429 || errorCodes(err).some((c) => THROTTLING.includes(c));
}

export function isAccessDenied(err: unknown): boolean {
  return errorCodes(err).some((c) => ACCESS_DENIED.includes(c));
}

function sdkMessage(err: unknown): string {
  const message = (err as SdkErrorShape | null)?.message;
  return typeof message === 'string' ? message : String(err);
}

/** The error of a failed call in words that say what to do; never a key. */
export function describeAwsError(action: AwsAction, err: unknown): AwsCallError {
  if (err instanceof AwsCallError) return err;
  const codes = errorCodes(err);
  const code = codes[0] ?? 'Unknown';
  const message = sdkMessage(err);
  if (codes.includes('CredentialsProviderError') || /could not load credentials/i.test(message)) {
    return new AwsCallError(
      action,
      ['NoCredentials'],
      `${action}: no Cloud A credentials found: set managed_a.ACCESS_KEY_ID and managed_a.SECRET_ACCESS_KEY ` +
        '(or AGENT_CLOUDA_ACCESS_KEY_ID and AGENT_CLOUDA_SECRET_ACCESS_KEY), or run the agent on a host or container with an attached role carrying the policy of tuner-agent permissions --managed-a',
      err,
    );
  }
  if (codes.some((c) => CREDENTIALS_REFUSED.includes(c))) {
    return new AwsCallError(
      action,
      codes,
      `${action}: Cloud A refused the credentials (${code}): check managed_a.ACCESS_KEY_ID and managed_a.SECRET_ACCESS_KEY ` +
        '(AGENT_CLOUDA_ACCESS_KEY_ID, AGENT_CLOUDA_SECRET_ACCESS_KEY), or the role attached to this host',
      err,
    );
  }
  if (isAccessDenied(err)) {
    return new AwsCallError(
      action,
      codes,
      `${action} was refused (${code}): the policy attached to the agent's role or IAM user must allow ${action}; ` +
        `print it with tuner-agent permissions --managed-a (Cloud A said: ${message})`,
      err,
    );
  }
  const network = (err as SdkErrorShape | null)?.code;
  if (typeof network === 'string' && /^E[A-Z]+$/.test(network)) {
    return new AwsCallError(action, [network], `${action}: cannot reach the Cloud A endpoint (${network}: ${message})`, err);
  }
  return new AwsCallError(action, codes, `${action} failed (${code}): ${message}`, err);
}

/** Runs one SDK call; its failure becomes an AwsCallError that names the action. */
export async function awsCall<T>(action: AwsAction, call: () => Promise<T>): Promise<T> {
  try {
    return await call();
  } catch (err) {
    throw describeAwsError(action, err);
  }
}

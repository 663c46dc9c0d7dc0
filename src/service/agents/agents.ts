// What happens when an agent starts, reports, acknowledges a command and stops: the lease, the
// tuning session's step, and what the answer carries (the next command, the next interval).
// The HTTP layer (http/agent-api.ts) parses and authenticates; everything decided is here.
import { randomUUID } from 'node:crypto';
import type { FastifyBaseLogger } from 'fastify';
import { z } from 'zod';
import type {
  AgentCheckRequest,
  AgentCheckResponse,
  AgentStartRequest,
  AgentStartResponse,
  AgentStopRequest,
  CommandAckRequest,
  ReportRequest,
  ReportResponse,
  TargetKind,
} from '../../protocol/v1.ts';
import { REPORT_CLOCK_TOLERANCE } from '../../protocol/v1.ts';
import type { ServiceMetrics } from '../app/metrics.ts';
import { ServiceError, invalid, notFound, unauthorized } from '../errors.ts';
import { looksLikeApiKey, matchesAnyHash, sha256Hex } from '../people/tokens.ts';
import { afterAck, afterReport, type AdvanceDeps } from '../tuning/advance.ts';
import type { AgentLease, AgentStore, LeasePolicy } from './store.ts';
import { redactReportTexts } from './report-body.ts';

/** What the agents feature needs: its port, the lease rule, and (to move tuning sessions on
 * after reports and acknowledgements) what the tuning feature needs. */
export type AgentsDeps = AdvanceDeps & {
  stores: { agents: AgentStore };
  leasePolicy: LeasePolicy;
  metrics?: Pick<ServiceMetrics, 'commandAcknowledged'> | undefined;
};

/** The database an agent's API key opened. */
export interface AgentDatabase {
  id: string;
  target: TargetKind;
}

/** The service issues UUIDs; anything else cannot be one of its commands. */
const ServiceCommandIdSchema = z.uuid();

const leaseExpired = (leaseId: string) =>
  new ServiceError(
    'lease_expired',
    `lease ${leaseId} is not the live lease of this database (it lapsed, was released, or another agent holds the database): start again`,
  );

const outOfOrder = (report: ReportRequest, lastSeq: number) =>
  new ServiceError(
    'report_out_of_order',
    `body.seq: report ${report.seq} of lease ${report.leaseId} comes after report ${lastSeq}: sequence numbers of a lease increase; start again (a start begins a new sequence)`,
  );

/** A report dated far from the service's clock is refused, naming the field (REPORT_CLOCK_TOLERANCE). */
function checkSentAt(sentAt: string, now: Date): void {
  const aheadSeconds = (Date.parse(sentAt) - now.getTime()) / 1000;
  const { aheadSeconds: maxAhead, behindSeconds: maxBehind } = REPORT_CLOCK_TOLERANCE;
  if (aheadSeconds > maxAhead) {
    throw invalid(
      `body.sentAt: ${sentAt} is ${Math.round(aheadSeconds)} s ahead of the service's clock (${now.toISOString()}); at most ${maxAhead} s is accepted: set the agent host's clock right (NTP)`,
    );
  }
  if (-aheadSeconds > maxBehind) {
    throw invalid(
      `body.sentAt: ${sentAt} is ${Math.round(-aheadSeconds)} s behind the service's clock (${now.toISOString()}); at most ${maxBehind} s (the agent's queue at its longest) is accepted: set the agent host's clock right (NTP)`,
    );
  }
}

function describeHolder(holder: AgentLease): string {
  return `host ${holder.hostname}, pid ${holder.pid}, agent ${holder.agentVersion}, started ${holder.startedAt.toISOString()}`;
}

/**
 * The database whose key this is. A key that is live for some other database is told so (404:
 * check the database id), whether or not the path's database exists; a key of no database is
 * 401. Neither answer tells which database ids exist.
 */
export async function authenticateAgent({ stores }: AgentsDeps, databaseId: string, apiKey: string): Promise<AgentDatabase> {
  // A string that cannot be a key is refused without asking the storage.
  if (!looksLikeApiKey(apiKey)) throw unauthorized(`the API key is not valid: it is mistyped, or not an API key of the tuning service`);
  const credentials = await stores.agents.agentCredentials(databaseId);
  if (credentials && matchesAnyHash(apiKey, credentials.keyHashes)) return { id: databaseId, target: credentials.target };
  if (await stores.agents.isLiveKeyHash(sha256Hex(apiKey))) {
    throw notFound(
      `the API key is live, but not a key of database ${databaseId}: check tuner.database_id against the agent setup page of the key's database`,
    );
  }
  throw unauthorized(`the API key is not valid for database ${databaseId}: it is mistyped or revoked`);
}

/** The preflight's question: nothing changes, no lease is taken. */
export function checkAgent(database: AgentDatabase, request: AgentCheckRequest): AgentCheckResponse {
  void request;
  return { target: database.target };
}

export async function startAgent(
  ctx: AgentsDeps,
  database: AgentDatabase,
  request: AgentStartRequest,
  log: FastifyBaseLogger,
): Promise<AgentStartResponse> {
  if (request.target !== database.target) {
    throw invalid(
      `body.target: this database is set up for target ${database.target}, but the agent runs with --${request.target}: start it with --${database.target}, or create a database entry for ${request.target}`,
    );
  }
  const result = await ctx.stores.agents.startAgent(database.id, request, randomUUID(), ctx.leasePolicy);
  if (result.kind === 'conflict') {
    log.info({ databaseId: database.id, refusedHost: request.host.hostname }, 'agent start refused: another agent holds the lease');
    throw new ServiceError(
      'agent_conflict',
      `another agent holds this database (${describeHolder(result.holder)}); its lease expires at ${result.holder.expiresAt.toISOString()} unless it reports. ` +
        'Run one agent per database: stop the other one, or wait for its lease to lapse.',
    );
  }
  log.info({ databaseId: database.id, host: request.host.hostname, pid: request.host.pid, resumed: result.resumed }, 'agent started');
  return { leaseId: result.leaseId, leaseExpiresAt: result.expiresAt.toISOString(), reportIntervalSeconds: result.reportIntervalSeconds };
}

/** Stores the report (`storedBody`: as sent, compressed), moves the database's tuning session on,
 * and answers with the command that goes out now and when to report next. The lease's last report
 * sent again (its answer was lost) gets the same kind of answer and is not stored twice, so the
 * agent drops it from its queue. */
export async function receiveReport(
  ctx: AgentsDeps,
  database: AgentDatabase,
  report: ReportRequest,
  storedBody: Buffer,
  log: FastifyBaseLogger,
): Promise<ReportResponse> {
  checkSentAt(report.sentAt, new Date());
  ({ report, storedBody } = redactReportTexts(report, storedBody));
  const result = await ctx.stores.agents.recordReport(database.id, report, storedBody, ctx.leasePolicy);
  if (result.kind === 'lease_expired') throw leaseExpired(report.leaseId);
  if (result.kind === 'out_of_order') throw outOfOrder(report, result.lastSeq);
  // A command waiting already goes first. What the tuning session queued now goes out in this
  // answer (else with the next report), and while the tuning session measures, the agent reports
  // often enough to fill its window: the database's own interval wins only when it is shorter.
  const tuning = await afterReport(ctx, database.id, result.tuningSessionRunning, result.command === null, log);
  return {
    nextReportInSeconds: Math.min(result.reportIntervalSeconds, tuning.reportIntervalSeconds ?? Infinity),
    leaseExpiresAt: result.expiresAt.toISOString(),
    command: result.command ?? tuning.command,
  };
}

export async function acknowledgeCommand(
  ctx: AgentsDeps,
  database: AgentDatabase,
  commandId: string,
  ack: CommandAckRequest,
  log: FastifyBaseLogger,
): Promise<void> {
  const result = ServiceCommandIdSchema.safeParse(commandId).success
    ? await ctx.stores.agents.recordAck(database.id, commandId, ack)
    : { kind: 'unknown_command' as const };
  if (result.kind === 'lease_expired') throw leaseExpired(ack.leaseId);
  if (result.kind === 'unknown_command') throw notFound(`no command ${commandId.slice(0, 100)} for this database`);
  if (result.kind !== 'recorded') return;
  ctx.metrics?.commandAcknowledged(result.commandKind, ack.status);
  await afterAck(ctx, database.id, log);
}

export async function stopAgent(
  ctx: AgentsDeps,
  database: AgentDatabase,
  request: AgentStopRequest,
  log: FastifyBaseLogger,
): Promise<void> {
  const result = await ctx.stores.agents.stopAgent(database.id, request.leaseId);
  if (result.kind === 'lease_expired') throw leaseExpired(request.leaseId);
  if (result.kind === 'released') log.info({ databaseId: database.id }, 'agent stopped');
}

// Protocol v1, the service's side: the four routes agents call. Each request is authenticated
// before its body is read (an unauthenticated client never makes the service decompress
// anything); each body is validated with the protocol's schemas.
import { randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import {
  AgentStartRequestSchema,
  AgentStopRequestSchema,
  CommandAckRequestSchema,
  ReportRequestSchema,
  type AgentStartResponse,
  type ReportResponse,
  type TargetKindV1,
} from '../../protocol/v1.ts';
import { looksLikeApiKey, matchesAnyHash } from '../auth/tokens.ts';
import type { ServiceContext } from '../context.ts';
import { DatabaseIdSchema } from '../inputs.ts';
import type { AgentLease } from '../storage/storage.ts';
import { rawBodyOf, useJsonBodies } from './body.ts';
import { refuseUnstorableText, storableTime } from './storable.ts';
import { reportBodyForStorage } from '../storage/report-body.ts';
import { afterAck, afterReport } from '../sessions/advance.ts';
import { HttpError, badRequest, errorBody, jsonErrorHandler, notFound, parseOr400 } from './errors.ts';

const DatabaseParamsSchema = z.object({ databaseId: DatabaseIdSchema });
const AckParamsSchema = z.object({ databaseId: DatabaseIdSchema, commandId: z.string() });
/** The service issues UUIDs; anything else cannot be one of its commands. */
const ServiceCommandIdSchema = z.uuid();

interface AuthenticatedDatabase {
  id: string;
  target: TargetKindV1;
}

/** The database each request authenticated for; set by the onRequest hook. */
const authenticated = new WeakMap<FastifyRequest, AuthenticatedDatabase>();

function databaseOf(request: FastifyRequest): AuthenticatedDatabase {
  const database = authenticated.get(request);
  if (!database) throw new HttpError(401, 'unauthorized', 'not authenticated');
  return database;
}

function bearerKey(request: FastifyRequest): string {
  const header = request.headers.authorization;
  const match = header === undefined ? null : /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (!match?.[1]) {
    throw new HttpError(401, 'unauthorized', 'missing API key: send the header "Authorization: Bearer <api_key>" with the key from the agent setup page');
  }
  return match[1];
}

function describeHolder(holder: AgentLease): string {
  return `host ${holder.hostname}, pid ${holder.pid}, agent ${holder.agentVersion}, started ${holder.startedAt.toISOString()}`;
}

const leaseExpired = (leaseId: string) =>
  new HttpError(409, 'lease_expired', `lease ${leaseId} is not the live lease of this database (it lapsed, was released, or another agent holds the database): start again`);

export function registerAgentApi(app: FastifyInstance, ctx: ServiceContext): void {
  const { storage, leasePolicy } = ctx;

  useJsonBodies(app, { refusePrototypeKeys: false });
  app.setErrorHandler(jsonErrorHandler);
  app.setNotFoundHandler((request, reply) => {
    void reply.code(404).send(errorBody('not_found', `no route ${request.method} ${request.url.split('?')[0]?.slice(0, 200)} in protocol v1`));
  });

  app.addHook('onRequest', async (request) => {
    if (request.is404) return;
    const params = parseOr400(DatabaseParamsSchema, request.params, 'path');
    const key = bearerKey(request);
    // A string that cannot be a key is refused without asking the storage.
    const credentials = looksLikeApiKey(key) ? await storage.agentCredentials(params.databaseId) : null;
    // An unknown database and a key of another database get the same answer, so that the
    // answer tells nothing about which database ids exist.
    if (!credentials || !matchesAnyHash(key, credentials.keyHashes)) {
      throw new HttpError(401, 'unauthorized', `the API key is not valid for database ${params.databaseId}: it is mistyped, revoked, or of another database`);
    }
    authenticated.set(request, { id: params.databaseId, target: credentials.target });
  });

  app.post('/databases/:databaseId/agent/start', async (request, reply: FastifyReply) => {
    const database = databaseOf(request);
    const body = parseOr400(AgentStartRequestSchema, request.body, 'body');
    refuseUnstorableText(rawBodyOf(request)?.text ?? null, body);
    if (body.target !== database.target) {
      throw badRequest(`body.target: this database is set up for target ${database.target}, but the agent runs with --${body.target}: start it with --${database.target}, or create a database entry for ${body.target}`);
    }
    const result = await storage.startAgent(database.id, body, randomUUID(), leasePolicy);
    if (result.kind === 'conflict') {
      request.log.info({ databaseId: database.id, refusedHost: body.host.hostname }, 'agent start refused: another agent holds the lease');
      throw new HttpError(
        409,
        'agent_conflict',
        `another agent holds this database (${describeHolder(result.holder)}); its lease expires at ${result.holder.expiresAt.toISOString()} unless it reports. ` +
          'Run one agent per database: stop the other one, or wait for its lease to lapse.',
      );
    }
    request.log.info({ databaseId: database.id, host: body.host.hostname, pid: body.host.pid, resumed: result.resumed }, 'agent started');
    const response: AgentStartResponse = {
      leaseId: result.leaseId,
      leaseExpiresAt: result.expiresAt.toISOString(),
      reportIntervalSeconds: result.reportIntervalSeconds,
    };
    return reply.send(response);
  });

  app.post('/databases/:databaseId/reports', async (request, reply) => {
    const database = databaseOf(request);
    const parsed = parseOr400(ReportRequestSchema, request.body, 'body');
    const raw = rawBodyOf(request);
    if (!raw) throw badRequest('the body is missing');
    // The report is kept whole as sent (compressed), so any text is fine in it; what PostgreSQL
    // cannot store matters only in what goes into text columns: the events.
    refuseUnstorableText(raw.text, parsed.events, 'body.events');
    const body = {
      ...parsed,
      sentAt: storableTime(parsed.sentAt, 'body.sentAt'),
      events: parsed.events.map((e, i) => ({ ...e, at: storableTime(e.at, `body.events[${i}].at`) })),
    };
    const result = await storage.recordReport(database.id, body, reportBodyForStorage(raw.received, raw.gzip), leasePolicy);
    if (result.kind === 'lease_expired') throw leaseExpired(body.leaseId);
    // A tuning session moves on with each report; what it queued now goes out in this answer,
    // and while it measures the agent reports often enough to fill its window.
    const session = await afterReport(storage, database.id, request.log);
    const command = result.command ?? (session.commandIssued ? await storage.sendNextCommand(database.id) : null);
    const response: ReportResponse = {
      nextReportInSeconds: Math.min(result.reportIntervalSeconds, session.reportIntervalSeconds ?? Infinity),
      leaseExpiresAt: result.expiresAt.toISOString(),
      command,
    };
    return reply.send(response);
  });

  app.post('/databases/:databaseId/commands/:commandId/ack', async (request, reply) => {
    const database = databaseOf(request);
    const { commandId } = parseOr400(AckParamsSchema, request.params, 'path');
    const body = parseOr400(CommandAckRequestSchema, request.body, 'body');
    refuseUnstorableText(rawBodyOf(request)?.text ?? null, body);
    const result = ServiceCommandIdSchema.safeParse(commandId).success ? await storage.recordAck(database.id, commandId, body) : { kind: 'unknown_command' as const };
    if (result.kind === 'lease_expired') throw leaseExpired(body.leaseId);
    if (result.kind === 'unknown_command') throw notFound(`no command ${commandId.slice(0, 100)} for this database`);
    if (result.kind === 'recorded') ctx.metrics?.commandAcknowledged(result.commandKind, body.status);
    if (result.kind === 'recorded') await afterAck(storage, database.id, request.log);
    return reply.code(204).send();
  });

  app.post('/databases/:databaseId/agent/stop', async (request, reply) => {
    const database = databaseOf(request);
    const body = parseOr400(AgentStopRequestSchema, request.body, 'body');
    const result = await storage.stopAgent(database.id, body.leaseId);
    if (result.kind === 'lease_expired') throw leaseExpired(body.leaseId);
    if (result.kind === 'released') request.log.info({ databaseId: database.id }, 'agent stopped');
    return reply.code(204).send();
  });
}

// The audit log's pages: the organization's (admins) and each database's (anyone of its
// organization). Read only, like the API.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ServiceContext } from '../../app/context.ts';
import { AuditQuerySchema } from '../../audit/inputs.ts';
import { readAudit } from '../../audit/queries.ts';
import { databaseOf } from '../../databases/queries.ts';
import { auditPage } from '../../web/audit-page.ts';
import { DatabaseParams } from './database-routes.ts';
import { loginOf, parseForm, sendPage } from './page.ts';

export function registerAuditRoutes(app: FastifyInstance, ctx: ServiceContext): void {
  const render = async (request: FastifyRequest, reply: FastifyReply, databaseId: string | null) => {
    const login = loginOf(request);
    // An empty field of the filter form means no filter.
    const raw = Object.fromEntries(Object.entries((request.query ?? {}) as Record<string, unknown>).filter(([, v]) => v !== ''));
    const asked = parseForm(AuditQuerySchema, { ...raw, ...(databaseId && { databaseId }) });
    const database = databaseId ? await databaseOf(ctx, login.user, databaseId) : null;
    const events = await readAudit(ctx, login.user, asked);
    const next = events.length === asked.limit ? events.at(-1)!.id : null;
    return sendPage(reply, auditPage({ login, database, events, asked, next }));
  };
  app.get('/audit', (request, reply) => render(request, reply, null));
  app.get('/databases/:databaseId/audit', (request, reply) => render(request, reply, parseForm(DatabaseParams, request.params).databaseId));
}

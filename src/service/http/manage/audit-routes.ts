// The people's API: the audit log (docs/people.md). Read only: there is no route that changes or
// deletes an entry. The organization's log is for admins; a database's (databaseId) for anyone of
// its organization. Paged newest first (`next`: the `before` of the next page); the export is
// every matching entry as JSON lines.
import { Readable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import type { ServiceContext } from '../../app/context.ts';
import { AuditQuerySchema } from '../../audit/inputs.ts';
import { readAudit } from '../../audit/queries.ts';
import { auditEventView } from '../../audit/views.ts';
import { parseOr400 } from '../errors.ts';
import { loginOf } from './login-of.ts';

/** The export reads the log in pages of this many entries. */
const EXPORT_PAGE = 500;

export function registerAuditRoutes(app: FastifyInstance, ctx: ServiceContext): void {
  app.get('/audit', async (request) => {
    const { user } = loginOf(request);
    const query = parseOr400(AuditQuerySchema, request.query ?? {}, 'query');
    const events = await readAudit(ctx, user, query);
    return { events: events.map(auditEventView), next: events.length === query.limit ? events.at(-1)!.id : null };
  });

  app.get('/audit/export', async (request, reply) => {
    const { user } = loginOf(request);
    const query = parseOr400(AuditQuerySchema, request.query ?? {}, 'query');
    // The first page is read before answering, so that a refusal is a plain 403.
    const first = await readAudit(ctx, user, { ...query, limit: EXPORT_PAGE });
    async function* lines() {
      let events = first;
      for (;;) {
        for (const event of events) yield `${JSON.stringify(auditEventView(event))}\n`;
        if (events.length < EXPORT_PAGE) return;
        events = await readAudit(ctx, user, { ...query, before: events.at(-1)!.id, limit: EXPORT_PAGE });
      }
    }
    return reply
      .type('application/x-ndjson; charset=utf-8')
      .header('content-disposition', 'attachment; filename="tuner-audit.jsonl"')
      .send(Readable.from(lines()));
  });
}

// A database's dashboard and the forms on it: tuning sessions (start, stop, approve, revert),
// commands, the report interval. A form refused for a reason the person can act on is shown on
// the dashboard with that reason; the others redirect back to it (303) with a notice.
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import type { ServiceContext } from '../../app/context.ts';
import * as actions from '../../databases/actions.ts';
import {
  CommandInputSchema,
  DatabaseIdSchema,
  ReportIntervalInputSchema,
  UuidSchema,
  parseValueLines,
  type CommandInput,
} from '../../databases/inputs.ts';
import { REPORT_INTERVAL_SECONDS } from '../../../protocol/v1.ts';
import * as databases from '../../databases/queries.ts';
import * as tuning from '../../tuning/actions.ts';
import { adviceSeed } from '../../advice/seed.ts';
import { StartTuningSessionInputSchema, startInputFromForm } from '../../tuning/params.ts';
import * as tuningQueries from '../../tuning/queries.ts';
import { adviceOf } from '../../advice/queries.ts';
import { iterationViews, tuningSessionView } from '../../tuning/views.ts';
import { dashboardPage } from '../../web/dashboard-page.ts';
import { statusOfExpected } from '../errors.ts';
import { DatabaseParams } from './database-routes.ts';
import { fields, loginOf, parseForm, sendPage } from './page.ts';

const TuningSessionParams = z.object({ databaseId: DatabaseIdSchema, sessionId: UuidSchema });

type Notice = { kind: 'ok' | 'bad'; text: string };

const NOTICES: Record<string, Notice> = {
  command: { kind: 'ok', text: 'Command queued: the agent receives it with its next report.' },
  interval: { kind: 'ok', text: 'Report interval saved: the agent uses it from its next report.' },
  'session-started': { kind: 'ok', text: 'Tuning session started: the baseline is measured from the next report.' },
  'session-stop': { kind: 'ok', text: 'Tuning session stopped.' },
  'session-approve': { kind: 'ok', text: 'Approved: the agent applies the best configuration and keeps it.' },
  'session-revert': { kind: 'ok', text: 'Reverting to the baseline: the agent receives the command with its next report.' },
};

export function registerDashboardRoutes(app: FastifyInstance, ctx: ServiceContext): void {
  const renderDashboard = async (request: FastifyRequest, reply: FastifyReply, databaseId: string, notice?: Notice, status = 200) => {
    const login = loginOf(request);
    const database = await databases.databaseOf(ctx, login.user, databaseId);
    const [activity, tuningSessions, advice] = await Promise.all([
      databases.databaseActivity(ctx, database, { series: 120, commands: 30, events: 15 }),
      tuningQueries.tuningSessionsOf(ctx, database, 10),
      adviceOf(ctx, database),
    ]);
    // The tuning session asked for (?session=), else the latest.
    const asked = UuidSchema.safeParse((request.query as Record<string, unknown>)['session']);
    const shownId = asked.success ? asked.data : tuningSessions[0]?.id;
    const found = shownId ? await tuningQueries.findTuningSession(ctx, login.user.organizationId, databaseId, shownId) : null;
    const shown = found && {
      view: tuningSessionView(found.session, found.iterations),
      iterations: iterationViews(found.session, found.iterations),
    };
    return sendPage(
      reply,
      dashboardPage({
        login,
        database,
        defaultIntervalSeconds: ctx.config.reportIntervalSeconds,
        ...activity,
        notice,
        tuning: { shown, tuningSessions },
        advice,
      }),
      status,
    );
  };

  app.get('/databases/:databaseId', async (request, reply) => {
    const { databaseId } = parseForm(DatabaseParams, request.params);
    const done = (request.query as Record<string, unknown>)['done'];
    return renderDashboard(request, reply, databaseId, typeof done === 'string' ? NOTICES[done] : undefined);
  });

  // Tuning sessions: a refused action is shown on the dashboard, with the reason.
  const refusedOnDashboard = async (request: FastifyRequest, reply: FastifyReply, databaseId: string, err: unknown) => {
    const status = statusOfExpected(err);
    if (status !== null && status !== 404 && status < 500) {
      return renderDashboard(request, reply, databaseId, { kind: 'bad', text: (err as Error).message }, status);
    }
    throw err;
  };

  app.post('/databases/:databaseId/tuning-sessions', async (request, reply) => {
    const { databaseId } = parseForm(DatabaseParams, request.params);
    try {
      const input = parseForm(StartTuningSessionInputSchema, startInputFromForm(fields(request.body)));
      await tuning.startTuningSession(ctx, loginOf(request).user, databaseId, input, (database) => adviceSeed(ctx, database));
    } catch (err) {
      return refusedOnDashboard(request, reply, databaseId, err);
    }
    return reply.redirect(`/databases/${databaseId}?done=session-started#tuning`, 303);
  });

  for (const [action, run] of [
    ['stop', tuning.stopTuningSession],
    ['approve', tuning.approveTuningSession],
    ['revert', tuning.revertTuningSession],
  ] as const) {
    app.post(`/databases/:databaseId/tuning-sessions/:sessionId/${action}`, async (request, reply) => {
      const { databaseId, sessionId } = parseForm(TuningSessionParams, request.params);
      try {
        await run(ctx, loginOf(request).user, databaseId, sessionId);
      } catch (err) {
        return refusedOnDashboard(request, reply, databaseId, err);
      }
      return reply.redirect(`/databases/${databaseId}?session=${sessionId}&done=session-${action}#tuning`, 303);
    });
  }

  app.post('/databases/:databaseId/commands', async (request, reply) => {
    const { databaseId } = parseForm(DatabaseParams, request.params);
    const form = fields(request.body);
    let input: CommandInput;
    try {
      const raw =
        form['kind'] === 'revert'
          ? { kind: 'revert', to: form['to'] }
          : {
              kind: form['kind'],
              values: parseValueLines(form['values'] ?? ''),
              keep: form['keep'] === 'true',
              allowRestart: form['allowRestart'] === 'true',
            };
      input = parseForm(CommandInputSchema, raw);
    } catch (err) {
      return renderDashboard(request, reply, databaseId, { kind: 'bad', text: `Command not sent: ${(err as Error).message}` }, 400);
    }
    try {
      await actions.issueCommand(ctx, loginOf(request).user, databaseId, input);
    } catch (err) {
      if (statusOfExpected(err) === 409)
        return renderDashboard(request, reply, databaseId, { kind: 'bad', text: (err as Error).message }, 409);
      throw err;
    }
    return reply.redirect(`/databases/${databaseId}?done=command`, 303);
  });

  app.post('/databases/:databaseId/report-interval', async (request, reply) => {
    const { databaseId } = parseForm(DatabaseParams, request.params);
    const raw = (fields(request.body)['reportIntervalSeconds'] ?? '').trim();
    const seconds = raw === '' ? null : Number(raw);
    if (!ReportIntervalInputSchema.shape.reportIntervalSeconds.safeParse(seconds).success) {
      return renderDashboard(
        request,
        reply,
        databaseId,
        {
          kind: 'bad',
          text: `The report interval must be a whole number of seconds from ${REPORT_INTERVAL_SECONDS.min} to ${REPORT_INTERVAL_SECONDS.max}, or empty for the default.`,
        },
        400,
      );
    }
    await actions.setReportInterval(ctx, loginOf(request).user, databaseId, seconds);
    return reply.redirect(`/databases/${databaseId}?done=interval`, 303);
  });
}

// What the diagnoses argue for now, on a database with no session running: read from its latest
// reports (the last quarter of an hour, since any session ended), against the settings it runs
// with. Computed when asked: the reports are stored whole, and the diagnoses are cheap. The
// dashboard, the people's API and a session started from the advice all read it here.
import type { WorkloadSignals } from '../../optimizer/index.ts';
import { tuningModeOf, type TuningMode } from '../../protocol/v1.ts';
import { databaseOf, type DatabasesDeps } from '../databases/actions.ts';
import type { DatabaseSummary } from '../databases/store.ts';
import type { User } from '../people/store.ts';
import { TARGETS } from '../../agent/targets/registry.ts';
import { buildSpace, sessionSpaceInput } from '../tuning/space.ts';
import { ACTIVE_SESSION_STATES, type TuningStore } from '../tuning/store.ts';
import { adviceFrom, type AdviceItem } from './advice.ts';

export const ADVICE_LIMITS = {
  /** The reports of this long before now are the evidence: recent enough to be today's
   * workload, long enough to hold several reports at the default interval. */
  windowSeconds: 15 * 60,
  maxReports: 200,
} as const;

/**
 * - advice: the diagnoses argue for something (items);
 * - nothing: the latest reports show nothing a diagnosis argues for;
 * - session_active: a session holds the database: its own diagnoses run at its start;
 * - no_reports: no report with metrics in the window (no agent, or it just started);
 * - no_space: the settings or the machine the diagnoses read are not known yet.
 */
export type AdviceState = 'advice' | 'nothing' | 'session_active' | 'no_reports' | 'no_space';

export interface AdviceAnswer {
  state: AdviceState;
  /** For people: why there is no advice, or what it rests on. */
  message: string;
  items: AdviceItem[];
  /** The reports read. */
  window: { from: Date; to: Date; reports: number; seconds: number } | null;
  /** The mode a session from the advice runs in: restart when a change needs it and the agent may. */
  sessionMode: TuningMode;
  /** What the diagnoses read (a session started from the advice keeps them). */
  signals: WorkloadSignals | null;
}

export type AdviceDeps = DatabasesDeps & { stores: { tuning: TuningStore } };

function answer(state: AdviceState, message: string, rest: Partial<AdviceAnswer> = {}): AdviceAnswer {
  return { state, message, items: [], window: null, sessionMode: 'reload-only', signals: null, ...rest };
}

/** The advice for a database `databaseOf` returned (its organization checked already). */
export async function adviceOf(deps: AdviceDeps, database: DatabaseSummary, now = new Date()): Promise<AdviceAnswer> {
  const [latest] = await deps.stores.tuning.listTuningSessions(database.organizationId, database.id, 1);
  if (latest && ACTIVE_SESSION_STATES.includes(latest.state)) {
    return answer('session_active', `session ${latest.id} is ${latest.state.replace('_', ' ')}: its own diagnoses ran at its start`);
  }
  // Reports measured under a session's trials are not the database as it runs.
  const windowStart = now.getTime() - ADVICE_LIMITS.windowSeconds * 1000;
  const since = new Date(Math.max(windowStart, latest?.endedAt?.getTime() ?? 0));
  const reports = (await deps.stores.databases.recentReports(database.organizationId, database.id, since, ADVICE_LIMITS.maxReports)).filter(
    (r) => r.metrics !== null,
  );
  const newest = reports.at(-1);
  if (!newest?.metrics) return answer('no_reports', 'no report with metrics in the last 15 minutes: the advice reads the agent’s reports');
  const agent = database.agent;
  const machine = agent?.system.machine;
  const settings = newest.settings.length > 0 ? newest.settings : (agent?.system.settings ?? []);
  if (!machine || settings.length === 0) return answer('no_space', "the machine's size or the server's settings are not known yet");
  const target = agent?.target ?? database.target;
  // Restart-only parameters are advised too; the session runs in restart mode only where allowed.
  const adviceMode = tuningModeOf(TARGETS.capabilitiesOf(target).restart.mode !== 'never');
  let space;
  try {
    space = buildSpace(
      sessionSpaceInput({ target, mode: adviceMode, machine, settings, maxConnections: newest.metrics.activity.maxConnections }),
    );
  } catch (err) {
    return answer('no_space', `the search space cannot be built from the reported settings: ${(err as Error).message}`);
  }
  const metrics = reports.flatMap((r) => (r.metrics ? [r.metrics] : []));
  const { items, signals } = adviceFrom(space, metrics);
  const window = { from: reports[0]!.receivedAt, to: newest.receivedAt, reports: reports.length, seconds: signals.seconds };
  const needsRestart = items.some((item) => item.changes.some((c) => c.restart));
  const sessionMode = tuningModeOf(needsRestart && agent?.allowRestart === true && adviceMode === 'restart');
  const over = `over ${reports.length} report${reports.length === 1 ? '' : 's'} (${Math.round(signals.seconds)} s)`;
  if (items.length === 0) return answer('nothing', `the diagnoses find nothing to change ${over}`, { window, signals, sessionMode });
  return answer('advice', `${items.length} diagnos${items.length === 1 ? 'is argues' : 'es argue'} for a change ${over}`, {
    items,
    window,
    signals,
    sessionMode,
  });
}

export async function readAdvice(deps: AdviceDeps, user: User, databaseId: string): Promise<AdviceAnswer> {
  return adviceOf(deps, await databaseOf(deps, user, databaseId));
}

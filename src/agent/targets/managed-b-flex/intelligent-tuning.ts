// Azure's own "intelligent tuning": when the server parameter intelligent_tuning is on, Azure
// changes some server parameters itself, which of them set by intelligent_tuning.metric_targets
// (https://learn.microsoft.com/azure/postgresql/flexible-server/concepts-intelligent-tuning and
// …/how-to-configure-intelligent-tuning): four of the parameters the agent tunes. Two tuners on
// one parameter would move it under each other's trials and known-good configuration, so the
// agent leaves those to Azure: out of the search (reported as unwritable), refused if asked.
//
// metric_targets is a comma-separated set: `none` wins over everything (no tuning at all, as
// intelligent_tuning off), `all` over the rest (every target, including ones Azure adds later);
// `tuning-autovacuum` touches autovacuum settings only, none of the agent's.
import type { ServerParameter } from './api.ts';

export const INTELLIGENT_TUNING = 'intelligent_tuning';
export const METRIC_TARGETS = 'intelligent_tuning.metric_targets';

/** The metric targets that change a parameter the agent tunes, and that parameter. */
const TARGET_PARAMETERS: Readonly<Record<string, string>> = {
  'storage-checkpoint_completion_target': 'checkpoint_completion_target',
  'storage-min_wal_size': 'min_wal_size',
  'storage-max_wal_size': 'max_wal_size',
  'storage-bgwriter_delay': 'bgwriter_delay',
};

export interface IntelligentTuning {
  /** intelligent_tuning is on (whatever its targets). */
  on: boolean;
  /** The parameters Azure changes itself now, in TARGET_PARAMETERS' order. */
  parameters: string[];
  /** "intelligent_tuning = on, intelligent_tuning.metric_targets = all", for messages. */
  setting: string;
}

const isOn = (value: string | undefined): boolean => ['on', 'true', '1', 'yes'].includes((value ?? '').trim().toLowerCase());

/** What Azure's intelligent tuning does on this server, from its server parameters (a server
 * without them, PostgreSQL 18 for one, has none). */
export function intelligentTuningOf(params: ReadonlyMap<string, ServerParameter>): IntelligentTuning {
  const enabled = params.get(INTELLIGENT_TUNING)?.value;
  const targetsValue = params.get(METRIC_TARGETS)?.value ?? 'none';
  const setting = `${INTELLIGENT_TUNING} = ${enabled ?? 'absent'}, ${METRIC_TARGETS} = ${targetsValue}`;
  if (!isOn(enabled)) return { on: false, parameters: [], setting };
  const targets = targetsValue
    .split(',')
    .map((t) => t.trim().toLowerCase())
    .filter(Boolean);
  if (targets.length === 0 || targets.includes('none')) return { on: true, parameters: [], setting };
  const all = targets.includes('all');
  const parameters = Object.entries(TARGET_PARAMETERS)
    .filter(([target]) => all || targets.includes(target))
    .map(([, parameter]) => parameter);
  return { on: true, parameters, setting };
}

/** The protocol's bound on a setting's `unwritable` reason (SettingSchema). */
const REASON_MAX = 300;

/** Why the agent leaves a parameter alone: one line, cut to the protocol's bound (a long
 * metric_targets list could pass it, and the report would then be refused). */
export function azureTunesReason(tuning: IntelligentTuning): string {
  const reason = `changed by Azure's intelligent tuning on this server (${tuning.setting}): left to Azure, not tuned by the agent`;
  return reason.length > REASON_MAX ? `${reason.slice(0, REASON_MAX - 1)}…` : reason;
}

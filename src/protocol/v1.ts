// Protocol v1 between tuner-agent and the tuning service. The agent and the service never import
// each other; what they share is this protocol (and report.ts), and the pure libraries both
// need to mean the same thing: src/knobs (a configuration is valid or not), src/measure (how a
// window is measured) and src/postgres (what a connection URL means).
// JSON over HTTP(S); `Authorization: Bearer <api_key>`; the database id in the path; bodies may
// be gzip-encoded (`Content-Encoding: gzip`). Every body is validated with these schemas on the
// side that receives it. Errors are `{ "error": { "code", "message" } }` with a 4xx/5xx status.
import { z } from 'zod';
import { PLAN_COMMAND_LIMITS, PlanAnswerSchema, ThresholdParameterSchema } from './plans.ts';
import { MetricsReportSchema } from './report.ts';

export const PROTOCOL_VERSION = 1;
export const API_PREFIX = '/api/v1';

/** Largest request body the service accepts, after decompression. */
export const MAX_BODY_BYTES = 1024 * 1024;
/** Deepest nesting of a request's JSON the service accepts: far deeper than any body of the
 * protocol or the people's API (a report nests 5 levels). */
export const MAX_JSON_DEPTH = 32;
/** Most array items and object members, all levels together, in a request's JSON: a report at
 * every limit of the protocol (500 statements, 200 databases, settings and target metrics, 100
 * events) holds fewer than 20,000. */
export const MAX_JSON_ELEMENTS = 100_000;

/** A report interval's bounds in seconds, wherever one is set or sent: the agent's --interval, the
 * service's default and each database's own, and the service's answer to a start or a report. */
export const REPORT_INTERVAL_SECONDS = { min: 1, max: 3600 } as const;
/** Reports an agent keeps while the service cannot take them; older ones are dropped. */
export const MAX_QUEUED_REPORTS = 120;
const reportIntervalSeconds = z.number().int().min(REPORT_INTERVAL_SECONDS.min).max(REPORT_INTERVAL_SECONDS.max);

export const routes = {
  agentStart: (databaseId: string) => `${API_PREFIX}/databases/${encodeURIComponent(databaseId)}/agent/start`,
  agentStop: (databaseId: string) => `${API_PREFIX}/databases/${encodeURIComponent(databaseId)}/agent/stop`,
  agentCheck: (databaseId: string) => `${API_PREFIX}/databases/${encodeURIComponent(databaseId)}/agent/check`,
  report: (databaseId: string) => `${API_PREFIX}/databases/${encodeURIComponent(databaseId)}/reports`,
  ack: (databaseId: string, commandId: string) =>
    `${API_PREFIX}/databases/${encodeURIComponent(databaseId)}/commands/${encodeURIComponent(commandId)}/ack`,
} as const;

/** Where the agent applies settings (the agent's target flag without the dashes), e.g. `local`,
 * `managed-a`. The protocol fixes the spelling only: which kinds exist is the targets' registry's
 * (src/agent/targets/registry.ts), which the agent and the service check where a kind matters (a
 * new database's target; an agent's target must be its database's), so that a new target needs
 * no protocol change. */
export const TARGET_KIND_PATTERN = /^[a-z][a-z0-9-]{0,39}$/;
export const TargetKindSchema = z.string().regex(TARGET_KIND_PATTERN, 'expected a target kind such as local or managed-a');
export type TargetKind = z.infer<typeof TargetKindSchema>;

/** reload-only: only settings that take effect on a configuration reload; restart: all. */
export const TuningModeSchema = z.enum(['reload-only', 'restart']);
export type TuningMode = z.infer<typeof TuningModeSchema>;
/** The mode a change may use: restart only when restarts are allowed (postgresql.allow_restart,
 * narrowed by the command or the target). The one place the two words are chosen between. */
export const tuningModeOf = (allowRestart: boolean): TuningMode => (allowRestart ? 'restart' : 'reload-only');
export const TUNING_MODES: readonly TuningMode[] = TuningModeSchema.options;

const shortText = z.string().max(500);
const paramName = z.string().regex(/^[a-z_][a-z0-9_.]{0,62}$/);
/** A parameter value as pg_settings shows it (a number in the parameter's unit, or a word). */
const settingValue = z.string().max(200);
const id = z
  .string()
  .min(1)
  .max(100)
  .regex(/^[A-Za-z0-9._:-]+$/);

export const SettingSchema = z.strictObject({
  name: paramName,
  setting: settingValue,
  unit: z.string().max(20).nullable(),
  context: z.string().max(40),
  source: z.string().max(60).nullable(),
  pendingRestart: z.boolean(),
  /** Why the target's management interface will not write it (read-only on Cloud B, not
   * modifiable in the parameter group on Cloud A), so the service never proposes it; absent when
   * it can, and from agents older than this field. */
  unwritable: z.string().min(1).max(300).optional(),
});

export const SystemInfoSchema = z.strictObject({
  serverVersion: shortText,
  serverVersionNum: z.number().int().positive(),
  machine: z
    .strictObject({
      memoryBytes: z.number().int().positive(),
      vcpus: z.number().int().positive().max(4096),
      source: shortText,
    })
    .nullable(),
  /** The catalog's parameters as the server has them now. */
  settings: z.array(SettingSchema).max(200),
  /** Why changes cannot be applied (for example a `default.*` parameter group), or null. */
  applyBlockedReason: shortText.nullable(),
  /** postgresql.include_plans: the agent answers plan commands (absent from older agents: off). */
  includePlans: z.boolean().optional(),
  /** The preflight's failed and warned lines when the agent started (the same checks as
   * `tuner-agent --check`); absent from agents older than this field. */
  preflight: z
    .array(z.strictObject({ status: z.enum(['fail', 'warn']), name: shortText, detail: shortText, fix: shortText.optional() }))
    .max(50)
    .optional(),
});

export const AgentStartRequestSchema = z.strictObject({
  agentVersion: z.string().max(40),
  protocolVersion: z.literal(PROTOCOL_VERSION),
  target: TargetKindSchema,
  /** e.g. "local 127.0.0.1:5432/postgres"; the agent's own name for its database. */
  targetIdentity: shortText,
  allowRestart: z.boolean(),
  mode: TuningModeSchema,
  includeQueries: z.boolean(),
  host: z.strictObject({ hostname: z.string().max(255), pid: z.number().int().positive() }),
  system: SystemInfoSchema,
  /** The lease this agent's directory held before (kept next to its journal): an agent restarted
   * after a crash takes its own lease back at once, while a second agent is still refused. */
  resumeLeaseId: id.optional(),
});

export const AgentStartResponseSchema = z.strictObject({
  leaseId: id,
  /** The lease lapses unless a report or a new start renews it before then. */
  leaseExpiresAt: z.iso.datetime({ offset: true }),
  reportIntervalSeconds,
});

export const AgentStopRequestSchema = z.strictObject({ leaseId: id });

/** The preflight's question: are this key and database id accepted, for this target? Nothing changes. */
export const AgentCheckRequestSchema = z.strictObject({
  protocolVersion: z.literal(PROTOCOL_VERSION),
  target: TargetKindSchema,
});

export const AgentCheckResponseSchema = z.strictObject({
  /** The target the database was set up for; an agent of another target would be refused at start. */
  target: TargetKindSchema,
});

export const AgentEventSchema = z.strictObject({
  at: z.iso.datetime({ offset: true }),
  level: z.enum(['info', 'warn', 'error']),
  /** A stable code such as `recovered`, `guardrail_breach`, `collect_failed`. */
  code: z
    .string()
    .max(60)
    .regex(/^[a-z_]+$/),
  message: z.string().max(2000),
  /** The command the event is about, e.g. the trial a guardrail reverted. */
  commandId: id.optional(),
});

/** How an apply's first error begins when the environment, not the configuration, made it fail
 * (a Patroni switchover or a member's restart while it was applied): the service measures the
 * configuration again rather than counting the failure against it. */
export const ENVIRONMENT_CAUSE = 'environment:';

/** How a `guardrail_breach` event's message begins when the environment, not the trial's
 * configuration, ended the trial (a Patroni failover): the service marks its window contaminated
 * rather than failed, and the trial may be tried again. */
export const ENVIRONMENT_BREACH = `guardrail: ${ENVIRONMENT_CAUSE}`;

/** A machine-level measurement from the target: the canonical `memory_available_bytes`,
 * `memory_total_bytes` and `cpu_percent` when known (guardrails read these), and the provider's
 * own series as `<source>:<name>`, e.g. `cloudwatch:ReadIOPS`. */
export const TargetMetricSchema = z.strictObject({
  name: z.string().regex(/^[A-Za-z][A-Za-z0-9_.:/-]{0,99}$/),
  value: z.number().finite(),
  unit: z.string().max(40),
  at: z.iso.datetime({ offset: true }),
  source: z.string().max(40),
});

export const ReportRequestSchema = z.strictObject({
  leaseId: id,
  /** Increases by one per report of this lease, so the service can see gaps; each start (a resumed
   * lease too) begins a new sequence. A report sent again under the same seq is acknowledged and
   * not stored twice; a seq below the lease's last one is refused (409 `report_out_of_order`). */
  seq: z.number().int().nonnegative(),
  /** When the report was sent, by the agent's clock; refused when further from the service's clock
   * than REPORT_CLOCK_TOLERANCE allows. */
  sentAt: z.iso.datetime({ offset: true }),
  /** Null when collection failed in this interval (an event says why). */
  metrics: MetricsReportSchema.nullable(),
  /** The catalog's parameters as the server has them now. */
  settings: z.array(SettingSchema).max(200),
  targetMetrics: z.array(TargetMetricSchema).max(200),
  events: z.array(AgentEventSchema).max(100),
});

/** What the service asks of the agent. The agent validates values against its own catalog and
 * bounds whatever the service says, and acknowledges every command with its outcome. */
export const CommandSchema = z.discriminatedUnion('kind', [
  z.strictObject({
    id,
    kind: z.literal('apply'),
    /** Parameter → value (pg_settings unit, or with a unit: "64MB"). */
    values: z.record(paramName, z.union([z.string().max(200), z.number()])),
    /** The agent may restart the server to apply these (only in restart mode). */
    allowRestart: z.boolean(),
    /** On success this becomes the agent's known-good configuration (an approved one); a trial
     * configuration is not kept, and the agent returns to known-good on its own when it must. */
    keep: z.boolean(),
  }),
  z.strictObject({ id, kind: z.literal('revert'), to: z.enum(['baseline', 'known-good']) }),
  /** Ask the planner, change nothing: the agent plans its heaviest statements under each
   * candidate's values (SET LOCAL in a read-only transaction it rolls back) and, for each
   * threshold, finds by bisection the smallest value between low and high that flips a heavy
   * statement's plan. Answered in the acknowledgement's `plans`; refused when the agent's
   * postgresql.include_plans is off. */
  z.strictObject({
    id,
    kind: z.literal('plan'),
    candidates: z
      .array(z.strictObject({ values: z.record(paramName, z.union([z.string().max(200), z.number()])) }))
      .max(PLAN_COMMAND_LIMITS.candidates),
    thresholds: z
      .array(z.strictObject({ name: ThresholdParameterSchema, low: z.number().nonnegative(), high: z.number().nonnegative() }))
      .max(PLAN_COMMAND_LIMITS.thresholds)
      .optional(),
  }),
]);
/** Every kind of command, read from the schema (for metrics that show each one from the start). */
export const COMMAND_KINDS: readonly z.infer<typeof CommandSchema>['kind'][] = CommandSchema.options.map(
  (option) => option.shape.kind.value,
);

/** How far a report's `sentAt` may be from the service's clock. Ahead: the clocks' offset only.
 * Behind: as old as the agent's queue can hold a report (its longest, at the longest interval),
 * for agents that stamp a report when they collect it rather than when they send it. */
export const REPORT_CLOCK_TOLERANCE = {
  aheadSeconds: 5 * 60,
  behindSeconds: MAX_QUEUED_REPORTS * REPORT_INTERVAL_SECONDS.max,
} as const;

export const ReportResponseSchema = z.strictObject({
  nextReportInSeconds: reportIntervalSeconds,
  leaseExpiresAt: z.iso.datetime({ offset: true }),
  /** Null means hold: keep the configuration as it is. */
  command: CommandSchema.nullable(),
});

/** How a command ended, as the agent acknowledges it. */
const CommandOutcomeSchema = z.enum(['applied', 'refused', 'failed']);
export const COMMAND_OUTCOMES: readonly z.infer<typeof CommandOutcomeSchema>[] = CommandOutcomeSchema.options;

export const CommandAckRequestSchema = z.strictObject({
  leaseId: id,
  status: CommandOutcomeSchema,
  /** The values read back from pg_settings after the command. */
  effective: z.record(paramName, settingValue),
  errors: z.array(z.string().max(2000)).max(100),
  restarted: z.boolean(),
  /** The previous values were put back after a failure. */
  restored: z.boolean(),
  /** A plan command's answer (src/protocol/plans.ts: fingerprints and costs, never a literal). */
  plans: PlanAnswerSchema.optional(),
});

export const ErrorCodeSchema = z.enum([
  'bad_request',
  'unauthorized',
  'forbidden',
  'not_found',
  'agent_conflict',
  'lease_expired',
  'report_out_of_order',
  'conflict',
  'payload_too_large',
  'unsupported_media_type',
  'rate_limited',
  'internal',
]);

export const ErrorResponseSchema = z.strictObject({
  error: z.strictObject({ code: ErrorCodeSchema, message: z.string() }),
});

export type Setting = z.infer<typeof SettingSchema>;
export type SystemInfo = z.infer<typeof SystemInfoSchema>;
export type AgentStartRequest = z.infer<typeof AgentStartRequestSchema>;
export type AgentStartResponse = z.infer<typeof AgentStartResponseSchema>;
export type AgentStopRequest = z.infer<typeof AgentStopRequestSchema>;
export type AgentCheckRequest = z.infer<typeof AgentCheckRequestSchema>;
export type AgentCheckResponse = z.infer<typeof AgentCheckResponseSchema>;
export type AgentEvent = z.infer<typeof AgentEventSchema>;
export type TargetMetric = z.infer<typeof TargetMetricSchema>;
export type ReportRequest = z.infer<typeof ReportRequestSchema>;
export type ReportResponse = z.infer<typeof ReportResponseSchema>;
export type Command = z.infer<typeof CommandSchema>;
export type CommandAckRequest = z.infer<typeof CommandAckRequestSchema>;
export type ErrorCode = z.infer<typeof ErrorCodeSchema>;
export type ErrorResponse = z.infer<typeof ErrorResponseSchema>;

/** An error that carries a code of the error body (`{ error: { code, message } }`): what the
 * service answers with, and what the agent learns from an answer. */
export class CodedError<Code extends string = ErrorCode> extends Error {
  readonly code: Code;
  constructor(code: Code, message: string) {
    super(message);
    this.code = code;
  }
}

// The advice in the people's API (GET /api/manage/databases/{id}/advice, docs/service.md): zod
// schemas, so that the shape is written once, checked in the tests, and readable by clients.
import { z } from 'zod';
import { TuningModeSchema } from '../../protocol/v1.ts';
import type { AdviceAnswer } from './queries.ts';

const time = z.iso.datetime({ offset: true });
const UNITS = ['bytes', 'bytes/min', 'ratio', 'ms', 'count', '1/s'] as const;
const FigureSchema = z.strictObject({ name: z.string(), value: z.number(), unit: z.enum(UNITS) });

export const AdviceItemViewSchema = z.strictObject({
  /** What the diagnosis found: temp-files, jit-compilation, wal-checkpoints, buffer-misses. */
  finding: z.enum(['temp-files', 'jit-compilation', 'wal-checkpoints', 'buffer-misses']),
  /** The diagnosis' sentence: the evidence, then the change. */
  reason: z.string(),
  changes: z.array(
    z.strictObject({
      parameter: z.string(),
      direction: z.enum(['raise', 'lower', 'set']),
      from: z.string(),
      to: z.string(),
      /** In pg_settings units. */
      value: z.union([z.number(), z.string()]),
      restart: z.boolean(),
    }),
  ),
  evidence: z.array(FigureSchema),
  /** The statements behind it: texts as stored (redacted), null when the agent sends none. */
  statements: z.array(z.strictObject({ queryId: z.string(), calls: z.number(), figure: FigureSchema, text: z.string().nullable() })),
});

export const AdviceViewSchema = z.strictObject({
  state: z.enum(['advice', 'nothing', 'session_active', 'no_reports', 'no_space']),
  message: z.string(),
  items: z.array(AdviceItemViewSchema),
  window: z.strictObject({ from: time, to: time, reports: z.number().int(), seconds: z.number() }).nullable(),
  /** POST …/tuning-sessions with {"fromAdvice": true, "mode": sessionMode} starts a session seeded with it. */
  sessionMode: TuningModeSchema,
});

export type AdviceView = z.infer<typeof AdviceViewSchema>;

export function adviceView(answer: AdviceAnswer): AdviceView {
  return {
    state: answer.state,
    message: answer.message,
    items: answer.items,
    window: answer.window && {
      from: answer.window.from.toISOString(),
      to: answer.window.to.toISOString(),
      reports: answer.window.reports,
      seconds: answer.window.seconds,
    },
    sessionMode: answer.sessionMode,
  };
}

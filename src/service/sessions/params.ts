// What people choose when they start a tuning session, with the defaults for a production
// database: reload-only, 30 iterations, 10-minute windows after a 1-minute warm-up, and nothing
// kept without a person's approval. The JSON API and the dashboard's form share these rules.
import { z } from 'zod';
import { TuningModeSchema } from '../../protocol/v1.ts';

export const SESSION_LIMITS = {
  maxIterations: 200,
  /** Shorter windows are allowed for demos and tests, and are noisy: see docs/service.md. */
  minWindowSeconds: 2,
  /** Below this, the dashboard warns that the measurement is noisy. */
  noisyBelowSeconds: 30,
  maxWindowSeconds: 3600,
  maxWarmupSeconds: 3600,
  maxSeed: 2_147_483_647,
} as const;

const whole = (what: string) => z.number({ error: `expected a whole number of ${what}` }).int(`expected a whole number of ${what}`);

export const StartSessionInputSchema = z.strictObject({
  mode: TuningModeSchema.default('reload-only'),
  iterations: whole('iterations').min(1, 'expected at least 1 iteration').max(SESSION_LIMITS.maxIterations, `expected at most ${SESSION_LIMITS.maxIterations} iterations`).default(30),
  windowSeconds: whole('seconds')
    .min(SESSION_LIMITS.minWindowSeconds, `expected at least ${SESSION_LIMITS.minWindowSeconds} seconds (windows under ${SESSION_LIMITS.noisyBelowSeconds} s are noisy: for demos and tests)`)
    .max(SESSION_LIMITS.maxWindowSeconds, `expected at most ${SESSION_LIMITS.maxWindowSeconds} seconds`)
    .default(600),
  warmupSeconds: whole('seconds').min(0, 'expected 0 or more seconds').max(SESSION_LIMITS.maxWarmupSeconds, `expected at most ${SESSION_LIMITS.maxWarmupSeconds} seconds`).default(60),
  /** Random when absent; stored, so a session can be replayed. */
  seed: whole('').min(0, 'expected a seed from 0').max(SESSION_LIMITS.maxSeed, `expected a seed up to ${SESSION_LIMITS.maxSeed}`).optional(),
  requireApproval: z.boolean({ error: 'expected true or false' }).default(true),
});

export type StartSessionInput = z.infer<typeof StartSessionInputSchema>;

/** The dashboard's form, as the JSON API's body: empty fields take the defaults. */
export function startInputFromForm(form: Record<string, string>): Record<string, unknown> {
  const number = (name: string) => {
    const raw = (form[name] ?? '').trim();
    return raw === '' ? undefined : Number(raw);
  };
  const raw: Record<string, unknown> = {
    mode: form['mode'] || undefined,
    iterations: number('iterations'),
    windowSeconds: number('windowSeconds'),
    warmupSeconds: number('warmupSeconds'),
    seed: number('seed'),
    requireApproval: form['requireApproval'] === 'true',
  };
  return Object.fromEntries(Object.entries(raw).filter(([, v]) => v !== undefined));
}

/** How often the agent reports while a session measures: about six reports a window. */
export function sessionReportInterval(windowSeconds: number): number {
  return Math.max(1, Math.floor(windowSeconds / 6));
}

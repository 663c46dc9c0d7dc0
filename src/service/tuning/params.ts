// What people choose when they start a tuning session, with the defaults for a production
// database, sized for a working day (docs/service.md, "A session in a working day"): reload-only,
// 10 trials, windows of 10 minutes that shrink to as little as 5 once the noise of one window is
// measured (window-length.ts), after a 30-second warm-up, a best recommended only when 3 to 5 A/B
// rounds show a gain of at least 5 % at 95 % confidence, and nothing kept without a person's
// approval. The JSON API and the dashboard's form share these rules.
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
  /** The design's minimum: fewer rounds give an interval too wide to trust (t with 1 dof). */
  minAbRounds: 3,
  maxAbRounds: 50,
  maxMinEffectPercent: 50,
  minConfidencePercent: 50,
  maxConfidencePercent: 99.9,
} as const;

/** The defaults, sized for a working day (docs/service.md, "A session in a working day"). The
 * dashboard's form shows the same. */
export const SESSION_DEFAULTS = {
  iterations: 10,
  windowSeconds: 600,
  /** The shortest window by default: 5 minutes still spans most workloads' own rhythm. */
  windowMinSeconds: 300,
  warmupSeconds: 30,
  abRoundsMin: 3,
  abRoundsMax: 5,
  minEffectPercent: 5,
  confidencePercent: 95,
} as const;

const whole = (what: string) => z.number({ error: `expected a whole number of ${what}` }).int(`expected a whole number of ${what}`);

const rounds = () =>
  whole('rounds')
    .min(SESSION_LIMITS.minAbRounds, `expected at least ${SESSION_LIMITS.minAbRounds} rounds`)
    .max(SESSION_LIMITS.maxAbRounds, `expected at most ${SESSION_LIMITS.maxAbRounds} rounds`);
const percent = () => z.number({ error: 'expected a number of percent' });

export const StartTuningSessionInputSchema = z
  .strictObject({
    mode: TuningModeSchema.default('reload-only'),
    iterations: whole('iterations')
      .min(1, 'expected at least 1 iteration')
      .max(SESSION_LIMITS.maxIterations, `expected at most ${SESSION_LIMITS.maxIterations} iterations`)
      .default(SESSION_DEFAULTS.iterations),
    windowSeconds: whole('seconds')
      .min(
        SESSION_LIMITS.minWindowSeconds,
        `expected at least ${SESSION_LIMITS.minWindowSeconds} seconds (windows under ${SESSION_LIMITS.noisyBelowSeconds} s are noisy: for demos and tests)`,
      )
      .max(SESSION_LIMITS.maxWindowSeconds, `expected at most ${SESSION_LIMITS.maxWindowSeconds} seconds`)
      .default(SESSION_DEFAULTS.windowSeconds),
    /** The shortest window the session may shrink to (window-length.ts); absent: the smaller of
     * windowSeconds and SESSION_DEFAULTS.windowMinSeconds. Equal to windowSeconds: fixed windows. */
    windowMinSeconds: whole('seconds')
      .min(SESSION_LIMITS.minWindowSeconds, `expected at least ${SESSION_LIMITS.minWindowSeconds} seconds`)
      .max(SESSION_LIMITS.maxWindowSeconds, `expected at most ${SESSION_LIMITS.maxWindowSeconds} seconds`)
      .optional(),
    warmupSeconds: whole('seconds')
      .min(0, 'expected 0 or more seconds')
      .max(SESSION_LIMITS.maxWarmupSeconds, `expected at most ${SESSION_LIMITS.maxWarmupSeconds} seconds`)
      .default(SESSION_DEFAULTS.warmupSeconds),
    abRoundsMin: rounds().default(SESSION_DEFAULTS.abRoundsMin),
    abRoundsMax: rounds().default(SESSION_DEFAULTS.abRoundsMax),
    minEffectPercent: percent()
      .min(0, 'expected 0 % or more')
      .max(SESSION_LIMITS.maxMinEffectPercent, `expected at most ${SESSION_LIMITS.maxMinEffectPercent} %`)
      .default(SESSION_DEFAULTS.minEffectPercent),
    confidencePercent: percent()
      .min(SESSION_LIMITS.minConfidencePercent, `expected at least ${SESSION_LIMITS.minConfidencePercent} %`)
      .max(SESSION_LIMITS.maxConfidencePercent, `expected at most ${SESSION_LIMITS.maxConfidencePercent} %`)
      .default(SESSION_DEFAULTS.confidencePercent),
    /** Random when absent; stored, so a session can be replayed. */
    seed: whole('')
      .min(0, 'expected a seed from 0')
      .max(SESSION_LIMITS.maxSeed, `expected a seed up to ${SESSION_LIMITS.maxSeed}`)
      .optional(),
    requireApproval: z.boolean({ error: 'expected true or false' }).default(true),
    /** Verify a big win as soon as it is seen, and go on from it (steps.ts). */
    verifyEarly: z.boolean({ error: 'expected true or false' }).default(true),
    statementRegressions: z
      .enum(['approve', 'refuse'], { error: "expected 'approve' (name it and wait for approval) or 'refuse'" })
      .default('approve'),
    /** Tune only these parameters (names of the catalog the session could tune); absent: all of them. */
    knobs: z
      .array(
        z.string({ error: 'expected parameter names' }).regex(/^[a-z_][a-z0-9_]{0,62}$/, 'expected a parameter name such as work_mem'),
        {
          error: 'expected a list of parameter names',
        },
      )
      .min(1, 'expected at least one parameter (or leave knobs out: all of them)')
      .max(100, 'expected at most 100 parameters')
      .optional(),
    /** Ask the agent's planner about each candidate before it goes live (engine/planning.ts);
     * absent: on when the agent runs with postgresql.include_plans. */
    planAware: z.boolean({ error: 'expected true or false' }).optional(),
    /** Start from the database's advice (GET …/advice): the session's first trials are what its
     * diagnoses argue for; refused when there is none. */
    fromAdvice: z.boolean({ error: 'expected true or false' }).optional(),
  })
  .refine((input) => input.abRoundsMax >= input.abRoundsMin, {
    path: ['abRoundsMax'],
    message: 'expected at least as many rounds as abRoundsMin',
  })
  .refine((input) => input.windowMinSeconds === undefined || input.windowMinSeconds <= input.windowSeconds, {
    path: ['windowMinSeconds'],
    message: 'expected at most windowSeconds (the longest window)',
  })
  .transform(({ windowMinSeconds, ...input }) => ({
    ...input,
    windowMinSeconds: windowMinSeconds ?? Math.min(input.windowSeconds, SESSION_DEFAULTS.windowMinSeconds),
  }));

export type StartTuningSessionInput = z.infer<typeof StartTuningSessionInputSchema>;

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
    windowMinSeconds: number('windowMinSeconds'),
    warmupSeconds: number('warmupSeconds'),
    abRoundsMin: number('abRoundsMin'),
    abRoundsMax: number('abRoundsMax'),
    minEffectPercent: number('minEffectPercent'),
    confidencePercent: number('confidencePercent'),
    seed: number('seed'),
    requireApproval: form['requireApproval'] === 'true',
    verifyEarly: form['verifyEarly'] === 'true',
    statementRegressions: form['statementRegressions'] || undefined,
    fromAdvice: form['fromAdvice'] === 'true' || undefined,
    // '' (or absent): the default, on when the agent asks the planner.
    planAware: form['planAware'] === 'true' ? true : form['planAware'] === 'false' ? false : undefined,
  };
  return Object.fromEntries(Object.entries(raw).filter(([, v]) => v !== undefined));
}

/** How often the agent reports while a session measures: about six reports a window, and at
 * least once a minute (the report after a window's end closes it: the wait costs every window). */
export function sessionReportInterval(windowSeconds: number): number {
  return Math.max(1, Math.min(60, Math.floor(windowSeconds / 6)));
}

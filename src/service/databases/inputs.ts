// What people may send about databases, for the JSON API and the HTML forms alike. The agent is the authority on
// what is safe to apply; the service only checks the shape (names that look like PostgreSQL
// parameter names, values that are strings or numbers) and sizes.
import { z } from 'zod';
import { TARGETS, type TargetRegistry } from '../../agent/targets/registry.ts';
import { CommandSchema, REPORT_INTERVAL_SECONDS, TargetKindSchema } from '../../protocol/v1.ts';

/** The protocol's own parameter-name and value rules, taken from its apply command. */
const applyValues = CommandSchema.options[0].shape.values;

/** A new database: its name, and a target among the registry's kinds. */
export function newDatabaseInputSchema(registry: TargetRegistry) {
  return z.strictObject({
    name: z.string().trim().min(1, 'expected a name for the database').max(100, 'expected at most 100 characters'),
    target: TargetKindSchema.refine((kind) => registry.has(kind), { error: `expected one of ${registry.kinds.join(', ')}` }),
  });
}

export const NewDatabaseInputSchema = newDatabaseInputSchema(TARGETS);

export const NewApiKeyInputSchema = z.strictObject({
  label: z.string().trim().max(100, 'expected at most 100 characters').default(''),
});

export const ReportIntervalInputSchema = z.strictObject({
  /** Null returns the database to the service-wide default. */
  reportIntervalSeconds: z
    .number()
    .int('expected a whole number of seconds')
    .min(REPORT_INTERVAL_SECONDS.min)
    .max(REPORT_INTERVAL_SECONDS.max)
    .nullable(),
});

export const CommandInputSchema = z.discriminatedUnion('kind', [
  z.strictObject({
    kind: z.literal('apply'),
    values: applyValues
      .refine((v) => Object.keys(v).length > 0, 'expected at least one parameter')
      .refine((v) => Object.keys(v).length <= 100, 'expected at most 100 parameters'),
    allowRestart: z.boolean().default(false),
    keep: z.boolean().default(false),
  }),
  z.strictObject({ kind: z.literal('revert'), to: z.enum(['baseline', 'known-good']) }),
]);

export const DatabaseIdSchema = z.uuid({ error: 'expected a database id (a UUID, as on the agent setup page)' });
export const UuidSchema = z.uuid({ error: 'expected a UUID' });

export type NewDatabaseInput = z.infer<typeof NewDatabaseInputSchema>;
export type CommandInput = z.infer<typeof CommandInputSchema>;

/** `work_mem=64MB` lines (the dashboard's form) into apply values; numbers stay strings, as in pg_settings. */
export function parseValueLines(text: string): Record<string, string> {
  const values = Object.create(null) as Record<string, string>;
  for (const line of text.split(/\r?\n/)) {
    const trimmed = line.trim();
    if (trimmed === '' || trimmed.startsWith('#')) continue;
    const eq = trimmed.indexOf('=');
    if (eq <= 0) throw new Error(`"${trimmed.slice(0, 80)}": expected NAME=VALUE, e.g. work_mem=64MB`);
    const name = trimmed.slice(0, eq).trim();
    if (name === '__proto__') throw new Error('"__proto__" is not a parameter name');
    values[name] = trimmed
      .slice(eq + 1)
      .trim()
      .replace(/^'(.*)'$/, '$1');
  }
  return values;
}

// What a person asks of the fleet: the sort, a state to show only, and a piece of the name. The
// same words in the page's GET parameters and in the people's API's query string.
import { z } from 'zod';
import { FLEET_FLAGS } from './flags.ts';

/** The state filter: a flag (flags.ts), `attention` (any that needs a person) or `all`. */
export const FLEET_STATE_FILTERS = ['all', 'attention', ...FLEET_FLAGS] as const;
export const FLEET_SORTS = ['attention', 'name', 'last_report', 'gain'] as const;

const DEFAULTS = { sort: 'attention', state: 'all', q: '', page: 1 } as const;

/** Databases on a page of the fleet. */
export const FLEET_PAGE_SIZE = 100;

/** Strict (the API answers 400 to a sort or state it does not know). */
export const FleetQuerySchema = z.strictObject({
  sort: z.enum(FLEET_SORTS).default(DEFAULTS.sort),
  state: z.enum(FLEET_STATE_FILTERS).default(DEFAULTS.state),
  q: z.string().trim().max(100).default(DEFAULTS.q),
  /** From 1; past the last page, a page with no database. */
  page: z.coerce.number().int().min(1).max(1_000_000).default(DEFAULTS.page),
});
export type FleetQuery = z.infer<typeof FleetQuerySchema>;

/** The page's GET parameters, forgiving: what it does not understand falls back to the default
 * (a link from an older page still opens the fleet), and unknown parameters are ignored. */
export function fleetQueryFromPage(params: URLSearchParams | Record<string, unknown>): FleetQuery {
  const get = (key: keyof FleetQuery): unknown => (params instanceof URLSearchParams ? (params.get(key) ?? undefined) : params[key]);
  const field = <K extends keyof FleetQuery>(key: K): FleetQuery[K] => {
    const parsed = FleetQuerySchema.shape[key].safeParse(get(key));
    return (parsed.success ? parsed.data : DEFAULTS[key]) as FleetQuery[K];
  };
  return { sort: field('sort'), state: field('state'), q: field('q'), page: field('page') };
}

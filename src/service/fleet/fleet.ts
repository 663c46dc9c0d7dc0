// The fleet as a person asks for it: the account's databases read in one statement, then
// filtered and sorted here (pure, attention.ts). The page and the people's API both call this.
import type { User } from '../people/store.ts';
import { filterFleet, sortFleet } from './attention.ts';
import type { FleetQuery } from './query.ts';
import type { FleetEntry, FleetStore } from './store.ts';

export interface FleetAnswer {
  /** Every database of the person's account (the counts are made from these). */
  all: FleetEntry[];
  /** Those the query keeps, in its order. */
  shown: FleetEntry[];
}

/** What the fleet feature needs: its port. */
export interface FleetDeps {
  stores: { fleet: FleetStore };
}

export async function readFleet(deps: FleetDeps, user: User, query: FleetQuery): Promise<FleetAnswer> {
  const all = await deps.stores.fleet.fleet(user.accountId);
  return { all, shown: sortFleet(filterFleet(all, query), query.sort) };
}

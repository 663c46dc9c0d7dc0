// The fleet as a person asks for it: the organization's counts and one page of its databases,
// filtered and sorted by the storage in one statement (storage/sql-fleet.ts). The page and the
// people's API both call this.
import type { User } from '../people/store.ts';
import { FLEET_PAGE_SIZE, type FleetQuery } from './query.ts';
import type { FleetAnswer, FleetStore } from './store.ts';

export type { FleetAnswer } from './store.ts';

/** What the fleet feature needs: its port. */
export interface FleetDeps {
  stores: { fleet: FleetStore };
}

export async function readFleet(deps: FleetDeps, user: User, query: FleetQuery): Promise<FleetAnswer> {
  return deps.stores.fleet.fleetPage(user.organizationId, query, FLEET_PAGE_SIZE);
}

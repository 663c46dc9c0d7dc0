// The Patroni target's definition: a highly available self-hosted cluster whose configuration
// Patroni keeps in its DCS and applies on every member. The override layer is the dynamic
// configuration's postgresql.parameters, written through Patroni's REST API.
//   the target   target.ts     (api.ts: the REST API; members.ts: each member's pg_settings)
//   writes       write.ts      (PATCH /config, read back on every member, restarts through Patroni)
//   failover     topology.ts   (leader and timeline, replica lag, a member that disagrees)
//   machine      machine.ts    metrics  metrics.ts   preflight  preflight.ts
//   permissions  permissions.ts          `--local` on a member: detect.ts
import type { TargetDefinition } from '../../../target/definition.ts';
import { SELF_HOSTED_CAPABILITIES } from '../self-hosted.ts';
import { patroniSection } from './config.ts';
import { patroniSetup } from './setup.ts';

export const patroniDefinition: TargetDefinition = {
  kinds: {
    patroni: {
      label: 'Patroni cluster (self-hosted, highly available)',
      help: "a Patroni cluster (its dynamic configuration, through Patroni's REST API)",
      createsExtension: "on the leader as a superuser, with pg_stat_statements in the dynamic configuration's shared_preload_libraries",
      // Every member is a self-hosted server: what --local tunes. Restart-only parameters
      // restart the members through Patroni's API (POST /restart, replicas first, then the
      // leader), never with pg_ctl.
      capabilities: SELF_HOSTED_CAPABILITIES,
      setup: patroniSetup,
    },
  },
  config: patroniSection,
  extendedPermissions: false,
  async create(_kind, deps) {
    const [{ createPatroniTarget }, { patroniConfigOf }] = await Promise.all([import('./target.ts'), import('./config.ts')]);
    return createPatroniTarget({ db: deps.db, config: deps.config, patroni: patroniConfigOf(deps.config), log: deps.log });
  },
  /** The grants (the document, SQL) and the REST API's credentials (notes). */
  async permissions({ note }) {
    const { patroniGrantsSql, patroniRestApiNotes } = await import('./permissions.ts');
    note(patroniRestApiNotes());
    return patroniGrantsSql('agent_user');
  },
  peers: (_kind, config) => (patroniSection.of(config).restApiUrls ?? []).map((url) => ({ name: "Patroni's REST API", url })),
};

// The local target's definition: a self-hosted PostgreSQL, tuned through ALTER SYSTEM.
// Its files: target.ts (the Target), write.ts, machine.ts, metrics.ts, preflight.ts,
// permissions.ts.
import type { TargetDefinition } from '../../../target/definition.ts';
import { SELF_HOSTED_CAPABILITIES } from '../self-hosted.ts';
import { localConfig } from './config.ts';
import { localSetup } from './setup.ts';

export const localDefinition: TargetDefinition = {
  kinds: {
    local: {
      label: 'Self-hosted PostgreSQL (local)',
      help: 'a self-hosted PostgreSQL (ALTER SYSTEM)',
      capabilities: SELF_HOSTED_CAPABILITIES,
      setup: localSetup,
    },
  },
  config: localConfig,
  extendedPermissions: false,
  async create(_kind, deps) {
    await (await import('./patroni-member.ts')).refuseOnPatroniMember(deps.db, deps.config.postgresql.connectionUrl);
    return (await import('./target.ts')).createLocalTarget(deps);
  },
  async permissions() {
    return (await import('./permissions.ts')).localGrantsSql('agent_user');
  },
  peers: () => [],
};

// What a self-hosted server allows, whoever writes its configuration (ALTER SYSTEM on one server,
// Patroni's dynamic configuration on every member): every catalog knob, a restart when the agent
// is allowed one, and shared_buffers up to 40 % of memory (no managed service's own reserve).
import type { TargetCapabilities } from '../../target/definition.ts';

export const SELF_HOSTED_CAPABILITIES: TargetCapabilities = {
  restart: { mode: 'allowed' },
  tunes: () => true,
  sharedBuffersMaxFraction: 0.4,
};

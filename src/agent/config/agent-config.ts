// The agent's configuration as loaded (load.ts): the common sections, typed here, and each
// target's own section as its definition read it (src/target/config.ts; the target's config.ts
// reads it back with its section's `of`).
import type { PostgresqlSettings, TargetAgentConfig } from '../../target/config.ts';
import type { GuardThresholds } from './guard-thresholds.ts';

export interface AgentConfig extends TargetAgentConfig {
  postgresql: PostgresqlSettings;
  tuner: {
    serverUrl?: string;
    apiKey?: string;
    databaseId?: string;
    proxyUrl?: string;
    caFile?: string;
    metricsListen?: string;
    debug: boolean;
  };
  /** The guardrails' thresholds: the safe defaults, or stricter ones (looser only if allowed). */
  guardrails: GuardThresholds;
  /** Each target's section, by section name, as its definition's `read` made it. */
  targets: Readonly<Record<string, unknown>>;
}

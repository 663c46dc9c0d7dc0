// --once: two snapshots `intervalSeconds` apart, one report, printed as JSON.
import { setTimeout as sleep } from 'node:timers/promises';
import { buildMetricsReport, createCollector, diffSnapshots } from '../collect/index.ts';
import type { AgentConfig } from '../config/agent-config.ts';
import type { Db } from '../database/db.ts';
import { describeSystem } from '../sending/system.ts';
import type { Target } from '../../target/target.ts';
import { AGENT_VERSION } from '../base/version.ts';

export async function collectOnce(db: Db, target: Target, config: AgentConfig, intervalSeconds: number) {
  const includeQueries = config.postgresql.includeQueries;
  const collector = createCollector(db, { includeQueries });
  const first = await collector.collect();
  await sleep(intervalSeconds * 1000);
  const second = await collector.collect();
  return {
    agentVersion: AGENT_VERSION,
    target: target.kind,
    targetIdentity: target.identity,
    system: await describeSystem(db, target),
    targetMetrics: await target.metrics(),
    metrics: buildMetricsReport(diffSnapshots(first, second), { includeQueries }),
  };
}

// The "cluster + agent" fixture: a throwaway cluster (pg_stat_statements preloaded and created)
// where agent_user has the least-privilege grants of the local target, and the agent.yaml that
// points the real agent at it and at a tuning service.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { localGrantsSql } from '../../src/agent/targets/local/permissions.ts';
import { startCluster, type Cluster, type ClusterOptions } from '../../src/lab/cluster.ts';

/** Gives agent_user the grants the local target needs (`localGrantsSql`, as an operator runs it). */
export async function grantLocalAgent(cluster: Cluster): Promise<void> {
  for (const statement of localGrantsSql('agent_user')
    .split('\n')
    .filter((l) => l.startsWith('GRANT')))
    await cluster.sql(statement);
}

/** A throwaway cluster the local agent can tune. */
export async function startAgentCluster(options: ClusterOptions = {}): Promise<Cluster> {
  const cluster = await startCluster(options);
  try {
    await grantLocalAgent(cluster);
  } catch (error) {
    await cluster.destroy();
    throw error;
  }
  return cluster;
}

export interface LocalAgentConfig {
  cluster: Cluster;
  serverUrl: string;
  apiKey: string;
  databaseId: string;
  includeQueries?: boolean;
  /** postgresql.include_plans: the agent answers plan commands (give agent_user pg_read_all_data too). */
  includePlans?: boolean;
  /** host:port of the agent's own /metrics. */
  metricsListen?: string;
}

/** Writes agent.yaml for the local agent into `dir`; returns `dir`. */
export function writeLocalAgentConfig(dir: string, config: LocalAgentConfig): string {
  const yaml = [
    'postgresql:',
    `  connection_url: ${config.cluster.agentUrl}`,
    ...(config.includeQueries ? ['  include_queries: true'] : []),
    ...(config.includePlans ? ['  include_plans: true'] : []),
    'tuner:',
    `  server_url: ${config.serverUrl}`,
    `  api_key: ${config.apiKey}`,
    `  database_id: ${config.databaseId}`,
    ...(config.metricsListen ? [`  metrics_listen: ${config.metricsListen}`] : []),
    '',
  ];
  writeFileSync(join(dir, 'agent.yaml'), yaml.join('\n'));
  return dir;
}

// The Patroni target's own series: each replica's replication lag behind the leader (bytes of
// WAL, from the leader's pg_stat_replication) and whether it streams; the member count.
import type { TargetMetric } from '../../../protocol/v1.ts';
import type { PatroniApi } from './api.ts';
import type { MemberSessions } from './members.ts';
import { replicaHealth } from './topology.ts';

const NAME_SAFE = /[^A-Za-z0-9_.:/-]/g;

export async function patroniMetrics(api: PatroniApi, sessions: MemberSessions): Promise<TargetMetric[]> {
  let replicas;
  try {
    replicas = await replicaHealth(api, sessions);
  } catch {
    return [];
  }
  const at = new Date().toISOString();
  const metrics: TargetMetric[] = [{ name: 'patroni_replicas', value: replicas.length, unit: 'count', at, source: 'patroni' }];
  for (const r of replicas) {
    const member = r.name.replace(NAME_SAFE, '_').slice(0, 60);
    metrics.push({ name: `patroni_replica_streaming:${member}`, value: r.streaming ? 1 : 0, unit: 'boolean', at, source: 'patroni' });
    if (r.lagBytes !== null && Number.isFinite(r.lagBytes)) {
      metrics.push({ name: `patroni_replica_lag_bytes:${member}`, value: r.lagBytes, unit: 'bytes', at, source: 'patroni' });
    }
  }
  return metrics;
}

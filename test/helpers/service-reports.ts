// Protocol bodies as a real agent sends them, built from the protocol's types: a start request
// with the catalog's settings, and a realistic metrics report with N top statements. Used by the
// service tests and by bench/service-load.ts.
import type { MetricsReport, StatementRow } from '../../src/protocol/report.ts';
import {
  PROTOCOL_VERSION,
  type AgentStartRequest,
  type ReportRequest,
  type Setting,
  type TargetKind,
  type TargetMetric,
} from '../../src/protocol/v1.ts';

export const SAMPLE_SETTINGS: Setting[] = [
  { name: 'work_mem', setting: '4096', unit: 'kB', context: 'user', source: 'default', pendingRestart: false },
  { name: 'random_page_cost', setting: '4', unit: null, context: 'user', source: 'default', pendingRestart: false },
  { name: 'effective_io_concurrency', setting: '1', unit: null, context: 'user', source: 'default', pendingRestart: false },
  { name: 'max_wal_size', setting: '1024', unit: 'MB', context: 'sighup', source: 'default', pendingRestart: false },
  { name: 'min_wal_size', setting: '80', unit: 'MB', context: 'sighup', source: 'default', pendingRestart: false },
  { name: 'checkpoint_completion_target', setting: '0.9', unit: null, context: 'sighup', source: 'default', pendingRestart: false },
  { name: 'default_statistics_target', setting: '100', unit: null, context: 'user', source: 'default', pendingRestart: false },
  { name: 'shared_buffers', setting: '16384', unit: '8kB', context: 'postmaster', source: 'configuration file', pendingRestart: false },
];

export function startRequest(
  options: { target?: TargetKind; hostname?: string; pid?: number; resumeLeaseId?: string } = {},
): AgentStartRequest {
  return {
    agentVersion: '0.1.0',
    protocolVersion: PROTOCOL_VERSION,
    target: options.target ?? 'local',
    targetIdentity: 'local 127.0.0.1:5432/postgres',
    allowRestart: false,
    mode: 'reload-only',
    includeQueries: true,
    host: { hostname: options.hostname ?? 'db-host-1', pid: options.pid ?? 4242 },
    system: {
      serverVersion: '15.20',
      serverVersionNum: 150020,
      machine: { memoryBytes: 8 * 1024 ** 3, vcpus: 2, source: '/proc/meminfo' },
      settings: SAMPLE_SETTINGS,
      applyBlockedReason: null,
    },
    ...(options.resumeLeaseId !== undefined && { resumeLeaseId: options.resumeLeaseId }),
  };
}

const QUERIES = [
  'SELECT abalance FROM pgbench_accounts WHERE aid = $1',
  'UPDATE pgbench_accounts SET abalance = abalance + $1 WHERE aid = $2',
  'UPDATE pgbench_tellers SET tbalance = tbalance + $1 WHERE tid = $2',
  'UPDATE pgbench_branches SET bbalance = bbalance + $1 WHERE bid = $2',
  'INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES ($1, $2, $3, $4, CURRENT_TIMESTAMP)',
  'SELECT o.id, o.total, c.name FROM orders o JOIN customers c ON c.id = o.customer_id WHERE o.created_at > $1 ORDER BY o.created_at DESC LIMIT $2',
];

function statement(i: number, withText: boolean): StatementRow {
  const calls = 5000 - i * 40;
  const mean = 0.05 + (i % 7) * 0.11;
  const row: StatementRow = {
    queryId: String(-4_000_000_000_000_000_000n + BigInt(i) * 7_919_000_000_000n),
    userId: 16384,
    dbId: 5,
    toplevel: true,
    calls,
    plans: 0,
    totalPlanTimeMs: 0,
    totalExecTimeMs: Math.round(calls * mean * 1000) / 1000,
    meanExecTimeMs: Math.round(mean * 1000) / 1000,
    rows: calls,
    sharedBlksHit: calls * 4,
    sharedBlksRead: i,
    sharedBlksDirtied: i % 3,
    sharedBlksWritten: 0,
    tempBlksRead: 0,
    tempBlksWritten: 0,
    blkReadTimeMs: 0,
    blkWriteTimeMs: 0,
    walBytes: calls * 120,
  };
  // As today's agent sends them: without literals, comments empty (the service keeps such a body as sent).
  if (withText) row.text = `${QUERIES[i % QUERIES.length]} /* */`;
  return row;
}

/** A metrics section as the agent's report builder makes it: N top statements, the rest summed. */
export function sampleMetrics(
  options: { topStatements?: number; withText?: boolean; avgQueryRuntimeMs?: number; tps?: number; end?: Date } = {},
): MetricsReport {
  const topN = options.topStatements ?? 100;
  const end = options.end ?? new Date();
  const start = new Date(end.getTime() - 60_000);
  const top = Array.from({ length: topN }, (_, i) => statement(i, options.withText ?? true));
  return {
    version: 1,
    interval: { start: start.toISOString(), end: end.toISOString(), seconds: 60, serverRestarted: false },
    derived: {
      calls: top.reduce((sum, s) => sum + s.calls, 0),
      avgQueryRuntimeMs: options.avgQueryRuntimeMs ?? 0.412,
      weightedQueryRuntimeMs: 0.398,
      weightedCoverage: 0.97,
      tps: options.tps ?? 1234.5,
      cacheHitRatio: 0.9931,
    },
    statements: {
      pgssVersion: '1.10',
      topN,
      activeStatements: topN + 37,
      top,
      other: {
        statements: 37,
        calls: 420,
        plans: 0,
        totalPlanTimeMs: 0,
        totalExecTimeMs: 12.5,
        meanExecTimeMs: 0.03,
        rows: 420,
        sharedBlksHit: 1000,
        sharedBlksRead: 2,
        sharedBlksDirtied: 0,
        sharedBlksWritten: 0,
        tempBlksRead: 0,
        tempBlksWritten: 0,
        blkReadTimeMs: 0,
        blkWriteTimeMs: 0,
        walBytes: 0,
      },
    },
    evictions: { newEntries: 0, reinitializedEntries: 0, evictedEntries: 0, deallocations: 0, statsReset: false },
    database: {
      total: { xactCommit: 74_000, xactRollback: 70, blksHit: 2_900_000, blksRead: 20_000, tempFiles: 0, tempBytes: 0, deadlocks: 0 },
      databases: [
        {
          datname: 'postgres',
          xactCommit: 74_000,
          xactRollback: 70,
          blksHit: 2_900_000,
          blksRead: 20_000,
          tempFiles: 0,
          tempBytes: 0,
          deadlocks: 0,
        },
      ],
    },
    checkpointer: {
      source: 'pg_stat_bgwriter',
      checkpointsTimed: 0,
      checkpointsRequested: 0,
      writeTimeMs: 0,
      syncTimeMs: 0,
      buffersCheckpoint: 0,
      buffersClean: 0,
      maxwrittenClean: 0,
      buffersAlloc: 310,
      buffersBackend: 12,
      buffersBackendFsync: 0,
    },
    wal: { records: 300_000, fpi: 120, bytes: 41_000_000, buffersFull: 0, write: 900, sync: 880, writeTimeMs: null, syncTimeMs: null },
    activity: {
      maxConnections: 100,
      connections: { total: 12, active: 3, idle: 8, idleInTransaction: 1, idleInTransactionAborted: 0, other: 0 },
      activeNotWaiting: 2,
      waitEvents: [{ type: 'Lock', event: 'transactionid', count: 1 }],
    },
  };
}

export function sampleTargetMetrics(at = new Date()): TargetMetric[] {
  return [
    { name: 'memory_total_bytes', value: 8 * 1024 ** 3, unit: 'bytes', at: at.toISOString(), source: 'proc' },
    { name: 'memory_available_bytes', value: 5.5 * 1024 ** 3, unit: 'bytes', at: at.toISOString(), source: 'proc' },
    { name: 'cpu_percent', value: 37.5, unit: 'percent', at: at.toISOString(), source: 'proc' },
  ];
}

export function reportRequest(
  leaseId: string,
  seq: number,
  options: { metrics?: MetricsReport | null; events?: ReportRequest['events'] } = {},
): ReportRequest {
  return {
    leaseId,
    seq,
    sentAt: new Date().toISOString(),
    metrics: options.metrics === undefined ? sampleMetrics({ topStatements: 20 }) : options.metrics,
    settings: SAMPLE_SETTINGS,
    targetMetrics: sampleTargetMetrics(),
    events: options.events ?? [],
  };
}

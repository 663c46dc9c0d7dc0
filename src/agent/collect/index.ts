// Statistics collection for tuner-agent: inputs → snapshots → deltas → the report's metrics section.
//   const collector = createCollector(db, { includeQueries });
//   const prev = await collector.collect(); ...; const cur = await collector.collect();
//   const delta = diffSnapshots(prev, cur);
//   const report = buildMetricsReport(delta, { includeQueries, topN, baselineMix });
export { createCollector, type Collector, type CollectorOptions } from './collector.ts';
export { discoverCapabilities, MissingExtensionError, type Capabilities, type PgssShape, type RelationColumns } from './columns.ts';
export { diffSnapshots } from './delta.ts';
export { averageRuntime, baselineMixFrom, deriveMetrics } from './derive.ts';
export { buildMetricsReport, DEFAULT_TOP_N, type ReportOptions } from './report-builder.ts';
export { statementKey } from '../../protocol/statement.ts';
export type { BaselineMix, Snapshot, SnapshotDelta, StatementDelta, StatementEntry } from './types.ts';

// Where the target is: the DB instance (class, status, engine, parameter group and its apply
// status), and for --managed-a-cluster the cluster and its current writer, found again on every
// call because a failover moves it. What the SDK returns is checked before it is used.
// Without rds:DescribeDBClusters (the spec's policy lacks it) the writer is the instance the
// connection reaches while it is not in recovery (Aurora names it; otherwise the configured
// DATABASE_IDENTIFIER, as the spec defines it); the cluster parameter group is then unknown.
import { DescribeDBClustersCommand, DescribeDBInstancesCommand, type RDSClient } from '@aws-sdk/client-rds';
import { z } from 'zod';
import type { Db } from '../../database/db.ts';
import type { Logger } from '../../base/log.ts';
import { AwsCallError, awsCall, hasCode, isAccessDenied } from './aws.ts';
import type { Capabilities } from './capabilities.ts';
import { GiB } from '../../../knobs/units.ts';

const InstanceSchema = z.object({
  DBInstanceIdentifier: z.string(),
  DBInstanceClass: z.string(),
  DBInstanceStatus: z.string(),
  Engine: z.string(),
  EngineVersion: z.string().optional(),
  DbiResourceId: z.string().optional(),
  PerformanceInsightsEnabled: z.boolean().optional(),
  MultiAZ: z.boolean().optional(),
  DBClusterIdentifier: z.string().optional(),
  AllocatedStorage: z.number().optional(),
  DBParameterGroups: z.array(z.object({ DBParameterGroupName: z.string(), ParameterApplyStatus: z.string().optional() })).optional(),
});

const ClusterSchema = z.object({
  DBClusterIdentifier: z.string(),
  DBClusterParameterGroup: z.string(),
  Status: z.string().optional(),
  DBClusterMembers: z
    .array(
      z.object({
        DBInstanceIdentifier: z.string(),
        IsClusterWriter: z.boolean().optional(),
        DBClusterParameterGroupStatus: z.string().optional(),
      }),
    )
    .optional(),
  ServerlessV2ScalingConfiguration: z.object({ MinCapacity: z.number().optional(), MaxCapacity: z.number().optional() }).optional(),
});

export interface InstanceFacts {
  id: string;
  instanceClass: string;
  status: string;
  engine: string;
  engineVersion: string;
  /** `db-…`: the Performance Insights identifier. */
  resourceId: string | undefined;
  performanceInsights: boolean;
  multiAz: boolean;
  clusterId: string | undefined;
  /** Allocated storage (RDS only: Aurora storage grows by itself and reports no size). */
  storageBytes: number | undefined;
  parameterGroup: { name: string; applyStatus: string };
}

export interface ClusterFacts {
  id: string;
  /** null: unknown (the policy does not allow rds:DescribeDBClusters). */
  parameterGroup: string | null;
  writerId: string | undefined;
  members: Array<{ id: string; writer: boolean; parameterGroupStatus: string }>;
  /** Aurora Serverless v2 capacity range, in ACUs. */
  serverless: { minAcu: number; maxAcu: number } | undefined;
}

/** The instance the agent works on now, with its cluster when it has one. */
export interface Placement {
  instance: InstanceFacts;
  cluster: ClusterFacts | null;
}

function instanceFacts(raw: unknown): InstanceFacts {
  const i = InstanceSchema.parse(raw);
  const group = i.DBParameterGroups?.[0];
  if (!group) throw new Error(`Cloud A describes DB instance ${i.DBInstanceIdentifier} without a DB parameter group`);
  const aurora = i.Engine.startsWith('aurora');
  return {
    id: i.DBInstanceIdentifier,
    instanceClass: i.DBInstanceClass,
    status: i.DBInstanceStatus,
    engine: i.Engine,
    engineVersion: i.EngineVersion ?? 'unknown',
    resourceId: i.DbiResourceId,
    performanceInsights: i.PerformanceInsightsEnabled === true,
    multiAz: i.MultiAZ === true,
    clusterId: i.DBClusterIdentifier,
    storageBytes: !aurora && i.AllocatedStorage ? i.AllocatedStorage * GiB : undefined,
    parameterGroup: { name: group.DBParameterGroupName, applyStatus: group.ParameterApplyStatus ?? 'in-sync' },
  };
}

function clusterFacts(raw: unknown): ClusterFacts {
  const c = ClusterSchema.parse(raw);
  const members = (c.DBClusterMembers ?? []).map((m) => ({
    id: m.DBInstanceIdentifier,
    writer: m.IsClusterWriter === true,
    parameterGroupStatus: m.DBClusterParameterGroupStatus ?? 'in-sync',
  }));
  const scaling = c.ServerlessV2ScalingConfiguration;
  return {
    id: c.DBClusterIdentifier,
    parameterGroup: c.DBClusterParameterGroup,
    writerId: members.find((m) => m.writer)?.id,
    members,
    serverless: scaling?.MaxCapacity ? { minAcu: scaling.MinCapacity ?? scaling.MaxCapacity, maxAcu: scaling.MaxCapacity } : undefined,
  };
}

export interface TopologyOptions {
  rds: RDSClient;
  region: string;
  /** managed_a.DATABASE_IDENTIFIER: the instance; for a cluster its writer (or the cluster itself). */
  identifier: string;
  cluster: boolean;
  log: Logger;
  caps: Capabilities;
  /** The agent's connection: without rds:DescribeDBClusters, it tells a writer from a reader. */
  db: Db;
}

export class Topology {
  readonly #o: TopologyOptions;
  /** The cluster, once found from the configured identifier. */
  #clusterId: string | null = null;
  #lastWriter: string | null = null;

  constructor(options: TopologyOptions) {
    this.#o = options;
  }

  async describeInstance(id: string): Promise<InstanceFacts> {
    try {
      const out = await awsCall('rds:DescribeDBInstances', () =>
        this.#o.rds.send(new DescribeDBInstancesCommand({ DBInstanceIdentifier: id })),
      );
      const found = out.DBInstances?.[0];
      if (!found) throw this.#instanceNotFound(id, null);
      return instanceFacts(found);
    } catch (err) {
      if (hasCode(err, 'DBInstanceNotFound')) throw this.#instanceNotFound(id, err);
      throw err;
    }
  }

  async describeCluster(id: string): Promise<ClusterFacts> {
    try {
      const out = await awsCall('rds:DescribeDBClusters', () =>
        this.#o.rds.send(new DescribeDBClustersCommand({ DBClusterIdentifier: id })),
      );
      const found = out.DBClusters?.[0];
      if (!found) throw new Error(`Cloud A has no DB cluster "${id}" in region ${this.#o.region}`);
      return clusterFacts(found);
    } catch (err) {
      if (hasCode(err, 'DBClusterNotFound'))
        throw new Error(`Cloud A has no DB cluster "${id}" in region ${this.#o.region} (it may have been deleted)`, { cause: err });
      throw err;
    }
  }

  /** The instance to work on now: the configured one, or the cluster's current writer. */
  async resolve(): Promise<Placement> {
    if (!this.#o.cluster) {
      const instance = await this.describeInstance(this.#o.identifier);
      if (instance.clusterId && instance.engine.startsWith('aurora')) {
        throw new Error(
          `DB instance ${instance.id} belongs to the Aurora cluster ${instance.clusterId}: run tuner-agent --managed-a-cluster`,
        );
      }
      return { instance, cluster: null };
    }
    const clusterId = this.#clusterId ?? (await this.#findCluster());
    if (!this.#o.caps.allows('rds:DescribeDBClusters')) return this.#configuredWriter(clusterId);
    let cluster: ClusterFacts;
    try {
      cluster = await this.describeCluster(clusterId);
    } catch (err) {
      if (!isAccessDenied(err)) throw err;
      this.#o.caps.refuse('rds:DescribeDBClusters');
      return this.#configuredWriter(clusterId);
    }
    if (!cluster.writerId) {
      throw new Error(
        `the DB cluster ${clusterId} has no writer instance right now (a failover may be under way); the agent tries again at its next step`,
      );
    }
    if (this.#lastWriter !== null && this.#lastWriter !== cluster.writerId) {
      this.#o.log.info(`the writer of cluster ${clusterId} is now ${cluster.writerId} (was ${this.#lastWriter}): the agent follows it`);
    }
    this.#lastWriter = cluster.writerId;
    return { instance: await this.describeInstance(cluster.writerId), cluster };
  }

  /**
   * Without DescribeDBClusters: the writer is the instance the connection (the cluster endpoint)
   * reaches while it is not in recovery: Aurora's aurora_db_instance_identifier() names it, so a
   * failover is followed; where that function is missing, the configured instance, as the spec
   * defines DATABASE_IDENTIFIER. The cluster parameter group stays unknown.
   */
  async #configuredWriter(clusterId: string): Promise<Placement> {
    const { db, identifier, log } = this.#o;
    const [state] = await db.query<{ recovery: boolean; aurora: boolean }>(
      "SELECT pg_is_in_recovery() AS recovery, to_regprocedure('aurora_db_instance_identifier()') IS NOT NULL AS aurora",
    );
    if (state?.recovery !== false) {
      throw new Error(
        `the connection reaches a reader of cluster ${clusterId} (pg_is_in_recovery() is true): set postgresql.connection_url to the cluster endpoint, which reaches the writer`,
      );
    }
    const [named] = state.aurora ? await db.query<{ id: string }>('SELECT aurora_db_instance_identifier() AS id') : [];
    const id = named?.id ?? identifier;
    const instance = await this.describeInstance(id);
    if (instance.clusterId !== clusterId) {
      throw new Error(
        `${id} is not a member of cluster ${clusterId}: set managed_a.DATABASE_IDENTIFIER to the writer of the cluster the connection reaches`,
      );
    }
    if (this.#lastWriter !== null && this.#lastWriter !== id) {
      log.info(`the writer of cluster ${clusterId} is now ${id} (was ${this.#lastWriter}): the agent follows it`);
    }
    this.#lastWriter = id;
    return {
      instance,
      cluster: {
        id: clusterId,
        parameterGroup: null,
        writerId: id,
        members: [{ id, writer: true, parameterGroupStatus: 'unknown' }],
        serverless: undefined,
      },
    };
  }

  /** The cluster of the configured identifier: an instance of it (the spec's form), or the cluster itself. */
  async #findCluster(): Promise<string> {
    const id = this.#o.identifier;
    let instance: InstanceFacts;
    try {
      instance = await this.describeInstance(id);
    } catch (err) {
      if (!hasCode(err, 'DBInstanceNotFound')) throw err;
      const cluster = await this.describeCluster(id).catch(() => {
        throw err;
      });
      this.#clusterId = cluster.id;
      return cluster.id;
    }
    if (!instance.clusterId) {
      throw new Error(`DB instance ${id} is not a member of a DB cluster: run tuner-agent --managed-a for a single instance`);
    }
    this.#clusterId = instance.clusterId;
    return instance.clusterId;
  }

  /** Other instances that use the DB parameter group `group` (every page of DescribeDBInstances). */
  async instancesUsingGroup(group: string, except: string): Promise<string[]> {
    const users: string[] = [];
    let marker: string | undefined;
    do {
      const out = await awsCall('rds:DescribeDBInstances', () =>
        this.#o.rds.send(new DescribeDBInstancesCommand({ MaxRecords: 100, Marker: marker })),
      );
      for (const raw of out.DBInstances ?? []) {
        const id = raw.DBInstanceIdentifier;
        if (id && id !== except && raw.DBParameterGroups?.some((g) => g.DBParameterGroupName === group)) users.push(id);
      }
      marker = out.Marker;
    } while (marker);
    return users;
  }

  /** Other clusters that use the cluster parameter group `group`. */
  async clustersUsingGroup(group: string, except: string): Promise<string[]> {
    const users: string[] = [];
    let marker: string | undefined;
    do {
      const out = await awsCall('rds:DescribeDBClusters', () =>
        this.#o.rds.send(new DescribeDBClustersCommand({ MaxRecords: 100, Marker: marker })),
      );
      for (const raw of out.DBClusters ?? []) {
        if (raw.DBClusterIdentifier && raw.DBClusterIdentifier !== except && raw.DBClusterParameterGroup === group)
          users.push(raw.DBClusterIdentifier);
      }
      marker = out.Marker;
    } while (marker);
    return users;
  }

  #instanceNotFound(id: string, cause: unknown): Error {
    const what = this.#o.cluster && id !== this.#o.identifier ? `the writer instance "${id}"` : `DB instance "${id}"`;
    return new AwsCallError(
      'rds:DescribeDBInstances',
      ['DBInstanceNotFound'],
      `Cloud A has no ${what} in region ${this.#o.region}: check managed_a.DATABASE_IDENTIFIER (AGENT_MANAGEDA_DATABASE_IDENTIFIER) and managed_a.REGION (AGENT_CLOUDA_REGION)`,
      cause,
    );
  }
}

/** Default parameter groups (`default.postgres15`, `default.aurora-postgresql15`) cannot be modified. */
export function isDefaultGroup(name: string): boolean {
  return name.startsWith('default.');
}

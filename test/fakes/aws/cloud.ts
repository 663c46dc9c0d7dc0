// The state of the fake Cloud A and how it moves: parameter groups, DB instances, Aurora
// clusters; a change to a group shows `applying` for a moment and then lands in the real
// PostgreSQL of every instance using the group (dynamic values at once, static ones at the next
// reboot); a reboot restarts PostgreSQL; a failover moves the writer. Delays are short and set
// by the test, as is everything that can go wrong.
import type { PostgresEngine, TemplateParameter } from './engine.ts';
import { INSTANCE_TYPES } from './instance-types.ts';
import { GiB } from '../../../src/knobs/units.ts';

export class FakeAwsError extends Error {
  readonly code: string;
  readonly status: number;
  constructor(code: string, message: string, status = 400) {
    super(message);
    this.code = code;
    this.status = status;
  }
}

export interface FakeTimings {
  /** How long a group change shows `applying` before it lands in PostgreSQL. */
  applyDelayMs: number;
  /** How long an instance shows `rebooting` (PostgreSQL's own restart comes on top). */
  rebootDelayMs: number;
  /** How long the old status is still shown after a change or a reboot request. */
  statusLagMs: number;
}

/**
 * Cloud A's delays, scaled down for tests. The lag is on by default because RDS has it: right
 * after ModifyDBParameterGroup, DescribeDBInstances still shows the group `in-sync` for a moment
 * before `applying` (https://docs.aws.amazon.com/AmazonRDS/latest/APIReference/API_DBParameterGroupStatus.html
 * lists the statuses; the moment is what RDS shows, not a documented figure); a client must not
 * take that first `in-sync` for the change applied. It is no longer than `applying` lasts, as on RDS.
 */
export const DEFAULT_TIMINGS: FakeTimings = { applyDelayMs: 150, rebootDelayMs: 100, statusLagMs: 150 };

/** Parameters that exist only in Aurora's cluster parameter group, in this fake. */
export const AURORA_CLUSTER_ONLY = new Set([
  'jit',
  'wal_level',
  'max_wal_senders',
  'max_replication_slots',
  'shared_preload_libraries',
  'track_commit_timestamp',
]);

type ApplyStatus = 'in-sync' | 'applying' | 'pending-reboot';

/** The apply status of one group on one instance. */
interface Holder {
  status: ApplyStatus;
  pendingReboot: boolean;
  /** Dynamic values changed that have not yet landed in PostgreSQL. */
  needsSync: boolean;
  generation: number;
}

const newHolder = (): Holder => ({ status: 'in-sync', pendingReboot: false, needsSync: false, generation: 0 });

export interface GroupParameter extends TemplateParameter {
  /** Source `system`: a value (maybe a formula) the service sets. */
  systemValue?: string;
  /** Source `user`. */
  userValue?: string;
}

export type GroupKind = 'instance' | 'cluster';

export interface FakeGroup {
  name: string;
  kind: GroupKind;
  family: string;
  parameters: Map<string, GroupParameter>;
}

export interface FakeInstance {
  id: string;
  instanceClass: string;
  engine: 'postgres' | 'aurora-postgresql';
  engineVersion: string;
  status: string;
  resourceId: string;
  performanceInsights: boolean;
  multiAz: boolean;
  allocatedStorageGiB: number;
  clusterId: string | undefined;
  groupName: string;
  holder: Holder;
  /** Static values in force since the last boot (the group's values then). */
  bootStatics: Map<string, string>;
  /**
   * Dynamic parameters written with ApplyMethod=pending-reboot: the value the instance keeps
   * running until its next reboot (null: none set), whatever immediate changes happen meanwhile.
   * RDS applies a pending-reboot change only at the reboot, for dynamic parameters too
   * (https://docs.aws.amazon.com/AmazonRDS/latest/APIReference/API_Parameter.html, ApplyMethod).
   */
  heldDynamics: Map<string, string | null>;
  /** The PostgreSQL of a single instance (a cluster's is on the cluster). */
  postgres: PostgresEngine | null;
  failNextReboot: boolean;
}

export interface FakeClusterMember {
  id: string;
  writer: boolean;
  holder: Holder;
}

export interface FakeCluster {
  id: string;
  groupName: string;
  members: FakeClusterMember[];
  serverless: { min: number; max: number } | undefined;
  /** The PostgreSQL behind the cluster endpoint: the writer's. */
  postgres: PostgresEngine | null;
}

export interface ParameterChange {
  name: string;
  /** undefined: reset to the group's default. */
  value: string | undefined;
  method: string;
}

/** Cloud A's parameter formulas: `{DBInstanceClassMemory/32768}`, `GREATEST({…},128)`, … */
export function evaluateFormula(value: string, vars: Readonly<Record<string, number>>): string {
  const arithmetic = (expr: string): number => {
    const tokens = expr.replace(/\s+/g, '').split(/([*/])/);
    const operand = (t: string): number => {
      const n = /^\d+(\.\d+)?$/.test(t) ? Number(t) : vars[t];
      if (n === undefined || !Number.isFinite(n)) throw new FakeAwsError('InvalidParameterValue', `Invalid formula variable: ${t}`);
      return n;
    };
    let result = operand(tokens[0] ?? '');
    for (let i = 1; i < tokens.length; i += 2)
      result = tokens[i] === '*' ? result * operand(tokens[i + 1] ?? '') : result / operand(tokens[i + 1] ?? '');
    return result;
  };
  let out = value.replace(/\{([^}]*)\}/g, (_, expr: string) => String(Math.floor(arithmetic(expr))));
  const fn = /(GREATEST|LEAST|SUM)\(([^()]*)\)/i;
  for (let m = fn.exec(out); m; m = fn.exec(out)) {
    const args = m[2]!.split(',').map((a) => Number(a.trim()));
    if (args.some((a) => !Number.isFinite(a))) throw new FakeAwsError('InvalidParameterValue', `Invalid formula: ${value}`);
    const name = m[1]!.toUpperCase();
    const result = name === 'GREATEST' ? Math.max(...args) : name === 'LEAST' ? Math.min(...args) : args.reduce((a, b) => a + b, 0);
    out = out.replace(m[0], String(result));
  }
  return out;
}

const isFormula = (v: string) => /[{}()]/.test(v);

export class FakeCloud {
  readonly timings: FakeTimings;
  readonly engine: PostgresEngine;
  readonly groups = new Map<string, FakeGroup>();
  readonly instances = new Map<string, FakeInstance>();
  readonly clusters = new Map<string, FakeCluster>();
  /** CloudWatch values the fake reports for every instance. */
  readonly metricValues = new Map<string, number>([
    ['CPUUtilization', 12.5],
    ['FreeableMemory', 3 * GiB],
    ['SwapUsage', 0],
    ['ReadIOPS', 120],
    ['WriteIOPS', 80],
    ['ReadLatency', 0.0012],
    ['WriteLatency', 0.0021],
    ['DiskQueueDepth', 0.4],
    ['DatabaseConnections', 7],
  ]);
  /** Failures of the background work (an apply PostgreSQL refused), for the test to look at. */
  readonly failures: string[] = [];
  readonly #timers = new Set<NodeJS.Timeout>();
  #pending = new Set<Promise<unknown>>();

  constructor(engine: PostgresEngine, timings: FakeTimings) {
    this.engine = engine;
    this.timings = timings;
  }

  // ---- setup --------------------------------------------------------------------------------

  addGroup(spec: {
    name: string;
    kind?: GroupKind;
    aurora?: boolean;
    values?: Record<string, string>;
    system?: Record<string, string>;
  }): FakeGroup {
    const kind = spec.kind ?? 'instance';
    const aurora = spec.aurora ?? kind === 'cluster';
    const family = `${aurora ? 'aurora-postgresql' : 'postgres'}${this.engine.majorVersion}`;
    const parameters = new Map<string, GroupParameter>();
    for (const t of this.engine.template) {
      if (aurora && kind === 'instance' && AURORA_CLUSTER_ONLY.has(t.name)) continue;
      parameters.set(t.name, { ...t });
    }
    for (const [name, value] of Object.entries(spec.system ?? {})) parameters.get(name)!.systemValue = value;
    for (const [name, value] of Object.entries(spec.values ?? {})) {
      const p = parameters.get(name);
      if (!p) throw new Error(`fake: ${name} is not a parameter of ${spec.name}`);
      p.userValue = value;
    }
    const group: FakeGroup = { name: spec.name, kind, family, parameters };
    this.groups.set(`${kind}:${spec.name}`, group);
    return group;
  }

  async addInstance(spec: {
    id: string;
    instanceClass?: string;
    group: string;
    clusterId?: string;
    performanceInsights?: boolean;
    multiAz?: boolean;
    postgres?: boolean;
    status?: string;
  }): Promise<FakeInstance> {
    this.group('instance', spec.group);
    const instance: FakeInstance = {
      id: spec.id,
      instanceClass: spec.instanceClass ?? 'db.m5.large',
      engine: spec.clusterId ? 'aurora-postgresql' : 'postgres',
      engineVersion: `${this.engine.majorVersion}.4`,
      status: spec.status ?? 'available',
      resourceId: `db-${spec.id.toUpperCase().replace(/[^A-Z0-9]/g, '')}FAKE`,
      performanceInsights: spec.performanceInsights ?? false,
      multiAz: spec.multiAz ?? false,
      allocatedStorageGiB: 100,
      clusterId: spec.clusterId,
      groupName: spec.group,
      holder: newHolder(),
      bootStatics: new Map(),
      heldDynamics: new Map(),
      postgres: spec.postgres ? this.engine : null,
      failNextReboot: false,
    };
    this.instances.set(spec.id, instance);
    if (instance.postgres) {
      await this.engine.setAuroraInstance(null);
      await this.#boot(instance);
    }
    return instance;
  }

  async addCluster(spec: {
    id: string;
    group: string;
    members: string[];
    writer: string;
    serverless?: { min: number; max: number };
    postgres?: boolean;
  }): Promise<FakeCluster> {
    this.group('cluster', spec.group);
    const cluster: FakeCluster = {
      id: spec.id,
      groupName: spec.group,
      members: spec.members.map((id) => ({ id, writer: id === spec.writer, holder: newHolder() })),
      serverless: spec.serverless,
      postgres: spec.postgres === false ? null : this.engine,
    };
    for (const id of spec.members) {
      const i = this.instance(id);
      if (i.clusterId !== spec.id) throw new Error(`fake: instance ${id} was not added with clusterId ${spec.id}`);
    }
    this.clusters.set(spec.id, cluster);
    if (cluster.postgres) await cluster.postgres.setAuroraInstance(spec.writer);
    await this.#boot(this.instance(spec.writer));
    return cluster;
  }

  // ---- lookups ------------------------------------------------------------------------------

  group(kind: GroupKind, name: string): FakeGroup {
    const g = this.groups.get(`${kind}:${name}`);
    if (!g) {
      throw kind === 'instance'
        ? new FakeAwsError('DBParameterGroupNotFound', `DBParameterGroup not found: ${name}`, 404)
        : new FakeAwsError('DBParameterGroupNotFound', `DBClusterParameterGroup not found: ${name}`, 404);
    }
    return g;
  }

  instance(id: string): FakeInstance {
    const i = this.instances.get(id);
    if (!i) throw new FakeAwsError('DBInstanceNotFound', `DBInstance ${id} not found.`, 404);
    return i;
  }

  cluster(id: string): FakeCluster {
    const c = this.clusters.get(id);
    if (!c) throw new FakeAwsError('DBClusterNotFoundFault', `DBCluster ${id} not found.`, 404);
    return c;
  }

  /** The memory Cloud A's formulas see (DBInstanceClassMemory), and the vCPUs. */
  size(instance: FakeInstance): { memoryBytes: number; vcpus: number } {
    if (instance.instanceClass === 'db.serverless') {
      const max = instance.clusterId ? (this.cluster(instance.clusterId).serverless?.max ?? 1) : 1;
      return { memoryBytes: max * 2 * GiB, vcpus: Math.max(1, Math.ceil(max / 4)) };
    }
    const type = INSTANCE_TYPES[instance.instanceClass.replace(/^db\./, '')];
    if (!type) throw new Error(`fake: no size for ${instance.instanceClass}`);
    return { memoryBytes: type.memoryMiB * 1024 * 1024, vcpus: type.vcpus };
  }

  /** The value a parameter has for an instance: its DB group's, then its cluster group's (user before system). */
  effectiveValue(instance: FakeInstance, name: string): string | undefined {
    const layers = this.#layers(instance);
    for (const g of layers) {
      const v = g.parameters.get(name)?.userValue;
      if (v !== undefined) return v;
    }
    for (const g of layers) {
      const v = g.parameters.get(name)?.systemValue;
      if (v !== undefined) return v;
    }
    return undefined;
  }

  // ---- group changes ------------------------------------------------------------------------

  /** ModifyDB(Cluster)ParameterGroup and ResetDB(Cluster)ParameterGroup: checked whole, then applied. */
  changeGroup(kind: GroupKind, name: string, changes: readonly ParameterChange[]): void {
    const group = this.group(kind, name);
    if (group.name.startsWith('default.'))
      throw new FakeAwsError('InvalidParameterValue', `The parameter group ${group.name} can't be modified.`);
    if (changes.length === 0) throw new FakeAwsError('InvalidParameterValue', 'At least one parameter must be specified.');
    if (changes.length > 20)
      throw new FakeAwsError('InvalidParameterValue', 'A maximum of 20 parameters can be modified in a single request.');
    for (const c of changes) this.#check(group, c);
    // What each instance runs now, so that a dynamic value written pending-reboot keeps running.
    const holders = this.#holdersOf(group);
    const running = new Map(holders.map(({ instance }) => [instance.id, this.#desired(instance)]));
    for (const c of changes) {
      const dynamic = group.parameters.get(c.name)!.applyType !== 'static';
      for (const { instance } of holders) {
        if (!dynamic) continue;
        if (c.method === 'pending-reboot' && !instance.heldDynamics.has(c.name)) {
          instance.heldDynamics.set(c.name, running.get(instance.id)!.get(c.name) ?? null);
        } else if (c.method === 'immediate') instance.heldDynamics.delete(c.name);
      }
    }
    for (const c of changes) {
      const p = group.parameters.get(c.name)!;
      if (c.value === undefined) delete p.userValue;
      else p.userValue = c.value;
    }
    const immediate = changes.some((c) => c.method === 'immediate');
    const pending = changes.some((c) => c.method === 'pending-reboot');
    for (const { holder, instance } of holders) this.#touch(holder, instance, immediate, pending);
  }

  resetAll(kind: GroupKind, name: string): void {
    const group = this.group(kind, name);
    const changes = [...group.parameters.values()]
      .filter((p) => p.userValue !== undefined)
      .map((p) => ({ name: p.name, value: undefined, method: p.applyType === 'static' ? 'pending-reboot' : 'immediate' }));
    for (let i = 0; i < changes.length; i += 20) this.changeGroup(kind, name, changes.slice(i, i + 20));
  }

  #check(group: FakeGroup, c: ParameterChange): void {
    const p = group.parameters.get(c.name);
    if (!p) throw new FakeAwsError('InvalidParameterValue', `Could not find parameter with name: ${c.name}`);
    if (!p.modifiable) throw new FakeAwsError('InvalidParameterValue', `The parameter ${c.name} cannot be modified.`);
    if (c.method !== 'immediate' && c.method !== 'pending-reboot')
      throw new FakeAwsError('InvalidParameterValue', `Invalid apply method ${c.method} for parameter ${c.name}`);
    if (p.applyType === 'static' && c.method === 'immediate') {
      throw new FakeAwsError('InvalidParameterCombination', `cannot use immediate apply method for static parameter ${c.name}`);
    }
    if (c.value === undefined) return;
    if (isFormula(c.value)) {
      if (p.dataType !== 'integer' && p.dataType !== 'float')
        throw new FakeAwsError('InvalidParameterValue', `Formulas are not supported for parameter ${c.name}`);
      evaluateFormula(c.value, { DBInstanceClassMemory: GiB, DBInstanceVCPU: 1, AllocatedStorage: 1 });
      return;
    }
    const allowed = p.allowedValues;
    if (!allowed) return;
    const range = /^(-?\d+(?:\.\d+)?(?:e[+-]?\d+)?)-(-?\d+(?:\.\d+)?(?:e[+-]?\d+)?)$/i.exec(allowed);
    if (range) {
      const n = Number(c.value);
      if (c.value.trim() === '' || !Number.isFinite(n) || n < Number(range[1]) || n > Number(range[2])) {
        throw new FakeAwsError('InvalidParameterValue', `Value: ${c.value} is outside of range: ${allowed} for parameter: ${c.name}`);
      }
    } else if (
      !allowed
        .split(',')
        .map((a) => a.toLowerCase())
        .includes(c.value.toLowerCase())
    ) {
      throw new FakeAwsError(
        'InvalidParameterValue',
        `Value: ${c.value} is not allowed for parameter: ${c.name}. Allowed values are: ${allowed}`,
      );
    }
  }

  /** Every (apply status, instance) a group change concerns. */
  #holdersOf(group: FakeGroup): Array<{ holder: Holder; instance: FakeInstance }> {
    if (group.kind === 'instance') {
      return [...this.instances.values()]
        .filter((i) => i.groupName === group.name)
        .map((instance) => ({ holder: instance.holder, instance }));
    }
    return [...this.clusters.values()]
      .filter((c) => c.groupName === group.name)
      .flatMap((c) => c.members.map((m) => ({ holder: m.holder, instance: this.instance(m.id) })));
  }

  #touch(holder: Holder, instance: FakeInstance, immediate: boolean, pending: boolean): void {
    if (pending) holder.pendingReboot = true;
    if (immediate) holder.needsSync = true;
    const generation = ++holder.generation;
    const settle = () => {
      holder.status = holder.pendingReboot ? 'pending-reboot' : 'in-sync';
    };
    const finish = async () => {
      if (holder.generation !== generation) return;
      holder.needsSync = false;
      await this.#sync(instance);
      if (holder.generation === generation) settle();
    };
    const begin = () => {
      if (holder.generation !== generation) return;
      if (!holder.needsSync) return settle();
      holder.status = 'applying';
      this.#later(this.timings.applyDelayMs, finish);
    };
    if (this.timings.statusLagMs > 0) this.#later(this.timings.statusLagMs, begin);
    else begin();
  }

  // ---- instances ----------------------------------------------------------------------------

  reboot(id: string): FakeInstance {
    const instance = this.instance(id);
    if (instance.status !== 'available' && instance.status !== 'incompatible-parameters') {
      throw new FakeAwsError('InvalidDBInstanceState', `Instance ${id} is not in available state.`);
    }
    const finish = async () => {
      if (instance.failNextReboot) {
        instance.failNextReboot = false;
        instance.status = 'incompatible-parameters';
        return;
      }
      await this.#boot(instance, true);
      for (const holder of this.#holdersOfInstance(instance)) {
        holder.pendingReboot = false;
        holder.needsSync = false;
        holder.generation++;
        holder.status = 'in-sync';
      }
      instance.status = 'available';
    };
    const begin = () => {
      instance.status = 'rebooting';
      this.#later(this.timings.rebootDelayMs, finish);
    };
    if (this.timings.statusLagMs > 0) this.#later(this.timings.statusLagMs, begin);
    else begin();
    return instance;
  }

  /** Makes `writer` the cluster's writer; its PostgreSQL restarts with its own group's values. */
  async failover(clusterId: string, writer: string): Promise<void> {
    const cluster = this.cluster(clusterId);
    if (!cluster.members.some((m) => m.id === writer)) throw new Error(`fake: ${writer} is not a member of ${clusterId}`);
    for (const m of cluster.members) m.writer = m.id === writer;
    if (cluster.postgres) await cluster.postgres.setAuroraInstance(writer);
    await this.#boot(this.instance(writer));
  }

  #holdersOfInstance(instance: FakeInstance): Holder[] {
    const member = instance.clusterId ? this.clusters.get(instance.clusterId)?.members.find((m) => m.id === instance.id) : undefined;
    return member ? [instance.holder, member.holder] : [instance.holder];
  }

  #layers(instance: FakeInstance): FakeGroup[] {
    const own = this.group('instance', instance.groupName);
    const cluster = instance.clusterId ? this.clusters.get(instance.clusterId) : undefined;
    return cluster ? [own, this.group('cluster', cluster.groupName)] : [own];
  }

  /** The PostgreSQL an instance runs on, when it is the one serving it. */
  #engineOf(instance: FakeInstance): PostgresEngine | null {
    if (!instance.clusterId) return instance.postgres;
    const cluster = this.clusters.get(instance.clusterId);
    return cluster?.members.some((m) => m.id === instance.id && m.writer) ? cluster.postgres : null;
  }

  /** postgresql.auto.conf as the instance's groups say: dynamic values now, static ones as booted. */
  #desired(instance: FakeInstance): Map<string, string> {
    const desired = new Map<string, string>();
    const { memoryBytes, vcpus } = this.size(instance);
    const vars = { DBInstanceClassMemory: memoryBytes, DBInstanceVCPU: vcpus, AllocatedStorage: instance.allocatedStorageGiB * GiB };
    const seen = new Set<string>();
    for (const g of this.#layers(instance)) {
      for (const p of g.parameters.values()) {
        if (seen.has(p.name)) continue;
        seen.add(p.name);
        if (p.applyType !== 'static' && instance.heldDynamics.has(p.name)) {
          const held = instance.heldDynamics.get(p.name);
          if (held !== null && held !== undefined) desired.set(p.name, held);
          continue;
        }
        const value = p.applyType === 'static' ? instance.bootStatics.get(p.name) : this.effectiveValue(instance, p.name);
        if (value === undefined) continue;
        const resolved = isFormula(value) ? evaluateFormula(value, vars) : value;
        desired.set(p.name, p.dataType === 'boolean' ? (resolved === '1' ? 'on' : resolved === '0' ? 'off' : resolved) : resolved);
      }
    }
    return desired;
  }

  async #sync(instance: FakeInstance): Promise<void> {
    const engine = this.#engineOf(instance);
    if (!engine) return;
    try {
      await engine.sync(this.#desired(instance));
    } catch (err) {
      this.failures.push(`applying to ${instance.id}: ${(err as Error).message}`);
      instance.status = 'incompatible-parameters';
    }
  }

  /** Starts an instance's PostgreSQL with its groups' values: a restart when rebooted, or when
   * a static value differs from what it runs. */
  async #boot(instance: FakeInstance, reboot = false): Promise<void> {
    instance.bootStatics = new Map();
    instance.heldDynamics = new Map();
    for (const g of this.#layers(instance)) {
      for (const p of g.parameters.values()) {
        const value = p.applyType === 'static' && !instance.bootStatics.has(p.name) ? this.effectiveValue(instance, p.name) : undefined;
        if (value !== undefined) instance.bootStatics.set(p.name, value);
      }
    }
    const engine = this.#engineOf(instance);
    if (!engine) return;
    try {
      const pendingRestart = await engine.sync(this.#desired(instance));
      if (reboot || pendingRestart) await engine.restart();
    } catch (err) {
      this.failures.push(`booting ${instance.id}: ${(err as Error).message}`);
      instance.status = 'incompatible-parameters';
    }
  }

  #later(ms: number, fn: () => void | Promise<void>): void {
    const timer = setTimeout(() => {
      this.#timers.delete(timer);
      const work = Promise.resolve()
        .then(fn)
        .catch((err: unknown) => this.failures.push((err as Error).message))
        .finally(() => this.#pending.delete(work));
      this.#pending.add(work);
    }, ms);
    this.#timers.add(timer);
  }

  /** Waits until every scheduled change has landed. */
  async settle(): Promise<void> {
    while (this.#timers.size > 0 || this.#pending.size > 0) {
      await Promise.all(this.#pending);
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  stop(): void {
    for (const t of this.#timers) clearTimeout(t);
    this.#timers.clear();
  }
}

// Reading and writing parameter groups: a DB parameter group (an instance, an Aurora writer) or
// a DB cluster parameter group (an Aurora cluster), through one small interface. Listings are
// paged; what does not change (apply type, allowed values, modifiability, the group's own
// default) is read once per group; values are read fresh each time. Every action here but
// ModifyDBParameterGroup is optional (permissions.ts): without the describe actions, what a
// parameter is comes from pg_settings; without the reset actions, "not set" is written as the
// value it stands for.
import {
  DescribeDBClusterParametersCommand,
  DescribeDBParametersCommand,
  ModifyDBClusterParameterGroupCommand,
  ModifyDBParameterGroupCommand,
  ResetDBClusterParameterGroupCommand,
  ResetDBParameterGroupCommand,
  type ApplyMethod,
  type RDSClient,
} from '@aws-sdk/client-rds';
import { z } from 'zod';
import { allowedValueProblem } from '../allowed-values.ts';
import type { Db } from '../../database/db.ts';
import { awsCall, isAccessDenied } from './aws.ts';
import type { Capabilities } from './capabilities.ts';
import type { OptionalAction } from './permissions.ts';
import { retryWhileBusy, type ManagedATimings } from './wait.ts';

/** Cloud A accepts at most this many parameters per modify or reset call. */
export const MAX_PARAMETERS_PER_CALL = 20;

export type GroupKind = 'instance' | 'cluster';

export interface GroupRef {
  readonly kind: GroupKind;
  readonly name: string;
  /** A group of Aurora PostgreSQL (its DB parameter group lists no cluster-level parameter). */
  readonly aurora?: boolean;
}

/**
 * Aurora PostgreSQL parameters set in the DB cluster parameter group only (not listed in a DB
 * parameter group), as the fake Cloud A lists them (test/fakes/aws/cloud.ts): replication and
 * WAL settings the cluster's storage shares, libraries, and jit. Used only when the groups'
 * own lists cannot be read.
 */
export const AURORA_CLUSTER_LEVEL: ReadonlySet<string> = new Set([
  'jit',
  'wal_level',
  'max_wal_senders',
  'max_replication_slots',
  'shared_preload_libraries',
  'track_commit_timestamp',
]);

export function groupLabel(g: GroupRef): string {
  return g.kind === 'instance' ? `DB parameter group ${g.name}` : `DB cluster parameter group ${g.name}`;
}

export function groupKey(g: GroupRef): string {
  return `${g.kind}:${g.name}`;
}

const ParameterSchema = z.object({
  ParameterName: z.string(),
  ParameterValue: z.string().optional(),
  Source: z.string().optional(),
  ApplyType: z.string().optional(),
  DataType: z.string().optional(),
  AllowedValues: z.string().optional(),
  IsModifiable: z.boolean().optional(),
});
type Parameter = z.infer<typeof ParameterSchema>;

export interface ParameterMeta {
  readonly name: string;
  /** `static` parameters take effect at the next reboot only. */
  readonly applyType: 'static' | 'dynamic';
  readonly dataType: string | undefined;
  readonly allowedValues: string | undefined;
  readonly modifiable: boolean;
  /** What "not set" means in this group, when the first listing showed it unset: the engine's
   * own default (`engine-default`, no value) or a value of the service (`system`, maybe a formula). */
  readonly unsetDefault: { source: string; value: string | undefined } | undefined;
}

export interface ParameterWrite {
  name: string;
  /** The exact value to store, or null to reset the parameter to the group's default. */
  value: string | null;
  applyType: 'static' | 'dynamic';
  /** What "not set" stands for, written instead of a reset when the policy refuses the reset. */
  unsetValue?: string | undefined;
}

interface SettingRow {
  name: string;
  setting: string;
  context: string;
  vartype: string;
  min_val: string | null;
  max_val: string | null;
  enumvals: string[] | null;
}

export class ParameterGroups {
  readonly #rds: RDSClient;
  readonly #timings: ManagedATimings;
  readonly #caps: Capabilities;
  readonly #db: Db;
  readonly #meta = new Map<string, Promise<Map<string, ParameterMeta>>>();

  constructor(rds: RDSClient, timings: ManagedATimings, caps: Capabilities, db: Db) {
    this.#rds = rds;
    this.#timings = timings;
    this.#caps = caps;
    this.#db = db;
  }

  /** The action that lists a group's parameters. */
  describeAction(group: GroupRef): OptionalAction {
    return group.kind === 'instance' ? 'rds:DescribeDBParameters' : 'rds:DescribeDBClusterParameters';
  }

  /** Every parameter of the group (all pages), or only those with `source`. */
  async list(group: GroupRef, source?: 'user'): Promise<Parameter[]> {
    const all: Parameter[] = [];
    let marker: string | undefined;
    do {
      const input = { MaxRecords: 100, Marker: marker, Source: source };
      const page =
        group.kind === 'instance'
          ? await awsCall('rds:DescribeDBParameters', () =>
              this.#rds.send(new DescribeDBParametersCommand({ ...input, DBParameterGroupName: group.name })),
            )
          : await awsCall('rds:DescribeDBClusterParameters', () =>
              this.#rds.send(new DescribeDBClusterParametersCommand({ ...input, DBClusterParameterGroupName: group.name })),
            );
      for (const raw of page.Parameters ?? []) all.push(ParameterSchema.parse(raw));
      marker = page.Marker;
    } while (marker);
    return all;
  }

  /** What each parameter of the group is, read once per group and process. */
  metadata(group: GroupRef): Promise<Map<string, ParameterMeta>> {
    const key = groupKey(group);
    let cached = this.#meta.get(key);
    if (!cached) {
      cached = this.#caps.use(
        this.describeAction(group),
        async () => new Map((await this.list(group)).map((p) => [p.ParameterName, toMeta(p)])),
        () => this.#settingsMeta(group),
      );
      // A failed read is not kept: the next call asks again.
      cached.catch(() => this.#meta.delete(key));
      this.#meta.set(key, cached);
    }
    return cached;
  }

  /** The parameters set in the group (Source `user`) with their exact stored values. */
  async userValues(group: GroupRef): Promise<Map<string, string>> {
    const params = await this.list(group, 'user');
    return new Map(
      params.filter((p) => p.Source === 'user' && p.ParameterValue !== undefined).map((p) => [p.ParameterName, p.ParameterValue!]),
    );
  }

  /** What the group would list, told by the server's pg_settings (the group itself cannot be read):
   * restart-only settings are static, the ranges and choices those of PostgreSQL. */
  async #settingsMeta(group: GroupRef): Promise<Map<string, ParameterMeta>> {
    const rows = await this.#db.query<SettingRow>(
      `SELECT name, setting, context, vartype, min_val, max_val, enumvals FROM pg_settings WHERE context <> 'internal'`,
    );
    const instanceOfAurora = group.kind === 'instance' && group.aurora === true;
    return new Map(rows.filter((r) => !(instanceOfAurora && AURORA_CLUSTER_LEVEL.has(r.name))).map((r) => [r.name, settingMeta(r)]));
  }

  /** The values the server runs for `names` (pg_settings), spelled as a group stores them: what
   * the agent found, standing in for the group's own values when it cannot read them. */
  async foundValues(names: readonly string[]): Promise<Map<string, string>> {
    const rows = await this.#db.query<SettingRow>(
      'SELECT name, setting, context, vartype, min_val, max_val, enumvals FROM pg_settings WHERE name = ANY($1)',
      [names],
    );
    return new Map(rows.map((r) => [r.name, groupSpelling(settingMeta(r), r.setting)]));
  }

  /** One modify or reset call (at most MAX_PARAMETERS_PER_CALL), retried while the group is busy. */
  async writeBatch(group: GroupRef, batch: readonly ParameterWrite[]): Promise<void> {
    if (batch.length === 0) return;
    if (batch.length > MAX_PARAMETERS_PER_CALL)
      throw new Error(`internal: ${batch.length} parameters in one call (at most ${MAX_PARAMETERS_PER_CALL})`);
    const method = (w: ParameterWrite): ApplyMethod => (w.applyType === 'static' ? 'pending-reboot' : 'immediate');
    const resets = batch.every((w) => w.value === null);
    if (!resets && batch.some((w) => w.value === null)) throw new Error('internal: a batch mixes values and resets');
    const resetAction = group.kind === 'instance' ? 'rds:ResetDBParameterGroup' : 'rds:ResetDBClusterParameterGroup';
    if (resets && !this.#caps.allows(resetAction)) return this.writeBatch(group, asValues(batch, resetAction));
    const Parameters = batch.map((w) =>
      w.value === null
        ? { ParameterName: w.name, ApplyMethod: method(w) }
        : { ParameterName: w.name, ParameterValue: w.value, ApplyMethod: method(w) },
    );
    // ResetAllParameters is false on purpose: left out, Cloud A resets the whole group.
    const modifyCluster = 'rds:ModifyDBClusterParameterGroup';
    try {
      await this.#send(group, resets, Parameters);
    } catch (err) {
      if (!isAccessDenied(err)) throw err;
      if (resets) {
        this.#caps.refuse(resetAction);
        return this.writeBatch(group, asValues(batch, resetAction));
      }
      if (group.kind === 'cluster') this.#caps.refuse(modifyCluster);
      throw err;
    }
  }

  async #send(
    group: GroupRef,
    resets: boolean,
    Parameters: Array<{ ParameterName: string; ParameterValue?: string; ApplyMethod: ApplyMethod }>,
  ): Promise<void> {
    await retryWhileBusy(this.#timings, async () => {
      if (group.kind === 'instance') {
        if (resets) {
          await awsCall('rds:ResetDBParameterGroup', () =>
            this.#rds.send(new ResetDBParameterGroupCommand({ DBParameterGroupName: group.name, ResetAllParameters: false, Parameters })),
          );
        } else {
          await awsCall('rds:ModifyDBParameterGroup', () =>
            this.#rds.send(new ModifyDBParameterGroupCommand({ DBParameterGroupName: group.name, Parameters })),
          );
        }
      } else if (resets) {
        await awsCall('rds:ResetDBClusterParameterGroup', () =>
          this.#rds.send(
            new ResetDBClusterParameterGroupCommand({ DBClusterParameterGroupName: group.name, ResetAllParameters: false, Parameters }),
          ),
        );
      } else {
        await awsCall('rds:ModifyDBClusterParameterGroup', () =>
          this.#rds.send(new ModifyDBClusterParameterGroupCommand({ DBClusterParameterGroupName: group.name, Parameters })),
        );
      }
    });
  }
}

/** Resets as writes of what "not set" stands for, when the policy refuses the reset. */
function asValues(batch: readonly ParameterWrite[], refused: string): ParameterWrite[] {
  return batch.map((w) => {
    if (w.unsetValue === undefined)
      throw new Error(
        `${refused} is not allowed, and the value that stands for "not set" of ${w.name} is not known, so it cannot be written instead`,
      );
    return { ...w, value: w.unsetValue };
  });
}

const SETTING_TYPES: Record<string, string> = { bool: 'boolean', integer: 'integer', real: 'float', enum: 'string', string: 'string' };

function settingMeta(r: SettingRow): ParameterMeta {
  const allowedValues =
    r.vartype === 'bool'
      ? '0,1'
      : r.vartype === 'enum'
        ? r.enumvals?.join(',')
        : r.min_val !== null && r.max_val !== null
          ? `${r.min_val}-${r.max_val}`
          : undefined;
  return {
    name: r.name,
    applyType: r.context === 'postmaster' ? 'static' : 'dynamic',
    dataType: SETTING_TYPES[r.vartype] ?? 'string',
    allowedValues,
    modifiable: true,
    unsetDefault: undefined,
  };
}

function toMeta(p: Parameter): ParameterMeta {
  return {
    name: p.ParameterName,
    applyType: p.ApplyType === 'static' ? 'static' : 'dynamic',
    dataType: p.DataType,
    allowedValues: p.AllowedValues,
    modifiable: p.IsModifiable !== false,
    unsetDefault: p.Source === 'user' ? undefined : { source: p.Source ?? 'engine-default', value: p.ParameterValue },
  };
}

/** A value computed by Cloud A from the instance, e.g. `{DBInstanceClassMemory/32768}` or `LEAST(…)`. */
export function isFormula(value: string): boolean {
  return /[{}()]/.test(value);
}

const TRUE_WORDS = new Set(['on', 'true', 'yes', '1']);
const FALSE_WORDS = new Set(['off', 'false', 'no', '0']);

/** The value as the group stores it: Cloud A's boolean parameters take 1 and 0, not on and off. */
export function groupSpelling(meta: ParameterMeta, value: string): string {
  if (meta.dataType !== 'boolean' || isFormula(value)) return value;
  const word = value.trim().toLowerCase();
  if (TRUE_WORDS.has(word)) return '1';
  if (FALSE_WORDS.has(word)) return '0';
  return value;
}

/** The value as pg_settings shows it, for a plain value of the group (booleans as on/off). */
export function settingSpelling(meta: ParameterMeta, value: string): string {
  if (meta.dataType !== 'boolean') return value;
  const word = value.trim().toLowerCase();
  return TRUE_WORDS.has(word) ? 'on' : FALSE_WORDS.has(word) ? 'off' : value;
}

/** Why the group would refuse `value` (its AllowedValues: a range `a-b` or a list `a,b,c`), or null. */
export function groupValueProblem(meta: ParameterMeta, value: string): string | null {
  if (isFormula(value)) return null;
  return allowedValueProblem(value, meta.allowedValues, { numbers: 'finite', checkListOfOne: false });
}

// Writing the override layer of Cloud A, all or nothing:
//   plan (each value checked against the group: listed, modifiable, allowed; static values that
//   need a reboot only in restart mode, and never over reboot-pending changes of someone else)
//   → modify/reset calls of at most 20 parameters, the earlier ones undone if a later one fails
//   → wait for the group's apply status (applying → in-sync, or pending-reboot)
//   → reboot when a static value changed and restarts are allowed, wait until available
//   → on incompatible-parameters, or any failure after the write: put the previous values back.
import { RebootDBInstanceCommand, type RDSClient } from '@aws-sdk/client-rds';
import { isNeverTouch } from '../../../knobs/index.ts';
import type { Db } from '../../database/db.ts';
import { errorMessage, type Logger } from '../../base/log.ts';
import { sameSetting } from '../../database/settings.ts';
import { awsCall } from './aws.ts';
import type { Capabilities } from './capabilities.ts';
import {
  groupValueProblem,
  groupKey,
  groupLabel,
  groupSpelling,
  isFormula,
  MAX_PARAMETERS_PER_CALL,
  settingSpelling,
  type GroupRef,
  type ParameterGroups,
  type ParameterMeta,
  type ParameterWrite,
} from './groups.ts';
import { layersOf, readLayerValues, route } from './layers.ts';
import type { Placement, Topology } from './topology.ts';
import { poll, retryWhileBusy, type ManagedATimings } from './wait.ts';
import type { Overrides, WriteResult } from '../../../target/target.ts';

export interface ApplierDeps {
  rds: RDSClient;
  topology: Topology;
  groups: ParameterGroups;
  db: Db;
  log: Logger;
  timings: ManagedATimings;
  caps: Capabilities;
}

interface Planned extends ParameterWrite {
  group: GroupRef;
  meta: ParameterMeta;
  /** What the group held before (null: not set): what undo writes back. */
  before: string | null;
  /** What pg_settings shows once the value runs, when that can be known without Cloud A's formulas. */
  expectedSetting: string | undefined;
  /** A static value that differs from what the server runs now. */
  needsReboot: boolean;
}

interface PgRow {
  name: string;
  setting: string;
  boot_val: string | null;
}

export class IncompatibleParametersError extends Error {
  override name = 'IncompatibleParametersError';
}

const PARAMETER_NAME = /^[a-z_][a-z0-9_.]*$/;

/** The pg_settings value a group value gives, or undefined when Cloud A computes it (a formula). */
function expectedSetting(meta: ParameterMeta, value: string | null, row: PgRow | undefined): string | undefined {
  if (value !== null) return isFormula(value) ? undefined : settingSpelling(meta, value);
  const unset = meta.unsetDefault;
  if (!unset) return undefined;
  if (unset.value === undefined) return unset.source === 'engine-default' ? (row?.boot_val ?? undefined) : undefined;
  return isFormula(unset.value) ? undefined : settingSpelling(meta, unset.value);
}

/** Writes grouped by parameter group and kind (values, resets), at most 20 to a call. */
function batches(writes: readonly Planned[]): Array<{ group: GroupRef; items: Planned[] }> {
  const out: Array<{ group: GroupRef; items: Planned[] }> = [];
  const byGroup = new Map<string, Planned[]>();
  for (const w of writes) byGroup.set(groupKey(w.group), [...(byGroup.get(groupKey(w.group)) ?? []), w]);
  for (const items of byGroup.values()) {
    for (const part of [items.filter((w) => w.value !== null), items.filter((w) => w.value === null)]) {
      for (let i = 0; i < part.length; i += MAX_PARAMETERS_PER_CALL)
        out.push({ group: part[0]!.group, items: part.slice(i, i + MAX_PARAMETERS_PER_CALL) });
    }
  }
  return out;
}

const plural = (n: number, one: string, many: string) => (n === 1 ? one : many);

export class ParameterApplier {
  readonly #d: ApplierDeps;

  constructor(deps: ApplierDeps) {
    this.#d = deps;
  }

  async write(placement: Placement, overrides: Overrides, allowRestart: boolean): Promise<WriteResult> {
    const plan = await this.#plan(placement, overrides, allowRestart);
    if (plan.length === 0) return { restarted: false };
    const reboot = plan.some((p) => p.needsReboot);
    await this.#writeAll(plan);
    let rebooted = false;
    try {
      await this.#awaitApplied(placement, plan);
      if (reboot) {
        await this.#reboot(placement, plan, false);
        rebooted = true;
      }
    } catch (err) {
      await this.#rollback(placement, plan, err, rebooted);
    }
    await this.#converge(plan);
    return { restarted: rebooted };
  }

  /** Checks every entry against its group before anything is written; throws with all problems. */
  async #plan(placement: Placement, overrides: Overrides, allowRestart: boolean): Promise<Planned[]> {
    const names = Object.keys(overrides);
    for (const name of names) {
      if (!PARAMETER_NAME.test(name)) throw new Error(`refused: "${name}" is not a parameter name`);
      if (isNeverTouch(name)) throw new Error(`refused: ${name} is a durability or security setting that the agent never changes`);
    }
    if (placement.instance.status === 'incompatible-parameters') {
      throw new Error(
        `${placement.instance.id} is in the incompatible-parameters state: correct its parameter group and reboot it; the agent changes nothing until then`,
      );
    }
    const { groups, db, caps } = this.#d;
    const routes = await route(groups, placement, names, caps);
    const { overrides: current } = await readLayerValues(groups, placement, names, caps);
    const rows = new Map(
      (await db.query<PgRow>('SELECT name, setting, boot_val FROM pg_settings WHERE name = ANY($1)', [names])).map((r) => [r.name, r]),
    );
    const problems: string[] = [];
    const plan: Planned[] = [];
    for (const name of names) {
      const { group, meta, excluded } = routes.get(name)!;
      const wanted = overrides[name]!;
      if (excluded) {
        problems.push(excluded);
        continue;
      }
      if (!meta) {
        problems.push(`${name} is not a parameter of ${layersOf(placement).map(groupLabel).join(' or ')}`);
        continue;
      }
      if (!meta.modifiable) {
        problems.push(`${name} cannot be modified in ${groupLabel(group)} (IsModifiable is false)`);
        continue;
      }
      const value = wanted.set ? groupSpelling(meta, wanted.value) : null;
      const refusal = value === null ? null : groupValueProblem(meta, value);
      if (refusal) {
        problems.push(`${name} = ${value}: ${groupLabel(group)} does not allow it (${refusal}, AllowedValues ${meta.allowedValues})`);
        continue;
      }
      const was = current[name]!;
      const before = was.set ? was.value : null;
      if (before === value) continue; // already so in the group: nothing to write
      const expected = expectedSetting(meta, value, rows.get(name));
      const running = rows.get(name)?.setting;
      const needsReboot =
        meta.applyType === 'static' && (expected === undefined || running === undefined || !sameSetting(expected, running));
      const row = rows.get(name);
      // "Not set" as a value, for a policy without the reset action: the group's own default, or
      // what the server ran while it was unset (before), or PostgreSQL's own default.
      const unsetRaw = meta.unsetDefault?.value ?? (before === null ? row?.setting : (row?.boot_val ?? undefined));
      const unsetValue = unsetRaw === undefined ? undefined : groupSpelling(meta, unsetRaw);
      plan.push({ name, value, applyType: meta.applyType, group, meta, before, expectedSetting: expected, needsReboot, unsetValue });
    }
    if (problems.length > 0) throw new Error(`Cloud A cannot take this change, so nothing of it was written: ${problems.join('; ')}`);

    const rebootFor = plan.filter((p) => p.needsReboot).map((p) => p.name);
    if (rebootFor.length > 0 && !allowRestart) {
      throw new Error(
        `${rebootFor.join(', ')} ${plural(rebootFor.length, 'is a static parameter', 'are static parameters')} (ApplyType static): ` +
          'a new value takes effect only after a reboot, and restart mode is off (postgresql.allow_restart: false); nothing was written',
      );
    }
    if (rebootFor.length > 0) {
      const pending = this.#pendingReboot(placement);
      if (pending.length > 0) {
        throw new Error(
          `the ${pending.join(' and ')} already ${plural(pending.length, 'has', 'have')} changes waiting for a reboot of ${placement.instance.id} that the agent did not make, ` +
            'and the agent never reboots over changes it did not make: reboot the instance yourself at a good time (or undo those changes), then try again; nothing was written',
        );
      }
    }
    return plan;
  }

  /** Groups of the placement that already wait for a reboot. */
  #pendingReboot({ instance, cluster }: Placement): string[] {
    const pending: string[] = [];
    if (instance.parameterGroup.applyStatus === 'pending-reboot')
      pending.push(groupLabel({ kind: 'instance', name: instance.parameterGroup.name }));
    const member = cluster?.members.find((m) => m.id === instance.id);
    if (cluster?.parameterGroup && member?.parameterGroupStatus === 'pending-reboot')
      pending.push(groupLabel({ kind: 'cluster', name: cluster.parameterGroup }));
    return pending;
  }

  /** All batches, or none: when a call fails, what the groups now hold of the change (read
   * again: a call that failed, a time-out say, may still have been carried out) is put back. */
  async #writeAll(plan: readonly Planned[]): Promise<void> {
    const written: Planned[] = [];
    for (const batch of batches(plan)) {
      this.#d.log.debug(
        `${groupLabel(batch.group)}: ${batch.items.map((w) => (w.value === null ? `reset ${w.name}` : `${w.name}=${w.value}`)).join(', ')}`,
      );
      try {
        await this.#d.groups.writeBatch(batch.group, batch.items);
      } catch (err) {
        const attempted = [...written, ...batch.items];
        const held = await this.#changedSinceBefore(attempted).catch(() => attempted);
        if (held.length === 0) throw err;
        const what = held.every((p) => written.includes(p)) ? 'written by earlier calls' : 'the groups held of the change';
        const undoFailure = await this.#writeBack(held).then(
          () => null,
          (undoErr: unknown) => undoErr,
        );
        if (undoFailure !== null) {
          throw new Error(
            `${errorMessage(err)}; putting back the ${held.length} parameter(s) ${what} failed too: ${errorMessage(undoFailure)}`,
            { cause: err },
          );
        }
        throw new Error(`${errorMessage(err)}; the ${held.length} parameter(s) ${what} were put back, so nothing of the change was kept`, {
          cause: err,
        });
      }
      written.push(...batch.items);
    }
  }

  /** The entries of `plan` whose group holds something else than before the change, read now. */
  async #changedSinceBefore(plan: readonly Planned[]): Promise<Planned[]> {
    const byGroup = new Map(plan.map((p) => [groupKey(p.group), p.group]));
    const values = new Map<string, Map<string, string>>();
    for (const [key, group] of byGroup) values.set(key, await this.#d.groups.userValues(group));
    return plan.filter((p) => (values.get(groupKey(p.group))?.get(p.name) ?? null) !== p.before);
  }

  /** Writes the `before` values of `plan` (no undo of the undo). */
  async #writeBack(plan: readonly Planned[]): Promise<Planned[]> {
    const back = plan.map((p) => ({ ...p, value: p.before, before: p.value, expectedSetting: undefined }));
    for (const batch of batches(back)) await this.#d.groups.writeBatch(batch.group, batch.items);
    return back;
  }

  /** The apply status of the placement's instance and of each group in `groups`. */
  async #statuses(
    placement: Placement,
    groups: readonly GroupRef[],
  ): Promise<{ instance: string; groups: Map<string, string | undefined> }> {
    const { topology } = this.#d;
    const instance = await topology.describeInstance(placement.instance.id);
    const statuses = new Map<string, string | undefined>();
    for (const g of groups.filter((x) => x.kind === 'instance')) {
      statuses.set(groupKey(g), instance.parameterGroup.name === g.name ? instance.parameterGroup.applyStatus : undefined);
    }
    const clusterGroups = groups.filter((x) => x.kind === 'cluster');
    if (clusterGroups.length > 0 && placement.cluster) {
      const cluster = await topology.describeCluster(placement.cluster.id);
      const member = cluster.members.find((m) => m.id === placement.instance.id);
      for (const g of clusterGroups)
        statuses.set(groupKey(g), cluster.parameterGroup === g.name ? member?.parameterGroupStatus : undefined);
    }
    return { instance: instance.status, groups: statuses };
  }

  /** Values that pg_settings shows as expected (all known ones); false when one cannot be known. */
  async #converged(plan: readonly Planned[]): Promise<boolean> {
    if (plan.length === 0 || plan.some((p) => p.expectedSetting === undefined)) return false;
    const rows = await this.#d.db.query<{ name: string; setting: string }>('SELECT name, setting FROM pg_settings WHERE name = ANY($1)', [
      plan.map((p) => p.name),
    ]);
    const settings = new Map(rows.map((r) => [r.name, r.setting]));
    return plan.every((p) => settings.has(p.name) && sameSetting(settings.get(p.name)!, p.expectedSetting!));
  }

  /**
   * Waits until Cloud A has applied the writes: each group `in-sync` (dynamic values) or
   * `pending-reboot` (static ones). Right after a change Cloud A may still show the old
   * `in-sync`, so that status counts only after `applying` was seen, or the values show in
   * pg_settings, or it has held for the settle time.
   */
  async #awaitApplied(placement: Placement, plan: readonly Planned[]): Promise<void> {
    const { timings } = this.#d;
    const groups = [...new Map(plan.map((p) => [groupKey(p.group), p.group])).values()];
    const dynamic = plan.filter((p) => p.applyType === 'dynamic');
    const seenApplying = new Set<string>();
    await poll(`Cloud A to apply the parameter changes to ${placement.instance.id}`, timings, timings.applyTimeoutMs, async (elapsed) => {
      const now = await this.#statuses(placement, groups);
      const bad = [now.instance, ...now.groups.values()].includes('incompatible-parameters');
      if (bad)
        throw new IncompatibleParametersError(`Cloud A reports incompatible-parameters for ${placement.instance.id} after the change`);
      for (const [key, status] of now.groups) if (status === 'applying') seenApplying.add(key);
      const settled = elapsed >= timings.settleMs;
      const converged = dynamic.length > 0 && (await this.#converged(dynamic));
      const ready = groups.every((g) => {
        const key = groupKey(g);
        const status = now.groups.get(key);
        if (status !== 'in-sync' && status !== 'pending-reboot') return false;
        const mine = plan.filter((p) => groupKey(p.group) === key);
        const staticDone = !mine.some((p) => p.applyType === 'static') || status === 'pending-reboot' || settled;
        const dynamicDone = !mine.some((p) => p.applyType === 'dynamic') || seenApplying.has(key) || converged || settled;
        return staticDone && dynamicDone;
      });
      return ready ? true : undefined;
    });
  }

  /** Reboots the instance and waits until it is available with nothing pending; then PostgreSQL. */
  async #reboot(placement: Placement, plan: readonly Planned[], repairing: boolean): Promise<void> {
    const { rds, timings, log, db, topology } = this.#d;
    const id = placement.instance.id;
    const groups = [...new Map(plan.map((p) => [groupKey(p.group), p.group])).values()];
    // A reboot needs the instance available, or stuck in incompatible-parameters (it repairs that).
    await poll(`${id} to be available for a reboot`, timings, timings.rebootTimeoutMs, async () => {
      const status = (await topology.describeInstance(id)).status;
      return status === 'available' || (repairing && status === 'incompatible-parameters') ? true : undefined;
    });
    const pendingBefore = [...(await this.#statuses(placement, groups)).groups.values()].includes('pending-reboot');
    log.info(
      `rebooting ${id} (RebootDBInstance) so that ${
        plan
          .filter((p) => p.applyType === 'static')
          .map((p) => p.name)
          .join(', ') || 'the parameter group'
      } take effect`,
    );
    await retryWhileBusy(timings, () =>
      awsCall('rds:RebootDBInstance', () => rds.send(new RebootDBInstanceCommand({ DBInstanceIdentifier: id }))),
    );
    let sawRebooting = false;
    await poll(`${id} to come back from its reboot`, timings, timings.rebootTimeoutMs, async (elapsed) => {
      const now = await this.#statuses(placement, groups);
      const settled = elapsed >= timings.settleMs;
      if (now.instance === 'rebooting') sawRebooting = true;
      if (now.instance === 'incompatible-parameters' && (!repairing || sawRebooting || settled)) {
        throw new IncompatibleParametersError(`Cloud A reports incompatible-parameters for ${id} after its reboot`);
      }
      if (now.instance !== 'available' || [...now.groups.values()].includes('pending-reboot')) return undefined;
      return sawRebooting || pendingBefore || settled ? true : undefined;
    });
    await db.waitUntilReachable(timings.rebootTimeoutMs);
    log.info(`${id} is available again after its reboot`);
  }

  /**
   * After a failure past the write: the previous values go back, and the instance is rebooted
   * when it cannot run as it is (incompatible-parameters: a reboot is the only way out of that
   * state) or when the new static values already run. Always throws, saying what was done.
   */
  async #rollback(placement: Placement, plan: readonly Planned[], cause: unknown, rebooted: boolean): Promise<never> {
    const { log } = this.#d;
    const incompatible = cause instanceof IncompatibleParametersError;
    log.warn(`${errorMessage(cause)}: putting the previous values back`);
    const staticRan = rebooted && plan.some((p) => p.applyType === 'static');
    const rebootToo = incompatible || staticRan;
    const putBack = async () => {
      const back = await this.#writeBack(plan);
      await this.#awaitApplied(placement, back).catch((err: unknown) => {
        if (!incompatible) throw err;
      });
      if (rebootToo) {
        if (incompatible)
          log.warn(
            `rebooting ${placement.instance.id} with the previous values: an instance in incompatible-parameters does not start until it is rebooted with values it accepts`,
          );
        await this.#reboot(placement, back, incompatible);
      }
    };
    const failure = await putBack().then(
      () => null,
      (err: unknown) => err,
    );
    if (failure !== null)
      throw new Error(`${errorMessage(cause)}; putting the previous values back failed: ${errorMessage(failure)}`, { cause });
    const done = rebootToo
      ? `the previous values were put back and ${placement.instance.id} was rebooted with them`
      : 'the previous values were put back';
    throw new Error(`${errorMessage(cause)}; ${done}`, { cause });
  }

  /** Applied values can take a moment to show in a session's pg_settings; wait a little, never fail. */
  async #converge(plan: readonly Planned[]): Promise<void> {
    const known = plan.filter((p) => p.expectedSetting !== undefined);
    if (known.length === 0) return;
    const { timings } = this.#d;
    await poll('the new values to show in pg_settings', { ...timings, maxPollMs: 1_000 }, timings.convergeTimeoutMs, async () =>
      (await this.#converged(known)) ? true : undefined,
    ).catch(() => undefined);
  }
}

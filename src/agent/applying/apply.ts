// Applying and undoing configurations, the same way on every target:
//   validate against the agent's own catalog and bounds (whatever asked for the change)
//   → journal the intent → write through the target → read every value back from pg_settings
//   → on any mismatch, put the previous values back and say so.
import { randomUUID } from 'node:crypto';
import { validateChange, type TuningMode } from '../../knobs/index.ts';
import { tuningModeOf } from '../../protocol/v1.ts';
import { TARGETS } from '../targets/registry.ts';
import type { AgentConfig } from '../config/agent-config.ts';
import type { Db } from '../database/db.ts';
import { sameOverride, type Journal } from './journal.ts';
import type { Logger } from '../base/log.ts';
import { errorMessage } from '../base/log.ts';
import { readSettings, sameSetting, type Settings } from '../database/settings.ts';
import { EnvironmentChangedError, type Override, type Overrides, type Target } from '../../target/target.ts';

export interface ApplyContext {
  db: Db;
  target: Target;
  journal: Journal;
  config: AgentConfig;
  log: Logger;
}

export type ApplyOutcome =
  /** Written and read back as intended. */
  | { status: 'applied'; id: string; effective: Record<string, string>; restarted: boolean }
  /** Refused by the agent's checks: nothing was changed. */
  | { status: 'refused'; id: string; errors: string[] }
  /** Something failed on the way; the previous values were put back (`restored`) or could not be.
   * `environment`: the environment made it fail (a failover, a member's restart), not the values. */
  | { status: 'failed'; id: string; errors: string[]; restored: boolean; effective: Record<string, string>; environment?: boolean };

export function tuningMode(config: AgentConfig): TuningMode {
  return tuningModeOf(config.postgresql.allowRestart);
}

/** Server-wide values that a per-role or per-database SET would hide from the agent's session. */
const SESSION_SOURCES = new Set(['database', 'user', 'database user', 'session', 'client']);

/** Reads `expected` back from pg_settings: a problem per value that differs or waits for a restart. */
export async function readBack(
  db: Db,
  expected: Record<string, string>,
): Promise<{ effective: Record<string, string>; problems: string[] }> {
  const settings = await readSettings(db);
  const effective: Record<string, string> = {};
  const problems: string[] = [];
  for (const [name, want] of Object.entries(expected)) {
    const row = settings[name];
    if (!row) {
      problems.push(`${name}: not found in pg_settings`);
      continue;
    }
    effective[name] = row.setting;
    const unit = row.unit ? ` (unit ${row.unit})` : '';
    if (SESSION_SOURCES.has(row.source ?? '')) {
      problems.push(
        `${name}: the agent's session sees a ${row.source}-level value, so the server-wide value cannot be verified; remove the ALTER ROLE/DATABASE ... SET ${name}`,
      );
    } else if (row.pending_restart) {
      problems.push(`${name}: waits for a restart (running ${row.setting}${unit})`);
    } else if (!sameSetting(row.setting, want)) {
      problems.push(`${name}: pg_settings shows ${row.setting}${unit}, expected ${want}`);
    }
  }
  return { effective, problems };
}

/** The pg_settings value that `override` must produce: its own value, or the one recorded when
 * the agent first found that override (an unset override, or a baseline spelled with units). */
function expectedSetting(journal: Journal, name: string, override: Overrides[string], current: Settings): string {
  const d = journal.data;
  if (sameOverride(override, d.baseline[name]) && d.baselineSettings[name] !== undefined) return d.baselineSettings[name];
  if (override.set) return override.value;
  return current[name]?.reset_val ?? current[name]?.boot_val ?? '';
}

/** Writes `to`, journaled, and verifies it; on failure puts `from` back. Shared by apply and restore.
 * `asked`: the pg_settings values the change asked for (an apply's validated values), when known. */
async function writeVerified(
  ctx: ApplyContext,
  id: string,
  to: Overrides,
  accept: boolean,
  allowRestart = ctx.config.postgresql.allowRestart,
  asked: Record<string, string> = {},
): Promise<ApplyOutcome> {
  const { db, target, journal, log } = ctx;
  const names = Object.keys(to);
  const before = await readSettings(db);
  const from = await target.readOverrides(names);
  const settingsNow = Object.fromEntries(names.map((n) => [n, before[n]?.setting ?? '']));
  journal.beginChange(id, from, to, settingsNow);
  const expected = Object.fromEntries(names.map((n) => [n, asked[n] ?? expectedSetting(journal, n, to[n]!, before)]));

  // Only what differs from the override layer now is written: a parameter already there is not
  // written again, unless the server does not run it (it waits for a restart, or the platform
  // holds it as configured but pending): the write then meets the target's own checks.
  const runs = (name: string) =>
    before[name] !== undefined && !before[name].pending_restart && sameSetting(before[name].setting, expected[name]!);
  const changed: Overrides = Object.fromEntries(Object.entries(to).filter(([name, o]) => !sameOverride(from[name], o) || !runs(name)));
  let problems: string[];
  try {
    const { restarted } = Object.keys(changed).length === 0 ? { restarted: false } : await target.writeOverrides(changed, { allowRestart });
    const check = await readBack(db, expected);
    if (check.problems.length === 0) {
      journal.finishChange(accept);
      return { status: 'applied', id, effective: check.effective, restarted };
    }
    problems = check.problems;
    log.warn(`change ${id} did not read back as intended (${problems.join('; ')}): putting the previous values back`);
  } catch (err) {
    // A write, a reload or a restart cut off half-way (a timeout, a terminated session, a server
    // that went away): where the code was says nothing about what the server now holds.
    problems = [`writing the change failed: ${errorMessage(err)}`];
    log.warn(`change ${id} failed (${errorMessage(err)}): reading back what the server holds`);
    if (err instanceof EnvironmentChangedError) {
      const outcome = await undoFailedChange(ctx, id, { from, to, settingsNow }, problems, allowRestart);
      return outcome.status === 'failed' ? { ...outcome, environment: true } : outcome;
    }
  }
  return undoFailedChange(ctx, id, { from, to, settingsNow }, problems, allowRestart);
}

interface Change {
  /** The override layer before the change, and the change itself. */
  from: Overrides;
  to: Overrides;
  /** pg_settings before the change: what the server runs again once it is undone. */
  settingsNow: Record<string, string>;
}

/** What the server holds of `change`, read back: each parameter whose override layer holds the
 * new value or whose pg_settings value is not the one from before, or why that cannot be known.
 * Empty when nothing of the change remains. */
async function whatRemains(ctx: ApplyContext, change: Change): Promise<{ remains: string[]; effective: Record<string, string> }> {
  const names = Object.keys(change.to);
  const remains: string[] = [];
  try {
    const held = await ctx.target.readOverrides(names);
    for (const name of names) {
      const wanted = change.to[name]!;
      if (!sameOverride(wanted, change.from[name]) && sameOverride(held[name], wanted))
        remains.push(`${name}: the override layer holds ${showOverride(wanted)}`);
    }
  } catch (err) {
    // Nothing can be concluded; a server that cannot be reached would only make the next read wait too.
    return { remains: [`the override layer could not be read back: ${errorMessage(err)}`], effective: {} };
  }
  const effective: Record<string, string> = {};
  try {
    const settings = await readSettings(ctx.db);
    for (const name of names) {
      const live = settings[name]?.setting;
      if (live === undefined) continue;
      effective[name] = live;
      const was = change.settingsNow[name] ?? '';
      if (!sameSetting(live, was)) remains.push(`${name}: pg_settings shows ${live}, was ${was}`);
    }
  } catch (err) {
    remains.push(`pg_settings could not be read back: ${errorMessage(err)}`);
  }
  return { remains, effective };
}

function showOverride(o: Overrides[string]): string {
  return o.set ? `'${o.value}'` : 'no entry';
}

/**
 * After any failure in a write: decides from what the server holds, read back, whether anything of
 * the change remains; puts the previous values back if it does, and reads back again. Only a
 * server read back at its previous values ends the change in the journal as undone; otherwise the
 * change stays in flight, so that the loop, shutdown or the next start returns the database to
 * known-good as soon as it answers.
 */
async function undoFailedChange(
  ctx: ApplyContext,
  id: string,
  change: Change,
  problems: string[],
  allowRestart: boolean,
): Promise<ApplyOutcome> {
  const { target, journal, log } = ctx;
  /** Nothing of the change is on the server: the journal lets go of it. */
  const restored = (now: typeof held, why: string): ApplyOutcome => {
    journal.abortChange();
    return { status: 'failed', id, errors: [...problems, why], restored: true, effective: now.effective };
  };
  let held = await whatRemains(ctx, change);
  if (held.remains.length === 0) return restored(held, 'read back: nothing of the change was kept');
  log.warn(`change ${id}: the server holds part of it (${held.remains.join('; ')}): putting the previous values back`);
  const undoError = await target.writeOverrides(change.from, { allowRestart }).then(
    () => null,
    (err: unknown) => err,
  );
  held = await whatRemains(ctx, change);
  if (held.remains.length === 0) return restored(held, 'the previous values were put back and read back');
  const errors = [
    ...problems,
    ...(undoError === null ? [] : [`putting the previous values back failed: ${errorMessage(undoError)}`]),
    `the server still holds part of the change or cannot be read (${held.remains.join('; ')}): it stays in the journal, and the agent returns to known-good as soon as the server answers`,
  ];
  log.error(`change ${id}: ${errors.at(-1)}`);
  return { status: 'failed', id, errors, restored: false, effective: held.effective };
}

export interface ApplyOptions {
  id?: string;
  /** On success, the change becomes the known-good configuration. */
  accept: boolean;
  /** Narrows restart mode for this change only (a service command may forbid restarts); it can
   * never widen it beyond postgresql.allow_restart. */
  allowRestart?: boolean;
}

/** The known-good override of `name`: the journal's, once the agent has touched it; else what
 * the layer holds now (nothing the agent did is there). */
function knownGoodOverride(journal: Journal, name: string, held: Override): Override {
  return journal.data.knownGood[name] ?? held;
}

/** The pg_settings value the known-good override gives, when it can be told without writing it. */
function knownGoodSetting(journal: Journal, name: string, held: Override, settings: Settings): string | undefined {
  const d = journal.data;
  const knownGood = knownGoodOverride(journal, name, held);
  const row = settings[name];
  if (row && !row.pending_restart && sameOverride(held, knownGood)) return row.setting;
  if (sameOverride(knownGood, d.baseline[name]) && d.baselineSettings[name] !== undefined) return d.baselineSettings[name];
  return knownGood.set ? knownGood.value : undefined;
}

/**
 * The override that gives `value` for `name`: the known-good one when it gives that value already,
 * else the value itself. A service's configuration names every knob of its search space, most at
 * the values the database runs anyway; written as they are, each would become an entry of the
 * override layer (27 parameters in Patroni's dynamic configuration for a trial that changed one).
 * So a trial changes only what differs from known-good, and its revert has only that to undo.
 */
function overrideFor(journal: Journal, name: string, value: string, held: Override | undefined, settings: Settings): Override {
  const layer = held ?? { set: false };
  const knownGood = knownGoodSetting(journal, name, layer, settings);
  return knownGood !== undefined && sameSetting(value, knownGood) ? knownGoodOverride(journal, name, layer) : { set: true, value };
}

/** Applies `change` (parameter → value) if, and only if, all of it passes the agent's checks. */
export async function applyChange(
  ctx: ApplyContext,
  change: Record<string, string | number>,
  options: ApplyOptions,
): Promise<ApplyOutcome> {
  const id = options.id ?? randomUUID();
  const allowRestart = ctx.config.postgresql.allowRestart && (options.allowRestart ?? true);
  const blocked = await ctx.target.applyBlockedReason();
  if (blocked) return { status: 'refused', id, errors: [blocked] };
  const { machine } = await ctx.target.machine();
  const settings = await readSettings(ctx.db);
  const mode = tuningModeOf(allowRestart);
  const verdict = validateChange(change, {
    machine,
    mode,
    target: ctx.target.kind,
    capabilities: TARGETS.capabilitiesOf(ctx.target.kind),
    settings,
  });
  if (!verdict.ok) return { status: 'refused', id, errors: verdict.errors };
  // What the management interface will not write here (a cluster-level parameter behind a
  // default.* cluster group, a parameter Cloud B's intelligent tuning owns) is refused before
  // anything is written, as the catalog's refusals are; the target would refuse it too.
  const unwritable = await ctx.target.unwritable(Object.keys(verdict.values));
  if (unwritable.size > 0) {
    return { status: 'refused', id, errors: [...unwritable].map(([name, why]) => `${name} cannot be changed here: ${why}`) };
  }
  const held = await ctx.target.readOverrides(Object.keys(verdict.values));
  const to: Overrides = Object.fromEntries(
    Object.entries(verdict.values).map(([name, v]) => [name, overrideFor(ctx.journal, name, String(v), held[name], settings)]),
  );
  ctx.log.info(
    `applying change ${id}: ${Object.entries(verdict.values)
      .map(([n, v]) => `${n}=${v}`)
      .join(', ')}`,
  );
  const asked = Object.fromEntries(Object.entries(verdict.values).map(([name, v]) => [name, String(v)]));
  return writeVerified(ctx, id, to, options.accept, allowRestart, asked);
}

/** Returns the parameters the agent ever changed to the baseline it found, or to the last
 * known-good configuration. The restored configuration becomes the known-good one. */
export async function restore(ctx: ApplyContext, which: 'baseline' | 'knownGood', reason: string): Promise<ApplyOutcome | null> {
  const d = ctx.journal.data;
  const names = new Set([...Object.keys(d.applied), ...Object.keys(d.inFlight?.to ?? {})]);
  const to: Overrides = {};
  for (const name of names) {
    const o = d[which][name] ?? d.baseline[name];
    if (o) to[name] = o;
  }
  if (Object.keys(to).length === 0) return null;
  const id = randomUUID();
  // What to write is decided from what the server holds: when its override layer is already
  // where we return to (a change that failed and was undone, a crash after the write), nothing is
  // written. Writing anyway would need rights the agent may lack (ALTER SYSTEM before 15 needs a
  // superuser) for a change that changes nothing.
  const held = await ctx.target.readOverrides(Object.keys(to));
  if (Object.keys(to).every((name) => sameOverride(held[name], to[name]))) {
    const journalBehind =
      d.inFlight !== null || Object.keys(to).some((n) => !sameOverride(d.applied[n], to[n]) || !sameOverride(d.knownGood[n], to[n]));
    if (journalBehind) {
      ctx.journal.beginChange(id, held, to, {});
      ctx.journal.finishChange(true);
    }
    ctx.log.info(
      `${reason}: the server already holds the ${which === 'baseline' ? 'baseline' : 'last known-good configuration'}; nothing to write`,
    );
    return null;
  }
  ctx.log.info(
    `${reason}: returning ${Object.keys(to).join(', ')} to the ${which === 'baseline' ? 'baseline' : 'last known-good configuration'} (change ${id})`,
  );
  return writeVerified(ctx, id, to, true);
}

/** Why the database must go back to known-good on start, or null when it need not. */
export function recoveryReason(ctx: ApplyContext): string | null {
  if (!ctx.journal.needsRecovery()) return null;
  const inFlight = ctx.journal.data.inFlight;
  return inFlight
    ? `an unfinished change (${inFlight.id}, begun ${inFlight.startedAt}) was found in ${ctx.journal.path}`
    : `the applied configuration was never accepted (${ctx.journal.path})`;
}

/** On start: a change cut off by a crash, or a configuration never accepted, goes back to known-good. */
export async function recoverOnStart(ctx: ApplyContext): Promise<ApplyOutcome | null> {
  const reason = recoveryReason(ctx);
  if (!reason) return null;
  ctx.log.warn(`${reason}: returning the database to its last known-good configuration`);
  return restore(ctx, 'knownGood', 'recovery');
}

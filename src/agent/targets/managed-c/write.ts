// Writing Cloud SQL's database flags. instances.patch with settings.databaseFlags replaces the
// whole list: every flag left out goes back to its default. So each change is a read-modify-write
// of the list as the instance holds it now (the customer's flags kept, only the agent's names
// changed), sent with the settingsVersion read with it; when someone else changed the settings in
// between, Cloud SQL refuses the stale version, and the agent reads again and merges again rather
// than write over the other change. The patch's operation is polled to DONE and its error read;
// when it fails, the agent's names are put back to the values it found (the customer's flags as
// they are now). A flag that Cloud SQL applies with a restart of the instance is written only when
// restarts are allowed, the restart announced and waited for.
import { isNeverTouch } from '../../../knobs/index.ts';
import type { Db } from '../../database/db.ts';
import { errorMessage, type Logger } from '../../base/log.ts';
import { sameSetting } from '../../database/settings.ts';
import { untilVisible } from '../until-visible.ts';
import { UndoFailedError, type Override, type Overrides, type WriteOptions, type WriteResult } from '../../../target/target.ts';
import type { DatabaseFlag, Instance, ManagedCApi } from './api.ts';
import { googleFailure, isStaleSettings, ManagedCError } from './errors.ts';
import { CLOUD_SQL_FLAGS, flagValueProblem } from './flags.ts';

/** How many times a stale settings version is read again before giving up. */
const CONFLICT_RETRIES = 5;
const RESTART_TIMEOUT_MS = 10 * 60_000;

export function overrideOf(flags: readonly DatabaseFlag[] | undefined, name: string): Override {
  const f = flags?.find((x) => x.name === name);
  return f ? { set: true, value: f.value ?? '' } : { set: false };
}

/** The list with `overrides` applied: the agent's names replaced or removed, every other flag
 * as it is and where it is. */
export function mergeFlags(current: readonly DatabaseFlag[], overrides: Overrides): DatabaseFlag[] {
  const out: DatabaseFlag[] = [];
  const done = new Set<string>();
  for (const f of current) {
    const o = overrides[f.name];
    if (!o) out.push(f);
    else if (o.set) {
      out.push({ name: f.name, value: o.value });
      done.add(f.name);
    }
  }
  for (const [name, o] of Object.entries(overrides))
    if (o.set && !done.has(name) && !current.some((f) => f.name === name)) out.push({ name, value: o.value });
  return out;
}

function sameFlags(a: readonly DatabaseFlag[], b: readonly DatabaseFlag[]): boolean {
  return a.length === b.length && a.every((f) => b.some((g) => g.name === f.name && sameSetting(g.value ?? '', f.value ?? '')));
}

/** The names whose state differs between two lists. */
function changedNames(before: readonly DatabaseFlag[], overrides: Overrides): string[] {
  return Object.entries(overrides)
    .filter(([name, o]) => {
      const was = overrideOf(before, name);
      return o.set ? !was.set || !sameSetting(was.value, o.value) : was.set;
    })
    .map(([name]) => name);
}

/** A second line behind the catalog: only Cloud SQL flags of the table, never a durability or
 * security setting; values within Cloud SQL's ranges; no restart flag unless allowed. Nothing is
 * written when one is refused, and a refusal is not retried. */
export function checkWritable(overrides: Overrides, options: WriteOptions, memoryBytes: number | undefined): void {
  const problems: string[] = [];
  for (const [name, o] of Object.entries(overrides)) {
    const flag = CLOUD_SQL_FLAGS[name];
    if (!flag) problems.push(`${name} is not one of the Cloud SQL flags the agent tunes`);
    else if (isNeverTouch(name)) problems.push(`${name} is a durability or security setting that the agent never changes`);
    else if (flag.restart && !options.allowRestart)
      problems.push(`${name} makes Cloud SQL restart the instance, and restarts are not allowed (reload-only mode)`);
    else if (o.set) {
      const problem = flagValueProblem(name, o.value, memoryBytes);
      if (problem) problems.push(`${name} = ${o.value} is not a value Cloud SQL allows for it on this instance (${problem})`);
    }
  }
  if (problems.length > 0) throw new Error(`refused, nothing was written: ${problems.join('; ')}`);
}

export interface WriteDeps {
  api: ManagedCApi;
  db: Db;
  log: Logger;
  memoryBytes: (instance: Instance) => number | undefined;
}

/** One read-modify-write, retried while the settings version is stale. Returns the list found
 * and the operation's outcome (undefined: nothing to change). */
async function patchMerged(
  api: ManagedCApi,
  log: Logger,
  overrides: Overrides,
  announce: (names: string[]) => void,
): Promise<{ found: DatabaseFlag[]; changed: string[] }> {
  for (let attempt = 1; ; attempt++) {
    await api.settle();
    const instance = await api.getInstance();
    const found = instance.settings.databaseFlags ?? [];
    const wanted = mergeFlags(found, overrides);
    const changed = changedNames(found, overrides);
    if (sameFlags(found, wanted)) return { found, changed: [] };
    announce(changed);
    let op;
    try {
      op = await api.patchFlags(wanted, instance.settings.settingsVersion);
    } catch (err) {
      const failure = err instanceof ManagedCError ? err.failure : googleFailure(err);
      if (isStaleSettings(failure) && attempt < CONFLICT_RETRIES) {
        log.info(
          `Cloud C: the instance's settings changed since they were read (settings version ${instance.settings.settingsVersion}): reading them again`,
        );
        continue;
      }
      throw err;
    }
    log.debug(`Cloud C: operation ${op.name} ${op.status}`);
    try {
      await api.waitForOperation(op);
    } catch (err) {
      throw new OperationFailedError(err, found);
    }
    return { found, changed };
  }
}

/** The patch was accepted and its operation failed (or could not be followed to its end): the
 * list as it was read before, to put the agent's names back to. */
class OperationFailedError extends Error {
  override name = 'OperationFailedError';
  readonly found: DatabaseFlag[];
  constructor(err: unknown, found: DatabaseFlag[]) {
    super(errorMessage(err), { cause: err });
    this.found = found;
  }
}

export async function writeFlags(deps: WriteDeps, overrides: Overrides, options: WriteOptions): Promise<WriteResult> {
  const { api, db, log } = deps;
  const first = await api.getInstance();
  checkWritable(overrides, options, deps.memoryBytes(first));
  let restartNames: string[] = [];
  const announce = (changed: string[]) => {
    restartNames = changed.filter((n) => CLOUD_SQL_FLAGS[n]?.restart);
    if (restartNames.length > 0)
      log.warn(
        `Cloud C: Cloud SQL restarts the instance ${api.instance} (and its replicas) to apply ${restartNames.join(', ')}: waiting for the restart`,
      );
  };
  try {
    const { changed } = await patchMerged(api, log, overrides, announce);
    for (const name of changed) {
      const o = overrides[name]!;
      log.info(`Cloud C: ${o.set ? `${name} = ${o.value}` : `${name} back to its default`}`);
    }
    if (restartNames.length > 0) await db.waitUntilReachable(RESTART_TIMEOUT_MS);
    const expected = changed.flatMap((name) => {
      const o = overrides[name]!;
      return o.set ? [[name, o.value] as const] : [];
    });
    await untilVisible(db, Object.fromEntries(expected), log, 'Cloud C');
    return { restarted: restartNames.length > 0 };
  } catch (err) {
    if (!(err instanceof OperationFailedError)) throw err;
    // Put the agent's names back as found, the others as they are now.
    const back: Overrides = Object.fromEntries(Object.keys(overrides).map((n) => [n, overrideOf(err.found, n)]));
    try {
      await patchMerged(api, log, back, () => undefined);
    } catch (undoErr) {
      throw new UndoFailedError(`${err.message}; putting the flags back failed: ${errorMessage(undoErr)}`, { cause: err });
    }
    throw new Error(`${err.message}; the flags found before were put back`, { cause: err });
  }
}

// Writing server parameters on Cloud B, all or nothing: one parameter at a time (each write is
// a long-running operation, and the server takes one at a time), undoing those already written
// when one fails, and undoing the whole change when a parameter turns out to wait for a restart
// (isConfigPendingRestart): Cloud B is tuned reload-only, the agent never restarts it.
//
// "Unset" means back to the server's default. There is no delete: the Azure CLI (`parameter set`
// without a value) and the Terraform provider (on destroy) both write the parameter's
// `defaultValue` with source `user-override`, the CLI noting that writing `system-default` runs
// into a service bug and that the service reports `system-default` again by itself. Same here.
import { isNeverTouch } from '../../../knobs/index.ts';
import { MANAGED_B_FLEX_KNOBS } from './parameters.ts';
import type { Db } from '../../database/db.ts';
import type { Logger } from '../../base/log.ts';
import { errorMessage } from '../../base/log.ts';
import { sameSetting } from '../../database/settings.ts';
import { untilVisible } from '../until-visible.ts';
import { USER_OVERRIDE, type ManagedBFlexApi, type ServerParameter } from './api.ts';
import { allowedValueProblem } from '../allowed-values.ts';
import { ManagedBFlexError } from './errors.ts';
import { intelligentTuningOf, INTELLIGENT_TUNING, METRIC_TARGETS } from './intelligent-tuning.ts';
import { UndoFailedError, type Override, type Overrides } from '../../../target/target.ts';

/** How long the agent's own session may take to see what Cloud B reports as applied. */

export function isUserOverride(p: ServerParameter): boolean {
  return (p.source ?? '').toLowerCase() === USER_OVERRIDE;
}

/** A parameter's state in the override layer, as Cloud B reports it. */
export function overrideOf(p: ServerParameter | undefined): Override {
  return p && isUserOverride(p) && p.value !== undefined ? { set: true, value: p.value } : { set: false };
}

/** A second line of defence behind the catalog: only the spec's 13 parameters, never a
 * durability or security setting, whatever a bug above might pass. */
function assertTunable(name: string): void {
  if (!MANAGED_B_FLEX_KNOBS.includes(name)) {
    throw new Error(
      `refused: ${name} is not one of the ${MANAGED_B_FLEX_KNOBS.length} parameters the agent tunes on Cloud B (${MANAGED_B_FLEX_KNOBS.join(', ')})`,
    );
  }
  if (isNeverTouch(name)) throw new Error(`refused: ${name} is a durability or security setting that the agent never changes`);
}

interface Desired {
  value: string;
  /** What the write means, for logs. */
  label: string;
}

function desiredOf(name: string, o: Override, p: ServerParameter): Desired {
  if (o.set) return { value: o.value, label: `${name} = ${o.value}` };
  if (p.defaultValue === undefined)
    throw new Error(`server parameter ${name} has no default value on this server, so it cannot be set back to its default`);
  return { value: p.defaultValue, label: `${name} back to its default (${p.defaultValue})` };
}

/** Already as wanted: nothing to write. */
function alreadyAs(o: Override, p: ServerParameter): boolean {
  return o.set ? isUserOverride(p) && p.value !== undefined && sameSetting(p.value, o.value) : !isUserOverride(p);
}

/**
 * Why Cloud B would refuse `value` against the configuration's `allowedValues`, or null. Cloud B
 * checks values itself, narrower than PostgreSQL at times, and takes no units ("16MB") or
 * synonyms ("true").
 */
function cloudBValueProblem(value: string, allowed: string | undefined): string | null {
  return allowedValueProblem(value, allowed, { numbers: 'plain', checkListOfOne: true });
}

/** Checks every entry before anything is written, so that a refusal changes nothing. */
function checkWritable(overrides: Overrides, params: Map<string, ServerParameter>): void {
  const problems: string[] = [];
  // Read with every change: intelligent tuning may have been turned on since the session began.
  // Back to the default stays allowed: it hands the parameter back (a revert must always work).
  const tuning = intelligentTuningOf(params);
  for (const [name, o] of Object.entries(overrides)) {
    const p = params.get(name);
    if (!p) problems.push(`${name} is not a server parameter of this server`);
    else if (o.set && tuning.parameters.includes(name))
      problems.push(
        `${name} is changed by Azure's intelligent tuning on this server (${tuning.setting}), and the agent does not tune against it (set ${METRIC_TARGETS} without it, or ${INTELLIGENT_TUNING} off, to let the agent tune it)`,
      );
    else if (p.isReadOnly) problems.push(`${name} is read-only on this server`);
    else if (p.isDynamicConfig === false)
      problems.push(`${name} is a static server parameter on this server (it takes a restart), and Cloud B is tuned reload-only`);
    else if (p.isConfigPendingRestart)
      // Cloud B then reports the configured value, not the one the server runs: never to be
      // taken as applied, nor written over as if it were.
      problems.push(
        `${name} already waits for a server restart on this server (isConfigPendingRestart: ${p.value ?? 'its value'} is configured, not running), and Cloud B is tuned reload-only`,
      );
    else if (o.set) {
      const problem = cloudBValueProblem(o.value, p.allowedValues);
      if (problem)
        problems.push(
          `${name} = ${o.value} is not a value Cloud B allows for it on this server (${problem}; allowed values: ${p.allowedValues})`,
        );
    }
  }
  if (problems.length > 0) throw new Error(`nothing was written: ${problems.join('; ')}`);
}

export interface WriteDeps {
  api: ManagedBFlexApi;
  db: Db;
  log: Logger;
}

export async function writeServerParameters({ api, db, log }: WriteDeps, overrides: Overrides): Promise<void> {
  const names = Object.keys(overrides);
  for (const name of names) assertTunable(name);
  const params = await api.listParameters();
  checkWritable(overrides, params);

  const write = async (name: string, o: Override): Promise<ServerParameter> => {
    const desired = desiredOf(name, o, params.get(name)!);
    log.info(`Cloud B: setting ${desired.label}`);
    return api.writeParameter(name, desired.value, USER_OVERRIDE);
  };

  /** Puts back, last first, each attempted parameter that the server now holds otherwise than
   * before: read again, because a write that failed (a time-out, say) may still have been
   * applied. Says what was, or could not be, put back. */
  const undo = async (attempted: string[]): Promise<{ ok: boolean; text: string }> => {
    let written = attempted;
    try {
      const now = await api.listParameters();
      written = attempted.filter((name) => !alreadyAs(overrideOf(params.get(name)), now.get(name) ?? { name }));
    } catch (err) {
      log.warn(`Cloud B: the server parameters cannot be read back (${errorMessage(err)}): putting back every parameter the change wrote`);
    }
    const failed: string[] = [];
    for (const name of [...written].reverse()) {
      try {
        const after = await write(name, overrideOf(params.get(name)));
        if (after.isConfigPendingRestart) failed.push(`${name} (still waits for a restart)`);
      } catch (err) {
        failed.push(`${name} (${errorMessage(err)})`);
      }
    }
    if (written.length === 0) return { ok: true, text: 'nothing was written' };
    return failed.length === 0
      ? { ok: true, text: `${written.join(', ')} ${written.length === 1 ? 'was' : 'were'} put back` }
      : { ok: false, text: `putting back failed for ${failed.join('; ')}` };
  };

  const written: string[] = [];
  const results = new Map<string, ServerParameter>();
  for (const name of names) {
    const o = overrides[name]!;
    if (alreadyAs(o, params.get(name)!)) continue;
    try {
      results.set(name, await write(name, o));
      written.push(name);
    } catch (err) {
      const undone = await undo([...written, name]);
      if (!undone.ok) throw new UndoFailedError(`${errorMessage(err)}; ${undone.text}`, { cause: err });
      if (err instanceof ManagedBFlexError) throw new ManagedBFlexError(`${err.problem}; ${undone.text}`, err.fix, err);
      throw new Error(`${errorMessage(err)}; ${undone.text}`, { cause: err });
    }
  }

  const pending = [...results].filter(([, p]) => p.isConfigPendingRestart).map(([name]) => name);
  if (pending.length > 0) {
    log.warn(`Cloud B reports ${pending.join(', ')} as waiting for a server restart: undoing the change (reload-only mode)`);
    const undone = await undo(written);
    const message = `${pending.join(', ')} would take effect only after a server restart on this server (isConfigPendingRestart), and Cloud B is tuned reload-only, without restarts`;
    if (!undone.ok) throw new UndoFailedError(`${message}: ${undone.text}`);
    throw new Error(`${message}: the change was undone (${undone.text})`);
  }
  await untilVisible(
    db,
    Object.fromEntries(written.map((n) => [n, results.get(n)?.value ?? desiredOf(n, overrides[n]!, params.get(n)!).value])),
    log,
    'Cloud B',
  );
}

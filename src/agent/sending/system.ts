// What the agent tells the service about its database: version, machine, and the catalog's
// parameters as the server has them. Shaped by the protocol, so both sides agree on it.
import { catalogFor, CONSTRAINT_INPUTS } from '../../knobs/index.ts';
import type { Setting, SystemInfo } from '../../protocol/v1.ts';
import type { Db } from '../database/db.ts';
import { readSettings } from '../database/settings.ts';
import type { Target } from '../../target/target.ts';
import { TARGETS } from '../targets/registry.ts';

/** The catalog's parameters (every mode, so the service sees what restart mode would tune), and
 * the settings its constraints read, which a target may not tune (Cloud B's memory budget reads
 * shared_buffers): the service checks its suggestions against them as the agent will. */
export async function catalogSettings(db: Db, target: Target): Promise<Setting[]> {
  const settings = await readSettings(db);
  const knobs = catalogFor(TARGETS.capabilitiesOf(target.kind), 'restart').map((k) => k.name);
  const unwritable = await target.unwritable(knobs);
  return [...new Set([...knobs, ...CONSTRAINT_INPUTS])].flatMap((name) => {
    const row = settings[name];
    if (!row) return [];
    const why = unwritable.get(name);
    return [
      {
        name: row.name,
        setting: row.setting,
        unit: row.unit,
        context: row.context,
        source: row.source ?? null,
        pendingRestart: row.pending_restart === true,
        ...(why && { unwritable: why }),
      },
    ];
  });
}

export async function describeSystem(db: Db, target: Target): Promise<SystemInfo> {
  const [version] = await db.query<{ version: string; num: string }>(
    `SELECT current_setting('server_version') AS version, current_setting('server_version_num') AS num`,
  );
  // An unknown machine size is reported as null, not fatal: collection works without it, and
  // the preflight says how to give it.
  const machine: SystemInfo['machine'] = await target.machine().then(
    (info) => ({ memoryBytes: Math.round(info.machine.memoryBytes), vcpus: info.machine.vcpus, source: info.source }),
    () => null,
  );
  return {
    serverVersion: version?.version ?? 'unknown',
    serverVersionNum: Number(version?.num ?? 0),
    machine,
    settings: await catalogSettings(db, target),
    applyBlockedReason: await target.applyBlockedReason(),
  };
}

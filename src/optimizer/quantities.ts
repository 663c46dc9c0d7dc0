// Settings as quantities in their pg_settings unit, read exactly the way the agent's validator
// reads them, so that the optimizer evaluates the constraints on the same numbers.
import type { PgSettingRow, Quantity } from '../knobs/index.ts';
import { toBaseQuantity } from '../knobs/units.ts';

/** Every numeric setting of the rows as a quantity (what validateChange overlays a change on). */
export function currentQuantities(settings: Readonly<Record<string, PgSettingRow | undefined>>): Map<string, Quantity> {
  const out = new Map<string, Quantity>();
  for (const [name, row] of Object.entries(settings)) {
    if (!row || (row.vartype !== 'integer' && row.vartype !== 'real')) continue;
    const value = Number(row.setting);
    if (row.setting.trim() === '' || !Number.isFinite(value)) continue;
    out.set(name, { value, unit: row.unit === null || row.unit === '' ? null : row.unit });
  }
  return out;
}

/** Bytes for memory, milliseconds for time, the number itself otherwise. */
export const toBase = (q: Quantity): number => toBaseQuantity(q.value, q.unit);

/** How many base units (bytes, ms) one `unit` is. */
export const baseUnitsPer = (unit: string | null): number => toBaseQuantity(1, unit);

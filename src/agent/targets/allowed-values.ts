// A cloud's "allowed values" of a parameter (an RDS parameter group's AllowedValues, an Azure
// configuration's allowedValues): a numeric range `min-max` in the parameter's unit, or a
// comma-separated list. Both clouds check values against it before anything is written, so that
// a value the cloud would refuse changes nothing.

const RANGE = /^(-?\d+(?:\.\d+)?(?:e[+-]?\d+)?)-(-?\d+(?:\.\d+)?(?:e[+-]?\d+)?)$/i;

export interface AllowedValueRules {
  /** Numbers as the cloud reads them: `plain` digits only (Cloud B takes no `1e3`), or any
   * finite number. */
  numbers: 'plain' | 'finite';
  /** A list of one value is checked too (Cloud B), or taken as no constraint (Cloud A). */
  checkListOfOne: boolean;
}

/** Why `value` is not among `allowed`, or null when it is (or nothing is said). */
export function allowedValueProblem(value: string, allowed: string | undefined, rules: AllowedValueRules): string | null {
  const text = allowed?.trim();
  if (!text || text === '.*') return null;
  const range = RANGE.exec(text);
  if (range) {
    const n = Number(value);
    const isNumber = rules.numbers === 'plain' ? /^\s*-?\d+(\.\d+)?\s*$/.test(value) : value.trim() !== '' && Number.isFinite(n);
    return isNumber && n >= Number(range[1]) && n <= Number(range[2]) ? null : `expected a number from ${range[1]} to ${range[2]}`;
  }
  const choices = text.split(',').map((c) => c.trim().toLowerCase());
  if (choices.length === 1 && !rules.checkListOfOne) return null;
  return choices.includes(value.trim().toLowerCase()) ? null : `expected one of ${choices.join(', ')}`;
}

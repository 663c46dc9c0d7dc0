// The knob catalog, shared by the agent (to validate what it is told) and the optimizer (to
// build its search space). See catalog.ts for the knobs, never-touch.ts for what is never
// changed, validate.ts for the gate every change goes through.
export type * from './types.ts';
export { TUNING_MODES } from '../protocol/v1.ts';
export {
  applyContextOf,
  assertMachine,
  boundsFor,
  catalogFor,
  describeMachine,
  effectiveMode,
  getKnob,
  KNOBS,
  reachOf,
} from './catalog.ts';
export { isNeverTouch, NEVER_TOUCH, neverTouchEntry, type NeverTouchCategory, type NeverTouchEntry } from './never-touch.ts';
export { isPlannerOnly, PLANNER_ONLY_KNOBS } from './planner.ts';
export { formatBytes, formatQuantity, GiB, KiB, MiB, PAGE_BYTES, parseQuantity, rint, type ParseResult, type PgBaseUnit } from './units.ts';
export {
  describeValue,
  formatForAlterSystem,
  formatSettingValue,
  normalizeReal,
  parseSetting,
  parseValue,
  type ValueResult,
} from './values.ts';
export {
  checkConstraints,
  CONSTRAINT_INPUTS,
  MEMORY_BUDGET_SHARE,
  memoryBudget,
  ORDERINGS,
  type ConstraintInput,
  type ConstraintViolation,
  type MemoryBudget,
  type Quantity,
} from './constraints.ts';
export {
  checkContexts,
  effectiveApply,
  enumValues,
  settingsByName,
  validateChange,
  type ContextDisagreement,
  type ProblemCode,
  type ValidatedEntry,
  type ValidationContext,
  type ValidationProblem,
  type ValidationResult,
} from './validate.ts';

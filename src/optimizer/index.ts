// The optimizer: pure functions from a search space and a measured history to the next
// configuration to try. No I/O, no clock, no Math.random: the same inputs and seed always give
// the same suggestion. The tuning service persists the history between calls.
export type {
  CategoricalDimension,
  Config,
  Dimension,
  History,
  NumericDimension,
  Observation,
  Point,
  Prediction,
  SearchSpace,
  Suggestion,
  SuggestionKind,
} from './types.ts';
export {
  capabilitiesOf,
  configKey,
  createSpace,
  decode,
  distance,
  encode,
  movedKnobs,
  type SettingInput,
  type SpaceInput,
} from './space.ts';
export { isFeasible, repair, validateSuggestion, violations } from './feasibility.ts';
export { pgtune, PGTUNE_CONNECTIONS, type PgtuneInput, type PgtuneSettings, type PgtuneStorage, type PgtuneWorkload } from './pgtune.ts';
export { heuristicConfig } from './heuristic.ts';
export { best, DEFAULT_FAILED_RADIUS, PARSIMONY_Z, recommend, type BestInput, type Incumbent } from './history.ts';
export { suggest, type SuggestInput, type SuggestOptions } from './suggest.ts';
export { randomSuggest, type RandomSuggestInput } from './random-search.ts';
export { createRng, type Rng } from './random.ts';
export { diagnose, withFloors, type Diagnosis } from './diagnose.ts';
export { signalsOf, type Spiller, type WorkloadSignals } from './signals.ts';
export { IRRELEVANT_WEIGHT, relevance, writes } from './relevance.ts';
export { knownBest, MAX_MOVES, MIN_MOVE, trustRegion, type TrustRegion } from './trust-region.ts';

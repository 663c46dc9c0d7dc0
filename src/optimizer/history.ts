// Reading the history the service keeps: checking its shape, grouping repeated measurements of
// one configuration, the incumbent best, the configuration to recommend, and the failed points
// nothing may come near again.
import { configKey, distance, encode, movedKnobs } from './space.ts';
import { SUGGESTION_KINDS, type Config, type History, type Observation, type Point, type SearchSpace } from './types.ts';

/** Within this distance (normalized space, see `distance`) of a failed point: its region. */
export const DEFAULT_FAILED_RADIUS = 0.15;

/** Throws a TypeError naming the first malformed entry. */
export function checkHistory(history: History): void {
  if (!Array.isArray(history)) throw new TypeError('history must be an array of observations');
  history.forEach((o: Observation, i) => {
    const where = `history[${i}]`;
    if (o === null || typeof o !== 'object') throw new TypeError(`${where} is not an observation`);
    if (o.config === null || typeof o.config !== 'object' || Array.isArray(o.config))
      throw new TypeError(`${where}.config must be an object of knob → value`);
    if (o.status !== 'ok' && o.status !== 'failed')
      throw new TypeError(`${where}.status must be 'ok' or 'failed' (got ${String(o.status)})`);
    if (o.status === 'ok' && !(typeof o.objective === 'number' && Number.isFinite(o.objective) && o.objective > 0)) {
      throw new TypeError(`${where}.objective must be a positive number for an ok observation (got ${String(o.objective)})`);
    }
    if (o.kind !== undefined && !SUGGESTION_KINDS.includes(o.kind))
      throw new TypeError(`${where}.kind must be one of ${SUGGESTION_KINDS.join(', ')} when given (got ${String(o.kind)})`);
  });
}

/** Every measurement of one configuration. */
export interface MeasuredConfig {
  readonly key: string;
  readonly config: Readonly<Config>;
  /** Objectives of its ok measurements, in history order. */
  readonly objectives: readonly number[];
  /** Each ok measurement's noise (sd of its log objective), null where one was not measured. */
  readonly noises: ReadonlyArray<number | null>;
  /** Some attempt of it failed. */
  readonly failed: boolean;
  /** History index of its last attempt. */
  readonly lastIndex: number;
}

export function groupHistory(history: History): MeasuredConfig[] {
  type Group = {
    key: string;
    config: Readonly<Config>;
    objectives: number[];
    noises: Array<number | null>;
    failed: boolean;
    lastIndex: number;
  };
  const groups = new Map<string, Group>();
  history.forEach((o, i) => {
    const key = configKey(o.config);
    let g = groups.get(key);
    if (!g) {
      g = { key, config: o.config, objectives: [], noises: [], failed: false, lastIndex: i };
      groups.set(key, g);
    }
    g.lastIndex = i;
    if (o.status === 'failed') g.failed = true;
    else {
      g.objectives.push(o.objective as number);
      g.noises.push(o.noise ?? null);
    }
  });
  return [...groups.values()];
}

export function failedPoints(space: SearchSpace, history: History): Point[] {
  return history.filter((o) => o.status === 'failed').map((o) => encode(space, o.config));
}

export function inFailedRegion(space: SearchSpace, point: Point, failed: readonly Point[], radius: number): boolean {
  return failed.some((f) => distance(space, point, f) < radius);
}

export interface Incumbent {
  readonly config: Readonly<Config>;
  /** Mean of its measurements. */
  readonly objective: number;
  readonly measurements: number;
  /** History index of its last measurement. */
  readonly lastIndex: number;
}

export interface BestInput {
  readonly space: SearchSpace;
  readonly history: History;
  readonly failedRadius?: number;
}

/** A configuration that may be recommended, with how well its mean is known. */
interface Eligible extends Incumbent {
  /** Standard error of its mean's log, from the measurements' noise; null when not measured. */
  readonly standardError: number | null;
}

/**
 * Every configuration measured ok, never failed and not in a failed region (a configuration next
 * to one that crashed is no recommendation), in order of first measurement.
 */
function eligible({ space, history, failedRadius = DEFAULT_FAILED_RADIUS }: BestInput): Eligible[] {
  checkHistory(history);
  const failed = failedPoints(space, history);
  return groupHistory(history).flatMap((g): Eligible[] => {
    if (g.failed || g.objectives.length === 0) return [];
    if (inFailedRegion(space, encode(space, g.config), failed, failedRadius)) return [];
    const n = g.objectives.length;
    const noises = g.noises.filter((x): x is number => x !== null);
    const standardError = noises.length === n ? Math.sqrt(noises.reduce((a, x) => a + x * x, 0) / n / n) : null;
    const objective = g.objectives.reduce((a, b) => a + b, 0) / n;
    return [{ config: g.config, objective, measurements: n, lastIndex: g.lastIndex, standardError }];
  });
}

const lowest = <T extends Incumbent>(xs: readonly T[]): T | null =>
  xs.reduce<T | null>((a, x) => (!a || x.objective < a.objective ? x : a), null);
const incumbentOf = ({ config, objective, measurements, lastIndex }: Incumbent): Incumbent => ({
  config,
  objective,
  measurements,
  lastIndex,
});

/**
 * The configuration with the lowest mean objective among the eligible; null when nothing
 * qualifies. Ties go to the earlier configuration. It is the search's incumbent: where its
 * trust region is centred.
 */
export function best(input: BestInput): Incumbent | null {
  const top = lowest(eligible(input));
  return top && incumbentOf(top);
}

/**
 * How far, in standard errors of the difference, a configuration's mean may lie above the best's
 * and still count as measured as well. The best of a dozen noisy windows is partly the luckiest
 * window (the winner's curse): read-heavy's search took shared_buffers's real gain and then
 * recommended work_mem 150 kB and default_statistics_target 10 beside it, carried by one lucky
 * window (docs/benchmarks.md, its seventh run).
 */
export const PARSIMONY_Z = 1;

/**
 * What the search recommends: among the configurations that beat the baseline and that the
 * measurements cannot tell from the best (within PARSIMONY_Z standard errors of the difference),
 * the one that changes the fewest knobs from the current settings, then the lowest mean. A DBA
 * takes a change of one knob more readily than of six, and a knob that moved without a measured
 * effect is a risk with nothing to show for it. Without measured noise it is the best.
 */
export function recommend(input: BestInput): Incumbent | null {
  const all = eligible(input);
  const top = lowest(all);
  const topError = top?.standardError ?? null;
  if (!top || topError === null || top.objective >= 1) return top && incumbentOf(top);
  const current = encode(input.space, {});
  const changes = (c: Incumbent) => movedKnobs(encode(input.space, c.config), current);
  const tied = all.filter(
    (c) =>
      c.objective < 1 &&
      changes(c) > 0 &&
      c.standardError !== null &&
      Math.log(c.objective / top.objective) <= PARSIMONY_Z * Math.hypot(c.standardError, topError),
  );
  const simplest = tied.reduce((a, c) => {
    const [ca, cc] = [changes(a), changes(c)];
    return cc < ca || (cc === ca && c.objective < a.objective) ? c : a;
  }, top);
  return incumbentOf(simplest);
}

// Reading the history the service keeps: checking its shape, grouping repeated measurements of
// one configuration, the incumbent best, and the failed points nothing may come near again.
import { configKey, distance, encode } from './space.ts';
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
  /** Some attempt of it failed. */
  readonly failed: boolean;
  /** History index of its last attempt. */
  readonly lastIndex: number;
}

export function groupHistory(history: History): MeasuredConfig[] {
  const groups = new Map<string, { key: string; config: Readonly<Config>; objectives: number[]; failed: boolean; lastIndex: number }>();
  history.forEach((o, i) => {
    const key = configKey(o.config);
    let g = groups.get(key);
    if (!g) {
      g = { key, config: o.config, objectives: [], failed: false, lastIndex: i };
      groups.set(key, g);
    }
    g.lastIndex = i;
    if (o.status === 'failed') g.failed = true;
    else g.objectives.push(o.objective as number);
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

/**
 * The configuration with the lowest mean objective, among those never failed and not in a
 * failed region (a configuration next to one that crashed is no recommendation); null when
 * nothing qualifies. Ties go to the earlier configuration.
 */
export function best({ space, history, failedRadius = DEFAULT_FAILED_RADIUS }: BestInput): Incumbent | null {
  checkHistory(history);
  const failed = failedPoints(space, history);
  let incumbent: Incumbent | null = null;
  for (const g of groupHistory(history)) {
    if (g.failed || g.objectives.length === 0) continue;
    if (inFailedRegion(space, encode(space, g.config), failed, failedRadius)) continue;
    const mean = g.objectives.reduce((a, b) => a + b, 0) / g.objectives.length;
    if (!incumbent || mean < incumbent.objective) {
      incumbent = { config: g.config, objective: mean, measurements: g.objectives.length, lastIndex: g.lastIndex };
    }
  }
  return incumbent;
}

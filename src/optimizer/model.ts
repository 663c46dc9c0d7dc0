// The model's view of the space and the history: features (numeric knobs as their normalized
// position; an enum one-hot, scaled so two different values are at distance 1, like a bool),
// one length scale per knob, measured outcomes on a log scale, and every attempt's success or
// failure.
import { encode } from './space.ts';
import type { History, Point, SearchSpace } from './types.ts';

export interface Features {
  /** Feature indices per knob (one length scale each). */
  readonly groups: readonly number[][];
  of(point: Point): Float64Array;
}

export function featuresFor(space: SearchSpace): Features {
  const groups: number[][] = [];
  let size = 0;
  for (const dim of space.dimensions) {
    const width = dim.kind === 'categorical' && dim.values.length > 2 ? dim.values.length : 1;
    groups.push(Array.from({ length: width }, (_, k) => size + k));
    size += width;
  }
  return {
    groups,
    of(point) {
      const x = new Float64Array(size);
      space.dimensions.forEach((dim, i) => {
        const at = (groups[i] as number[])[0] as number;
        const v = point[i] ?? 0;
        if (dim.kind === 'categorical' && dim.values.length > 2) x[at + Math.round(v)] = Math.SQRT1_2;
        else x[at] = v;
      });
      return x;
    },
  };
}

export interface TrainingData {
  /** Ok observations: their points and log objectives (runtimes vary by ratios), and the
   * variance of each log objective when every one of them has a measured noise level. */
  readonly measured: { readonly points: Point[]; readonly y: number[]; readonly noiseVariances: number[] | null };
  /** Every observation: its point and whether it ran without failing. */
  readonly attempts: { readonly points: Point[]; readonly ok: boolean[] };
}

export function trainingData(space: SearchSpace, history: History): TrainingData {
  const measured = { points: [] as Point[], y: [] as number[], noiseVariances: [] as number[] | null };
  let everyNoise = true;
  const attempts = { points: [] as Point[], ok: [] as boolean[] };
  for (const o of history) {
    const point = encode(space, o.config);
    attempts.points.push(point);
    attempts.ok.push(o.status === 'ok');
    if (o.status === 'ok') {
      measured.points.push(point);
      measured.y.push(Math.log(o.objective as number));
      if (o.noise !== undefined && Number.isFinite(o.noise) && o.noise >= 0) measured.noiseVariances!.push(o.noise ** 2);
      else everyNoise = false;
    }
  }
  if (!everyNoise) measured.noiseVariances = null;
  return { measured, attempts };
}

// The final verification (design.md, "The measure"): before a configuration is recommended, the
// baseline (A) and the candidate (B) alternate over several rounds, and the gain is reported
// with its confidence interval. A configuration is recommended only when the whole interval
// shows a gain of at least the minimum effect.
//
// The interval: a paired Student t interval on the per-round log ratios log(B/A). Paired,
// because the two windows of a round are neighbours in time and share the load of the moment;
// on log ratios, because runtimes vary by ratios and a ratio's log is close to normal; and t
// rather than a bootstrap, because a verification has 3 to 10 rounds: a bootstrap of 3 pairs
// has 10 distinct resamples and its percentile interval is far too narrow at that size, while
// the t interval is exact for normal differences and robust enough near them.
//
// The spread of 3 rounds is itself a rough estimate (2 degrees of freedom): three rounds that
// happen to agree closely would give an interval narrower than the windows' noise allows. So
// the standard deviation of a round's log ratio is never taken below √2 σ, σ being the noise of
// one window the session measured on its baseline windows (src/measure/drift.ts).
//
// The order within a round alternates (A B, B A, A B, …): a drift that is linear in time adds
// +d to one round's log ratio and −d to the next's, so it cancels in the mean instead of
// biasing it (and widens the interval, which is the honest effect of drift).
import jStat from 'jstat';

export interface VerifySettings {
  /** Rounds before any verdict. */
  minRounds: number;
  /** Rounds after which the verdict is final. */
  maxRounds: number;
  /** The smallest runtime gain worth recommending (0.05 = 5 %). */
  minEffect: number;
  /** The interval's level (0.95). */
  confidence: number;
}

/** A candidate whose throughput interval lies wholly below 1 − this is not recommended, whatever its runtime. */
export const MAX_THROUGHPUT_DROP = 0.2;

export type Role = 'baseline' | 'candidate';

/** Round 1 measures A then B, round 2 B then A, and so on. */
export function roundOrder(round: number): readonly [Role, Role] {
  return round % 2 === 1 ? ['baseline', 'candidate'] : ['candidate', 'baseline'];
}

/** One window's figures: the baseline-mix-weighted runtime and the throughput (statements/s). */
export interface WindowFigures {
  runtimeMs: number;
  throughput: number;
}

export interface RoundFigures {
  baseline: WindowFigures;
  candidate: WindowFigures;
}

/** A ratio candidate/baseline with its interval: 0.82 is 18 % less. */
export interface Interval {
  estimate: number;
  low: number;
  high: number;
}

/**
 * The paired t interval of exp(mean log ratio), the rounds' standard deviation taken no lower
 * than `minSd`; null under two rounds (no spread to judge).
 */
export function pairedInterval(logRatios: readonly number[], confidence: number, minSd = 0): Interval | null {
  const n = logRatios.length;
  if (n < 2 || logRatios.some((x) => !Number.isFinite(x))) return null;
  const mean = logRatios.reduce((a, b) => a + b, 0) / n;
  const sd = Math.max(minSd, Math.sqrt(logRatios.reduce((s, x) => s + (x - mean) ** 2, 0) / (n - 1)));
  const half = jStat.studentt.inv((1 + confidence) / 2, n - 1) * (sd / Math.sqrt(n));
  return { estimate: Math.exp(mean), low: Math.exp(mean - half), high: Math.exp(mean + half) };
}

export type Decision = 'continue' | 'recommend' | 'no_significant_improvement';

export interface Verdict {
  rounds: number;
  /** The candidate's runtime over the baseline's. */
  runtime: Interval | null;
  /** The candidate's throughput over the baseline's. */
  throughput: Interval | null;
  decision: Decision;
  /** Why, for people: which part of the interval decided. */
  why: string;
}

const logRatio = (rounds: readonly RoundFigures[], pick: (w: WindowFigures) => number) =>
  rounds.map((r) => Math.log(pick(r.candidate) / pick(r.baseline)));

/**
 * After each round: recommend once the whole runtime interval lies at or below 1 − minEffect
 * (unless the whole throughput interval shows a drop of more than MAX_THROUGHPUT_DROP); stop
 * with no significant improvement once it lies wholly above (the minimum effect is out of reach)
 * or the rounds run out; else measure another round. `windowNoise` (σ of one window's log
 * runtime, when measured) floors the runtime interval's spread. Single windows are not judged on their
 * throughput here: a window or two of a busy neighbour would sink a good candidate.
 */
export function verdict(rounds: readonly RoundFigures[], settings: VerifySettings, windowNoise: number | null = null): Verdict {
  const runtime = pairedInterval(
    logRatio(rounds, (w) => w.runtimeMs),
    settings.confidence,
    windowNoise === null ? 0 : Math.SQRT2 * windowNoise,
  );
  const throughput = pairedInterval(
    logRatio(rounds, (w) => w.throughput),
    settings.confidence,
  );
  const n = rounds.length;
  const goal = 1 - settings.minEffect;
  const effect = `${Math.round(settings.minEffect * 1000) / 10} %`;
  const result = (decision: Decision, why: string): Verdict => ({ rounds: n, runtime, throughput, decision, why });
  if (n < settings.minRounds || !runtime) {
    return n >= settings.maxRounds
      ? result('no_significant_improvement', 'the rounds ran out')
      : result('continue', `fewer than ${settings.minRounds} rounds`);
  }
  if (runtime.high <= goal) {
    if (throughput && throughput.high < 1 - MAX_THROUGHPUT_DROP)
      return result(
        'no_significant_improvement',
        `its throughput fell by more than ${MAX_THROUGHPUT_DROP * 100} % over the whole interval`,
      );
    return result('recommend', `the whole runtime interval is a gain of at least ${effect}`);
  }
  if (runtime.low > goal) return result('no_significant_improvement', `the whole runtime interval is short of a gain of ${effect}`);
  if (n >= settings.maxRounds)
    return result('no_significant_improvement', `after ${n} rounds the runtime interval still reaches a gain under ${effect}`);
  return result('continue', `the runtime interval straddles a gain of ${effect}`);
}

const signed = (x: number) => `${x > 0 ? '+' : x < 0 ? '−' : '±'}${Math.abs(x * 100).toFixed(Math.abs(x) < 0.1 ? 1 : 0)} %`;

/** "runtime −18 % (95 % CI −24 % to −11 %)": a ratio's interval as changes, for people. */
export function describeInterval(what: string, interval: Interval, confidence: number): string {
  return `${what} ${signed(interval.estimate - 1)} (${Math.round(confidence * 100)} % CI ${signed(interval.low - 1)} to ${signed(interval.high - 1)})`;
}

/** The verified result in one line: "runtime −18 % (95 % CI …), throughput +6 % (…), 4 A/B rounds". */
export function describeVerdict(v: Pick<Verdict, 'rounds' | 'runtime' | 'throughput'>, confidence: number): string {
  const parts = [
    v.runtime && describeInterval('runtime', v.runtime, confidence),
    v.throughput && describeInterval('throughput', v.throughput, confidence),
  ].filter((x): x is string => Boolean(x));
  return `${parts.join(', ')}${parts.length ? ', ' : ''}${v.rounds} A/B round${v.rounds === 1 ? '' : 's'}`;
}

// The final verification (design.md, "The measure"): before a configuration is recommended, the
// baseline (A) and the candidate (B) alternate over several rounds, and the gain is reported
// with its confidence interval. A configuration is recommended only when the whole interval
// shows a gain of at least the minimum effect.
//
// The rounds are looked at after each one, and the verification stops as soon as the interval
// decides: a fixed-level interval looked at six times claims an effect that is not there more
// often than its level says (test/verify-sequential.test.ts measures it). So the interval is a
// confidence sequence, valid at every round at once: Robbins' normal mixture (Howard, Ramdas,
// McAuliffe & Sekhon, "Time-uniform, nonparametric, nonasymptotic confidence sequences", 2021,
// eq. 14). For rounds whose log ratios are sub-Gaussian with standard deviation s, with
// S = Σ (x_i − μ) after n rounds and V = n s²,
//   P(∃ n: |S| ≥ √((V + ρ) · log((V + ρ) / (ρ α²)))) ≤ α
// by Ville's inequality, whatever rule decides when to stop. ρ sets where the boundary is
// tightest: at the minimum rounds (MIXTURE_RHO), so a large effect stops there; it is wider than
// a fixed interval later on, which is the price of looking.
//
// Why this rather than a group-sequential design with alpha spending: both need the spread of
// a round to be known, since 3 rounds cannot estimate it; a confidence sequence needs nothing
// else (no planned number of looks, no boundaries by numerical integration) and stays valid if a
// person lets the verification run on; and its interval is what is shown.
//
// The spread: s = max(√2 σ, the rounds' own standard deviation), σ being the noise of one window
// the session measured on its baseline windows (src/measure/drift.ts), √2 σ that of a difference
// of two windows. The rounds' own spread only widens it (drift, a noisier hour). Before σ is
// known the rounds' own spread stands in.
//
// Paired rounds on log ratios log(B/A): the two windows of a round are neighbours in time and
// share the load of the moment, and runtimes vary by ratios. The order within a round
// alternates (A B, B A, A B, …): a drift that is linear in time adds +d to one round's log ratio
// and −d to the next's, so it cancels in the mean instead of biasing it.
//
// The fixed-level paired t interval (pairedInterval) remains for the benchmarks, which look once.
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

/** One window's figures: the baseline-mix-weighted runtime and the throughput (statements/s),
 * and each baseline statement's mean runtime when the window kept them (objective.ts). */
export interface WindowFigures {
  runtimeMs: number;
  throughput: number;
  statementMs?: Readonly<Record<string, number>>;
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

/** The rounds' mean log ratio, and their standard deviation (0 under two rounds). */
function meanAndSd(logRatios: readonly number[]): { mean: number; sd: number } {
  const n = logRatios.length;
  const mean = logRatios.reduce((a, b) => a + b, 0) / n;
  return { mean, sd: n < 2 ? 0 : Math.sqrt(logRatios.reduce((s, x) => s + (x - mean) ** 2, 0) / (n - 1)) };
}

/**
 * The paired t interval of exp(mean log ratio), the rounds' standard deviation taken no lower
 * than `minSd`; null under two rounds (no spread to judge).
 */
export function pairedInterval(logRatios: readonly number[], confidence: number, minSd = 0): Interval | null {
  const n = logRatios.length;
  if (n < 2 || logRatios.some((x) => !Number.isFinite(x))) return null;
  const { mean, sd: own } = meanAndSd(logRatios);
  const sd = Math.max(minSd, own);
  const half = jStat.studentt.inv((1 + confidence) / 2, n - 1) * (sd / Math.sqrt(n));
  return { estimate: Math.exp(mean), low: Math.exp(mean - half), high: Math.exp(mean + half) };
}

/**
 * The normal mixture's ρ for a boundary tightest after `rounds` rounds of spread `sd`: ρ = k n s²
 * with k minimizing (1 + k) · log((1 + k) / (k α²)), where the derivative
 * log((1 + k) / (k α²)) − 1/k vanishes (k ≈ 0.12 at α = 0.05).
 */
export function mixtureRho(sd: number, rounds: number, alpha: number): number {
  const slope = (k: number) => Math.log((1 + k) / (k * alpha * alpha)) - 1 / k;
  let [lo, hi] = [1e-6, 100];
  for (let i = 0; i < 100; i++) {
    const mid = Math.sqrt(lo * hi);
    if (slope(mid) < 0) lo = mid;
    else hi = mid;
  }
  return lo * Math.max(1, rounds) * sd * sd;
}

/**
 * The confidence sequence of exp(mean log ratio) after these rounds, valid at every round at once
 * (the normal mixture above): the spread of a round taken as `minSd` or the rounds' own standard
 * deviation, whichever is larger, the boundary tightest after `tightestAt` rounds. Null without a
 * spread to judge (one round and no `minSd`).
 */
export function sequenceInterval(logRatios: readonly number[], confidence: number, minSd: number, tightestAt: number): Interval | null {
  const n = logRatios.length;
  if (n === 0 || logRatios.some((x) => !Number.isFinite(x)) || (n < 2 && !(minSd > 0))) return null;
  const { mean, sd: own } = meanAndSd(logRatios);
  const half = sequenceHalfWidth(n, Math.max(minSd, own), confidence, tightestAt);
  return { estimate: Math.exp(mean), low: Math.exp(mean - half), high: Math.exp(mean + half) };
}

/** The half-width, in log ratio, of the confidence sequence after `n` rounds of spread `sd`. */
export function sequenceHalfWidth(n: number, sd: number, confidence: number, tightestAt: number): number {
  if (sd === 0) return 0;
  const alpha = 1 - confidence;
  const rho = mixtureRho(sd, tightestAt, alpha);
  const v = n * sd * sd;
  return Math.sqrt((v + rho) * Math.log((v + rho) / (rho * alpha * alpha))) / n;
}

/**
 * A verification whose rounds so far give it less than this chance of clearing the minimum effect
 * by its last round stops there, with no significant improvement (a futility stop). It can only
 * end a verification without a claim, so the error rate of a claim is unchanged; what it costs is
 * a little power, measured in test/verify-sequential.test.ts. Without it a null effect runs every
 * round it may: at 12 s windows and 5-16 % noise, select-1's verifications ran all 5 rounds.
 */
export const FUTILITY_CHANCE = 0.1;

/**
 * The chance that the rounds left bring the interval after the last round wholly to a gain of
 * the minimum effect, if they go on as the rounds so far: each round's log ratio normal with
 * spread `sd` about a mean known only as well as the rounds so far tell it (the predictive
 * distribution of the rounds left's mean: N(mean, sd² (1/left + 1/n)); taking the rounds' mean as
 * the truth would stop too many real gains after 3 rounds), and the last interval as narrow as
 * `sd` allows.
 */
export function chanceToClear(logRatios: readonly number[], settings: VerifySettings, sd: number): number {
  const [n, last] = [logRatios.length, settings.maxRounds];
  if (n === 0 || n >= last || !(sd > 0)) return 0;
  const { mean } = meanAndSd(logRatios);
  const bar = Math.log(1 - settings.minEffect) - sequenceHalfWidth(last, sd, settings.confidence, settings.minRounds);
  /** The mean the rounds left need for the mean of all of them to reach the bar. */
  const needed = (last * bar - n * mean) / (last - n);
  return jStat.normal.cdf(needed, mean, sd * Math.sqrt(1 / (last - n) + 1 / n));
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
 * with no significant improvement once it lies wholly above (the minimum effect is out of reach),
 * once the rounds' trend gives the rounds left less than FUTILITY_CHANCE of clearing it
 * (chanceToClear; `options.futility: false` leaves that out, to measure what it costs), or once the
 * rounds run out; else measure another round. Both intervals are confidence sequences
 * (sequenceInterval), so looking after every round keeps their level. They need `windowNoise`,
 * σ of one window's log runtime as the session measured it on its baseline windows: the spread
 * of a round is taken no lower than √2 σ (for the throughput too: in a closed loop it moves with
 * the runtime). Without it there is no interval: the rounds' own spread of 3 to 8 rounds, taken
 * as known, claims a null effect in about one session in seven (test/verify-sequential.test.ts).
 * Single windows are not judged on their throughput here: a window or two of a busy neighbour
 * would sink a good candidate.
 */
export function verdict(
  rounds: readonly RoundFigures[],
  settings: VerifySettings,
  windowNoise: number | null,
  options: { futility?: boolean } = {},
): Verdict {
  const floor = windowNoise === null ? null : Math.SQRT2 * windowNoise;
  const interval = (pick: (w: WindowFigures) => number) =>
    floor === null ? null : sequenceInterval(logRatio(rounds, pick), settings.confidence, floor, settings.minRounds);
  const runtime = interval((w) => w.runtimeMs);
  const throughput = interval((w) => w.throughput);
  const v = decide(rounds.length, runtime, throughput, settings, 'the noise of one window is not measured yet');
  if (v.decision !== 'continue' || floor === null || rounds.length < settings.minRounds || options.futility === false) return v;
  const ratios = logRatio(rounds, (w) => w.runtimeMs);
  const chance = chanceToClear(ratios, settings, Math.max(floor, meanAndSd(ratios).sd));
  if (chance >= FUTILITY_CHANCE) return v;
  const left = settings.maxRounds - rounds.length;
  return {
    ...v,
    decision: 'no_significant_improvement',
    why: `at the trend of its rounds, the ${left} round${left === 1 ? '' : 's'} left would clear a gain of ${Math.round(settings.minEffect * 1000) / 10} % with a chance of ${(chance * 100).toFixed(1)} %, under ${FUTILITY_CHANCE * 100} %`,
  };
}

/**
 * One look after a fixed number of rounds, for the benchmarks: the paired t intervals
 * (pairedInterval) at the settings' level, and the same rule. Valid only when nothing was looked
 * at before: a session, which looks after every round, uses `verdict`.
 */
export function fixedVerdict(rounds: readonly RoundFigures[], settings: VerifySettings): Verdict {
  const interval = (pick: (w: WindowFigures) => number) => pairedInterval(logRatio(rounds, pick), settings.confidence);
  return decide(
    rounds.length,
    interval((w) => w.runtimeMs),
    interval((w) => w.throughput),
    settings,
    'fewer than 2 rounds',
  );
}

/** The stopping rule on the intervals after `n` rounds (`missing` says why there is no runtime interval). */
function decide(n: number, runtime: Interval | null, throughput: Interval | null, settings: VerifySettings, missing: string): Verdict {
  const goal = 1 - settings.minEffect;
  const effect = `${Math.round(settings.minEffect * 1000) / 10} %`;
  const result = (decision: Decision, why: string): Verdict => ({ rounds: n, runtime, throughput, decision, why });
  if (n < settings.minRounds || !runtime) {
    const waiting = n < settings.minRounds ? `fewer than ${settings.minRounds} rounds` : missing;
    return n >= settings.maxRounds ? result('no_significant_improvement', `the rounds ran out (${waiting})`) : result('continue', waiting);
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

/** Statements carrying at least this share of the baseline's time are verified one by one… */
export const STATEMENT_MIN_SHARE = 0.05;
/** …and one slower by at least this ratio, with the verification's confidence, is a regression. */
export const STATEMENT_REGRESSION = 1.25;

/** One statement under the candidate: its runtime ratio over the rounds, and whether it regressed. */
export interface StatementChange {
  key: string;
  /** Its share of the baseline's time. */
  share: number;
  /** Candidate over baseline, paired by round (a confidence sequence like the runtime's); null before it can be judged. */
  ratio: Interval | null;
  rounds: number;
  /** The whole interval lies at or above STATEMENT_REGRESSION. */
  regression: boolean;
}

/**
 * A configuration that makes the mix faster can still make one statement much slower (a plan flip
 * from random_page_cost, a JIT threshold): the weighted mean hides it. So each statement that
 * carries at least STATEMENT_MIN_SHARE of the baseline's time (`shares`, objective.ts timeShares)
 * is compared on its own, paired by round, with the same confidence sequence as the runtime
 * (its spread floored at √2 σ too: a single statement is noisier than the mix, and its own spread
 * only widens the interval). Slowest first.
 */
export function statementChanges(
  rounds: readonly RoundFigures[],
  shares: Readonly<Record<string, number>>,
  settings: VerifySettings,
  windowNoise: number | null,
): StatementChange[] {
  return Object.entries(shares)
    .filter(([, share]) => share >= STATEMENT_MIN_SHARE)
    .map(([key, share]): StatementChange => {
      const logRatios = rounds.flatMap((r) => {
        const [a, b] = [r.baseline.statementMs?.[key], r.candidate.statementMs?.[key]];
        return a !== undefined && b !== undefined && a > 0 && b > 0 ? [Math.log(b / a)] : [];
      });
      const ratio =
        windowNoise === null || logRatios.length < settings.minRounds
          ? null
          : sequenceInterval(logRatios, settings.confidence, Math.SQRT2 * windowNoise, settings.minRounds);
      return { key, share, ratio, rounds: logRatios.length, regression: ratio !== null && ratio.low >= STATEMENT_REGRESSION };
    })
    .sort((x, y) => (y.ratio?.estimate ?? 1) - (x.ratio?.estimate ?? 1));
}

/**
 * Statements measured slower by STATEMENT_REGRESSION or more whose interval still reaches under
 * it: not a regression at the verification's confidence, and not to be kept silently either (the
 * trade-off workload showed ×1.78, 95 % CI ×1.20 to ×2.64, kept after 3 rounds).
 */
export const unsureRegressions = (changes: readonly StatementChange[]): StatementChange[] =>
  changes.filter((c) => !c.regression && c.ratio !== null && c.ratio.estimate >= STATEMENT_REGRESSION);

/** "statement 10:5:4242:t (12 % of the baseline's time) ×3.00 (95 % CI ×2.41 to ×3.73)". */
export function describeStatementChange(c: StatementChange, confidence: number): string {
  const x = (r: number) => `×${r.toFixed(2)}`;
  const figures = c.ratio
    ? `${x(c.ratio.estimate)} (${Math.round(confidence * 100)} % CI ${x(c.ratio.low)} to ${x(c.ratio.high)})`
    : 'not judged yet';
  return `statement ${c.key} (${Math.round(c.share * 100)} % of the baseline's time) ${figures}`;
}

const signed = (x: number) => `${x > 0 ? '+' : x < 0 ? '−' : '±'}${Math.abs(x * 100).toFixed(Math.abs(x) < 0.1 ? 1 : 0)} %`;

/** "runtime −18 % (95 % CI −24 % to −11 %)": a ratio's interval as changes, for people. */
export function describeInterval(what: string, interval: Interval, confidence: number): string {
  return `${what} ${signed(interval.estimate - 1)} (${Math.round(confidence * 100)} % CI ${signed(interval.low - 1)} to ${signed(interval.high - 1)})`;
}

/** The verified result in one line: "runtime −18 % (95 % CI …), throughput (statements/s) +6 % (…), 4 A/B
 * rounds". The throughput is named: top-level statements per second from pg_stat_statements
 * (throughput.ts), not pg_stat_database's commits, which lag under load. */
export function describeVerdict(v: Pick<Verdict, 'rounds' | 'runtime' | 'throughput'>, confidence: number): string {
  const parts = [
    v.runtime && describeInterval('runtime', v.runtime, confidence),
    v.throughput && describeInterval('throughput (statements/s)', v.throughput, confidence),
  ].filter((x): x is string => Boolean(x));
  return `${parts.join(', ')}${parts.length ? ', ' : ''}${v.rounds} A/B round${v.rounds === 1 ? '' : 's'}`;
}

// The guardrails' thresholds as a DBA sets them in agent.yaml: each checked against a range that
// still protects the database, and refused when looser than the safe default unless
// guardrails.allow_looser says so in as many words. A stricter threshold reverts trials sooner;
// it can cost a tuning session its trials, never the database its safety.
import { DEFAULT_THRESHOLDS, type GuardThresholds } from './guard-thresholds.ts';
import { MiB } from '../../knobs/index.ts';

/** What agent.yaml and the environment gave, in the keys' own units (percent, MB, a factor). */
export interface GuardrailSettings {
  memoryFloorPercent?: number;
  memoryFloorMb?: number;
  runtimeFactor?: number;
  errorRateIncreasePercent?: number;
  connectionSharePercent?: number;
  allowLooser: boolean;
}

interface Rule {
  key: string;
  /** The default in the key's unit. */
  safe: number;
  /** Looser is a larger value (a factor, a rise) or a smaller one (a floor). */
  looserWhen: 'higher' | 'lower';
  /** Values outside [min, max] protect nothing (or revert everything), allowed or not. */
  min: number;
  minInclusive: boolean;
  max: number;
  meaning: (value: number) => string;
}

const RULES = {
  memoryFloorPercent: {
    key: 'memory_floor_percent',
    safe: DEFAULT_THRESHOLDS.memoryFloorShare * 100,
    looserWhen: 'lower',
    min: 0,
    minInclusive: false,
    max: 50,
    meaning: (v) => `a trial may leave as little as ${v} % of memory available`,
  },
  memoryFloorMb: {
    key: 'memory_floor_mb',
    safe: DEFAULT_THRESHOLDS.memoryFloorBytes / MiB,
    looserWhen: 'lower',
    min: 1,
    minInclusive: true,
    max: 1024 * 1024,
    meaning: (v) => `a trial may leave as little as ${v} MB available`,
  },
  runtimeFactor: {
    key: 'runtime_factor',
    safe: DEFAULT_THRESHOLDS.runtimeFactor,
    looserWhen: 'higher',
    min: 1,
    minInclusive: false,
    max: 100,
    meaning: (v) => `queries may run ${v}× slower than known-good before the agent reverts the trial`,
  },
  errorRateIncreasePercent: {
    key: 'error_rate_increase_percent',
    safe: DEFAULT_THRESHOLDS.rollbackRateIncrease * 100,
    looserWhen: 'higher',
    min: 0,
    minInclusive: false,
    max: 100,
    meaning: (v) => `the share of rolled-back transactions may rise by ${v} points`,
  },
  connectionSharePercent: {
    key: 'connection_share_percent',
    safe: DEFAULT_THRESHOLDS.connectionShare * 100,
    looserWhen: 'higher',
    min: 0,
    minInclusive: false,
    max: 100,
    meaning: (v) => `client connections may reach ${v} % of max_connections`,
  },
} as const satisfies Record<Exclude<keyof GuardrailSettings, 'allowLooser'>, Rule>;

/** The thresholds to guard trials with, or the problems (one line each, naming the key). */
export function guardThresholdsFrom(settings: GuardrailSettings): { thresholds: GuardThresholds; problems: string[] } {
  const problems: string[] = [];
  const checked = (name: keyof typeof RULES): number => {
    const rule: Rule = RULES[name];
    const value = settings[name];
    if (value === undefined) return rule.safe;
    const where = `guardrails.${rule.key} (AGENT_GUARDRAILS_${rule.key.toUpperCase()})`;
    const belowMin = rule.minInclusive ? value < rule.min : value <= rule.min;
    if (belowMin || value > rule.max) {
      problems.push(
        `${where}: expected a number ${rule.minInclusive ? 'from' : 'above'} ${rule.min} ${rule.minInclusive ? 'to' : 'and at most'} ${rule.max}, got ${value}`,
      );
      return rule.safe;
    }
    const looser = rule.looserWhen === 'higher' ? value > rule.safe : value < rule.safe;
    if (looser && !settings.allowLooser) {
      problems.push(
        `${where}: ${value} is looser than the safe default ${rule.safe} (${rule.meaning(value)}): ` +
          `choose ${rule.looserWhen === 'higher' ? 'at most' : 'at least'} ${rule.safe}, or set guardrails.allow_looser: true (AGENT_GUARDRAILS_ALLOW_LOOSER=true) to allow it`,
      );
      return rule.safe;
    }
    return value;
  };
  const runtimeFactor = checked('runtimeFactor');
  const thresholds: GuardThresholds = {
    ...DEFAULT_THRESHOLDS,
    memoryFloorShare: checked('memoryFloorPercent') / 100,
    memoryFloorBytes: checked('memoryFloorMb') * MiB,
    runtimeFactor,
    // A single window this much slower reverts at once; it is never below the two-window factor.
    runtimeFactorAtOnce: Math.max(DEFAULT_THRESHOLDS.runtimeFactorAtOnce, runtimeFactor),
    rollbackRateIncrease: checked('errorRateIncreasePercent') / 100,
    connectionShare: checked('connectionSharePercent') / 100,
  };
  return { thresholds, problems };
}

// The search space of a session, from what the agent reported when it started, kept with the
// session so that every step (on any replica, after any restart) rebuilds the same space.
import { describeValue, getKnob, parseSetting, parseValue, type KnobValue } from '../../knobs/index.ts';
import { createSpace, type SearchSpace, type WorkloadSignals } from '../../optimizer/index.ts';
import type { Setting, TargetKind } from '../../protocol/v1.ts';
import type { TuningMode } from '../../protocol/v1.ts';
import type { SessionSpaceInput, TuningSessionRecord } from './store.ts';
import { TARGETS } from '../../agent/targets/registry.ts';

/**
 * Settings the agent's memory and ordering checks read that are not catalog knobs. Protocol v1
 * reports the catalog's knobs only, so they are filled in: max_connections from the report's
 * activity section, the others with PostgreSQL's defaults. Where a server differs, the agent's
 * own check (the authority) refuses the change, and the session records that iteration as failed.
 */
const CONTEXT_SETTINGS: ReadonlyArray<SessionSpaceInput['settings'][number]> = [
  { name: 'autovacuum_max_workers', setting: '3', unit: null, context: 'postmaster' },
  { name: 'autovacuum_work_mem', setting: '-1', unit: 'kB', context: 'sighup' },
  { name: 'wal_segment_size', setting: '16777216', unit: 'B', context: 'internal' },
];

export function sessionSpaceInput(input: {
  target: TargetKind;
  mode: TuningMode;
  machine: { memoryBytes: number; vcpus: number };
  settings: readonly Setting[];
  maxConnections: number;
}): SessionSpaceInput {
  const settings = input.settings.map((s) => ({
    name: s.name,
    setting: s.setting,
    unit: s.unit,
    context: s.context,
    ...(s.unwritable && { unwritable: s.unwritable }),
  }));
  const have = new Set(settings.map((s) => s.name));
  const context = [
    { name: 'max_connections', setting: String(input.maxConnections), unit: null, context: 'postmaster' },
    ...CONTEXT_SETTINGS,
  ];
  for (const row of context) if (!have.has(row.name)) settings.push({ ...row });
  return {
    target: input.target,
    mode: input.mode,
    machine: { memoryBytes: input.machine.memoryBytes, vcpus: input.machine.vcpus },
    settings,
  };
}

/** Throws (a TypeError naming what is missing) when the space cannot be built. */
export function buildSpace(input: SessionSpaceInput): SearchSpace {
  const { target, mode, machine, settings } = input;
  const space = createSpace({ target, capabilities: TARGETS.capabilitiesOf(target), mode, machine, settings });
  if (!input.knobs) return space;
  const chosen = new Set(input.knobs);
  return {
    ...space,
    dimensions: space.dimensions.filter((d) => chosen.has(d.name)),
    excluded: [
      ...space.excluded,
      ...space.dimensions.filter((d) => !chosen.has(d.name)).map((d) => ({ name: d.name, reason: "not among the session's knobs" })),
    ],
  };
}

export interface ConfigChange {
  name: string;
  baseline: string;
  value: string;
}

function sameValue(a: KnobValue, b: KnobValue): boolean {
  if (typeof a === 'number' && typeof b === 'number') return Math.abs(a - b) <= 1e-9 * Math.max(1, Math.abs(a), Math.abs(b));
  return String(a) === String(b);
}

/** The knobs a configuration sets to something other than the baseline's value, for people. */
export function configDiff(space: SearchSpace, config: Readonly<Record<string, KnobValue>>): ConfigChange[] {
  const changes: ConfigChange[] = [];
  for (const [name, raw] of Object.entries(config)) {
    const knob = getKnob(name);
    const row = space.settings[name];
    if (!knob || !row) {
      changes.push({ name, baseline: row?.setting ?? '?', value: String(raw) });
      continue;
    }
    const parsed = parseValue(knob, raw);
    const value = parsed.ok ? parsed.value : raw;
    let baseline: KnobValue;
    try {
      baseline = parseSetting(knob, row);
    } catch {
      baseline = row.setting;
    }
    if (!sameValue(baseline, value)) changes.push({ name, baseline: describeValue(knob, baseline), value: describeValue(knob, value) });
  }
  return changes;
}

/** What a session's diagnoses read: the advice it was started from, else its baseline's signals. */
export function diagnosisSignals(session: Pick<TuningSessionRecord, 'space' | 'baseline'>): WorkloadSignals | undefined {
  return session.space.advice?.signals ?? session.baseline?.signals;
}

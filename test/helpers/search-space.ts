// The search space the optimizer's tests build, and what every suggestion must be: shared by the
// unit tests (optimizer.test.ts) and the live search's simulation (optimizer-search.test.ts).
import { TARGETS } from '../../src/agent/targets/registry.ts';
import assert from 'node:assert/strict';
import { pg15Settings } from './pg15-settings.ts';
import { GiB, validateChange, type Machine, type TargetKind, type TuningMode } from '../../src/knobs/index.ts';
import { capabilitiesOf, createSpace, type Config, type SearchSpace } from '../../src/optimizer/index.ts';

export const M1: Machine = { memoryBytes: 1 * GiB, vcpus: 1 };
export const M16: Machine = { memoryBytes: 16 * GiB, vcpus: 4 };
export const M64: Machine = { memoryBytes: 64 * GiB, vcpus: 16 };

export function space(
  machine: Machine = M16,
  mode: TuningMode = 'restart',
  target: TargetKind = 'local',
  rows = pg15Settings(),
): SearchSpace {
  return createSpace({ target, capabilities: TARGETS.capabilitiesOf(target), mode, machine, settings: rows });
}

/** Every suggestion must be what the agent accepts for this target, mode, machine and settings. */
export function assertValid(s: SearchSpace, config: Config): void {
  const result = validateChange(config, {
    machine: s.machine,
    mode: s.mode,
    target: s.target,
    capabilities: capabilitiesOf(s),
    settings: s.settings,
  });
  assert.ok(result.ok, `refused by the agent: ${result.ok ? '' : result.errors.join('; ')}`);
  assert.deepEqual(Object.keys(config).sort(), s.dimensions.map((d) => d.name).sort(), 'a full configuration of the space');
}

// The agent.yaml that `tuner-agent init` writes for one target, from the key table: every key the
// target needs as a <PLACEHOLDER> to fill in, the optional ones commented out with their default,
// each under its help text.
import type { TargetKind } from '../../knobs/index.ts';
import { TARGETS } from '../targets/registry.ts';
import { KEYS, type KeySpec } from './keys.ts';

function required(spec: KeySpec, target: TargetKind): boolean {
  return spec.requiredFor.some((r) => r === 'any' || r === 'service' || r === target);
}

function placeholder(spec: KeySpec): string {
  return spec.kind === 'postgres-url' ? spec.help : `<${spec.key.toUpperCase()}>`;
}

/** The default a help text names ("(default true)"), or a placeholder. */
function example(spec: KeySpec): string {
  return /\(default ([^)\s]+?)(?::\s|\s|\))/.exec(spec.help)?.[1] ?? placeholder(spec);
}

export function agentYamlTemplate(target: TargetKind): string {
  const lines = [`# tuner-agent --${target}: replace each <PLACEHOLDER>; docs/configuration.md describes every key.`];
  const own = TARGETS.definitionOf(target).config;
  for (const section of ['postgresql', own.section, 'tuner'].filter((s) => s !== null)) {
    lines.push(`${section}:`);
    for (const spec of KEYS.filter((k) => k.section === section)) {
      // A URL's help is its shape, which the placeholder already shows.
      if (spec.kind !== 'postgres-url') lines.push(`  # ${spec.help}`);
      lines.push(required(spec, target) ? `  ${spec.key}: ${placeholder(spec)}` : `  # ${spec.key}: ${example(spec)}`);
    }
  }
  const envOnly = own.keys.filter((k) => k.section === null);
  if (envOnly.length > 0) {
    lines.push('# Outside Cloud B (no managed identity), sign in as a service principal with the environment variables');
    for (const spec of envOnly) lines.push(`#   ${spec.env}: ${spec.help}`);
  }
  return `${lines.join('\n')}\n`;
}

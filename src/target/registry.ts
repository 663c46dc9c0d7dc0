// A list of target definitions, looked up by kind: how the CLI, the configuration, the setup page
// and the service find a target's definition. The agent's own list is TARGETS
// (src/agent/targets/registry.ts); tests add to it with `with`.
import type { KnobReach, TargetCapabilities } from './capabilities.ts';
import type { TargetDefinition, TargetKindInfo } from './definition.ts';

export class TargetRegistry {
  readonly #byKind = new Map<string, { definition: TargetDefinition; info: TargetKindInfo }>();

  readonly definitions: readonly TargetDefinition[];

  constructor(definitions: readonly TargetDefinition[]) {
    this.definitions = definitions;
    for (const definition of definitions) {
      for (const [kind, info] of Object.entries(definition.kinds)) {
        if (this.#byKind.has(kind)) throw new Error(`target kind ${kind} is defined twice`);
        this.#byKind.set(kind, { definition, info });
      }
    }
  }

  /** Every kind, in the order of the definitions. */
  get kinds(): string[] {
    return [...this.#byKind.keys()];
  }

  has(kind: string): boolean {
    return this.#byKind.has(kind);
  }

  definitionOf(kind: string): TargetDefinition {
    return this.#entry(kind).definition;
  }

  infoOf(kind: string): TargetKindInfo {
    return this.#entry(kind).info;
  }

  capabilitiesOf(kind: string): TargetCapabilities {
    return this.#entry(kind).info.capabilities;
  }

  /** The kinds whose capabilities tune a knob that reaches this far (the catalog's `reachOf`). */
  kindsTuning(knob: KnobReach): string[] {
    return this.kinds.filter((kind) => this.capabilitiesOf(kind).tunes(knob));
  }

  /** A registry with more definitions (tests, and a target built outside this list). */
  with(...more: TargetDefinition[]): TargetRegistry {
    return new TargetRegistry([...this.definitions, ...more]);
  }

  #entry(kind: string) {
    const entry = this.#byKind.get(kind);
    if (!entry) throw new Error(`unknown target ${kind} (expected ${this.kinds.join(', ')})`);
    return entry;
  }
}

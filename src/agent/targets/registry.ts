// Every target the agent knows, once. The CLI, the knob catalog and the service find targets
// here; adding one is a folder (see docs/architecture.md, "Adding a target") and one line below.
import type { TargetCapabilities, TargetDefinition, TargetKindInfo } from './definition.ts';
import { localDefinition } from './local/index.ts';
import { managedADefinition } from './managed-a/index.ts';
import { managedBFlexDefinition } from './managed-b-flex/index.ts';
import { patroniDefinition } from './patroni/index.ts';

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

export const TARGETS = new TargetRegistry([localDefinition, managedADefinition, managedBFlexDefinition, patroniDefinition]);

// What a target is to everything outside its folder: one definition per folder (its index.ts),
// listed once in registry.ts. The CLI (flags, creation, `permissions`, the outbound peers), the
// knob catalog (the parameters it tunes, the bounds it needs, its restart mode) and the service
// (setup page, session actions, pages) read targets only through these definitions.
//
// A definition is plain data and small functions: it imports nothing heavy at load time, because
// the knob catalog and the service load every definition. The target itself (target.ts and the
// SDKs behind it) and its permission document are imported when they are asked for.
import type { AllOrNone, KeySpec } from '../config/keys.ts';
import type { AgentConfig } from '../config/load.ts';
import type { Peer } from '../sending/outbound.ts';
import type { Target, TargetDeps } from './target.ts';

/** What a knob is, as far as a target's choice of parameters goes (see the knob catalog). */
export interface KnobReach {
  readonly name: string;
  /** One of the spec's parameters, which every managed service lets a user set. */
  readonly spec: boolean;
  /** Acts on PostgreSQL's own writing of pages and WAL (checkpoints, background writer, WAL). */
  readonly storage: boolean;
}

/** Whether the agent may restart the server for a change that waits for one. */
export type RestartCapability =
  /** When postgresql.allow_restart says so (restart mode). */
  | { readonly mode: 'allowed' }
  /** Never: restart mode is refused and sessions are reload-only. `why` is said to people
   * (the service, the pages); `refusal` is the agent's message when agent.yaml allows restarts. */
  | { readonly mode: 'never'; readonly why: string; readonly refusal: string };

export interface TargetCapabilities {
  readonly restart: RestartCapability;
  /** The parameters of the knob catalog the agent may tune on this target. */
  readonly tunes: (knob: KnobReach) => boolean;
  /** Largest shared_buffers as a fraction of the machine's memory. */
  readonly sharedBuffersMaxFraction: number;
}

export interface PermissionsOptions {
  /** The kind asked for (a definition may serve two kinds, e.g. an instance and a cluster). */
  kind: string;
  /** `permissions --extended`: the optional rights too (only where `extendedPermissions`). */
  extended: boolean;
  /** Explanations that are not part of the document (the CLI writes them to stderr). */
  note: (text: string) => void;
  /** The agent's configuration when one can be read (e.g. to scope a role), else null. */
  config: () => AgentConfig | null;
}

/** One kind a folder serves (a folder may serve two, e.g. an instance and a cluster). */
export interface TargetKindInfo {
  /** For people: the setup page, the databases page. */
  readonly label: string;
  /** For `tuner-agent --help`. */
  readonly help: string;
  /** Who creates pg_stat_statements there, and what comes first (the preflight's fix);
   * "as the master user" when not said. */
  readonly createsExtension?: string;
  readonly capabilities: TargetCapabilities;
}

export interface TargetDefinition {
  /** The kinds this folder serves; each kind is also its command-line flag (`--<kind>`). */
  readonly kinds: Readonly<Record<string, TargetKindInfo>>;
  /** Its own agent.yaml keys (its config.ts), which src/agent/config/keys.ts lists with the
   * common ones: the docs, agent.yaml's template and the loader all read them from there. */
  readonly config: {
    /** The agent.yaml section of its keys, or null when it has none. */
    readonly section: KeySpec['section'];
    readonly keys: readonly KeySpec[];
    /** Keys that mean something only together (a credential in parts). */
    readonly allOrNone: readonly AllOrNone[];
  };
  /** `permissions --extended` means something here. */
  readonly extendedPermissions: boolean;
  /** Makes the target for `deps.config`; heavy code is imported here, not at load time. */
  create(kind: string, deps: TargetDeps): Promise<Target>;
  /** What `tuner-agent permissions --<kind>` prints. */
  permissions(options: PermissionsOptions): Promise<string>;
  /** Whom the agent talks to besides the database and the service (for --check's route lines). */
  peers(kind: string, config: AgentConfig, env: Readonly<Record<string, string | undefined>>): Peer[];
}

// What a target allows, as data: the knob catalog and the service read a target's capabilities
// and never the registry of targets, so this module imports nothing.

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
  /** The bounds here differ from a self-hosted server's on the same machine (Aurora's
   * shared_buffers), so a value refused as out of bounds names the target beside the machine. */
  readonly boundsNameTarget?: boolean;
}

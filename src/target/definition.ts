// What a target is to everything outside its folder: one definition per folder (its index.ts),
// listed once in registry.ts. The CLI (flags, creation, `permissions`, the outbound peers), the
// knob catalog (the parameters it tunes, the bounds it needs, its restart mode) and the service
// (setup page, session actions, pages) read targets only through these definitions.
//
// A definition is plain data and small functions: it imports nothing heavy at load time, because
// the knob catalog and the service load every definition. The target itself (target.ts and the
// SDKs behind it) and its permission document are imported when they are asked for.
import type { TargetAgentConfig, TargetConfigSection } from './config.ts';
import type { TargetSetup } from './setup.ts';
import type { SslMode } from '../postgres/connect.ts';
import type { Peer } from './outbound.ts';
import type { TargetCapabilities } from './capabilities.ts';
import type { Target, TargetDeps } from './target.ts';

export type { KnobReach, RestartCapability, TargetCapabilities } from './capabilities.ts';

export interface PermissionsOptions {
  /** The kind asked for (a definition may serve two kinds, e.g. an instance and a cluster). */
  kind: string;
  /** `permissions --extended`: the optional rights too (only where `extendedPermissions`). */
  extended: boolean;
  /** Explanations that are not part of the document (the CLI writes them to stderr, after the
   * document on stdout, so that `permissions --<kind> > file` holds the document alone). */
  note: (text: string) => void;
  /** The agent's configuration when one can be read (e.g. to scope a role), else null. */
  config: () => TargetAgentConfig | null;
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
  /** What the service's setup page shows for it; without, the database's side and placeholders. */
  readonly setup?: TargetSetup;
  /** How the agent connects when postgresql.connection_url names no sslmode; libpq's own
   * default (prefer) when absent. */
  readonly tls?: TargetTls;
}

export interface TargetTls {
  readonly sslmode: SslMode;
  /** The CAs trusted in place of Node's store (loaded only for this target), and how to name them. */
  ca?(): Promise<{ certificates: string[]; description: string }>;
  /** Said after "name it in postgresql.extra_ca_file" when a certificate does not verify. */
  readonly addCaHint?: string;
}

export interface TargetDefinition {
  /** The kinds this folder serves; each kind is also its command-line flag (`--<kind>`). */
  readonly kinds: Readonly<Record<string, TargetKindInfo>>;
  /** Its own agent.yaml keys (its config.ts), which src/agent/config/keys.ts lists with the
   * common ones: the docs, agent.yaml's template and the loader all read them from there. */
  readonly config: TargetConfigSection;
  /** `permissions --extended` means something here. */
  readonly extendedPermissions: boolean;
  /** Makes the target for `deps.config`; heavy code is imported here, not at load time. */
  create(kind: string, deps: TargetDeps): Promise<Target>;
  /** The document `tuner-agent permissions --<kind>` prints on stdout, and nothing else: JSON
   * that parses, or SQL that psql runs as it is; anything else goes through `note`. */
  permissions(options: PermissionsOptions): Promise<string>;
  /** Whom the agent talks to besides the database and the service (for --check's route lines). */
  peers(kind: string, config: TargetAgentConfig, env: Readonly<Record<string, string | undefined>>): Peer[];
}

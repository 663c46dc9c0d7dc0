// What the service's setup page shows of a target, from its definition: the steps before the
// agent runs, an example connection URL, and example values of its own keys (their agent.yaml
// paths and environment variables come from its key table, never typed again).

/** One step of the setup page: a text to copy, with what to know first. */
export interface SetupStep {
  /** The element id of the text on the page. */
  id: string;
  title: string;
  /** What to know before copying, in words. */
  note: string;
  text: string;
}

/** An example value of one of the target's keys (by its key in its table). */
export interface SetupEntry {
  key: string;
  /** A list is a YAML list in agent.yaml and comma-separated in the environment, as the loader
   * takes a list key in either place. */
  value: string | boolean | readonly string[];
  /** A comment above the key in agent.yaml. */
  comment?: string;
  /** Only in agent.yaml (e.g. a restart command has no use inside a container). */
  fileOnly?: boolean;
}

export interface TargetSetup {
  /** postgresql.connection_url's example: the names the target's certificates hold, and its TLS. */
  readonly connection: { host: string; dbname: string; query: string; comment?: string };
  /** The target's own keys with placeholders, in the order shown. */
  readonly entries: readonly SetupEntry[];
  /** The steps before agent.yaml, in the order they are done. */
  steps(databaseId: string): SetupStep[];
  /** A container task definition (ECS) is shown, without these keys (the task's role gives them). */
  readonly containerTask?: { readonly omit: readonly string[] };
}

/** The database's side, which every target needs. */
export const DATABASE_SQL = `CREATE USER agent_user WITH PASSWORD '<AGENT_USER_PASSWORD>';
GRANT pg_monitor TO agent_user;
CREATE EXTENSION IF NOT EXISTS pg_stat_statements;
`;

/** Lines of a step's text, ending with a newline. */
export function lines(...text: string[]): string {
  return `${text.join('\n')}\n`;
}

/** Host names that mean the machine itself, as a connection URL's host. */
export const LOOPBACK_HOSTS: readonly string[] = ['localhost', '127.0.0.1', '::1', '[::1]'];

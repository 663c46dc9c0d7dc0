// The real PostgreSQL behind a fake DB instance. Its pg_settings give the parameter groups
// their parameters (name, apply type, data type, allowed values, engine default), and the
// fake's apply and reboot land in it: ALTER SYSTEM + reload for what Cloud A applies, a restart
// for a reboot, so that the agent's read-back from pg_settings sees what the group says.
import pg from 'pg';
import type { Cluster } from '../../../src/lab/cluster.ts';

export interface TemplateParameter {
  name: string;
  description: string;
  applyType: 'static' | 'dynamic';
  dataType: 'boolean' | 'integer' | 'float' | 'string';
  allowedValues: string | undefined;
  modifiable: boolean;
  /** The engine's own default, in the group's spelling (booleans as 1/0). */
  engineDefault: string | undefined;
}

interface SettingRow {
  name: string;
  short_desc: string;
  context: string;
  vartype: string;
  min_val: string | null;
  max_val: string | null;
  enumvals: string[] | null;
  boot_val: string | null;
}

/** Parameters a managed service keeps to itself (connection and file layout). */
const NOT_MODIFIABLE = new Set([
  'port',
  'listen_addresses',
  'unix_socket_directories',
  'unix_socket_group',
  'unix_socket_permissions',
  'data_directory',
  'config_file',
  'hba_file',
  'ident_file',
  'external_pid_file',
  'logging_collector',
  'log_directory',
  'ssl_cert_file',
  'ssl_key_file',
]);

const DATA_TYPES: Record<string, TemplateParameter['dataType']> = {
  bool: 'boolean',
  integer: 'integer',
  real: 'float',
  enum: 'string',
  string: 'string',
};

function toTemplate(row: SettingRow): TemplateParameter {
  const dataType = DATA_TYPES[row.vartype] ?? 'string';
  const allowedValues =
    dataType === 'boolean'
      ? '0,1'
      : row.vartype === 'enum'
        ? row.enumvals?.join(',')
        : row.min_val !== null && row.max_val !== null
          ? `${row.min_val}-${row.max_val}`
          : undefined;
  const engineDefault = row.boot_val === null ? undefined : dataType === 'boolean' ? (row.boot_val === 'on' ? '1' : '0') : row.boot_val;
  return {
    name: row.name,
    description: row.short_desc,
    applyType: row.context === 'postmaster' ? 'static' : 'dynamic',
    dataType,
    allowedValues,
    modifiable: !NOT_MODIFIABLE.has(row.name),
    engineDefault,
  };
}

export class PostgresEngine {
  readonly cluster: Cluster;
  readonly template: readonly TemplateParameter[];
  readonly majorVersion: number;
  #queue: Promise<unknown> = Promise.resolve();

  private constructor(cluster: Cluster, template: TemplateParameter[], majorVersion: number) {
    this.cluster = cluster;
    this.template = template;
    this.majorVersion = majorVersion;
  }

  static async open(cluster: Cluster): Promise<PostgresEngine> {
    const rows = await cluster.sql<SettingRow>(
      `SELECT name, short_desc, context, vartype, min_val, max_val, enumvals, boot_val FROM pg_settings WHERE context <> 'internal' ORDER BY name`,
    );
    const [version] = await cluster.sql<{ v: string }>(`SELECT current_setting('server_version_num') AS v`);
    return new PostgresEngine(cluster, rows.map(toTemplate), Math.floor(Number(version?.v ?? 0) / 10000));
  }

  /** Makes postgresql.auto.conf hold exactly `desired` (name → value as PostgreSQL takes it), then reloads.
   * Returns whether a value now waits for a restart. Runs one at a time. */
  sync(desired: ReadonlyMap<string, string>): Promise<boolean> {
    const next = this.#queue.then(() => this.#sync(desired));
    this.#queue = next.catch(() => undefined);
    return next;
  }

  /**
   * Aurora PostgreSQL's aurora_db_instance_identifier(): the DB instance a session is connected
   * to (https://docs.aws.amazon.com/AmazonRDS/latest/AuroraUserGuide/aurora_db_instance_identifier.html),
   * here the cluster's writer; dropped (null) when the PostgreSQL serves a plain RDS instance,
   * which has no such function.
   */
  async setAuroraInstance(id: string | null): Promise<void> {
    await this.cluster.sql(
      id === null
        ? 'DROP FUNCTION IF EXISTS aurora_db_instance_identifier()'
        : `CREATE OR REPLACE FUNCTION aurora_db_instance_identifier() RETURNS text LANGUAGE sql STABLE AS $$ SELECT ${pg.escapeLiteral(id)}::text $$`,
    );
  }

  restart(): Promise<void> {
    const next = this.#queue.then(() => this.cluster.restart());
    this.#queue = next.catch(() => undefined);
    return next;
  }

  async #sync(desired: ReadonlyMap<string, string>): Promise<boolean> {
    const client = new pg.Client({ connectionString: this.cluster.adminUrl });
    await client.connect();
    try {
      const rows = await client.query<{ name: string; setting: string }>(
        `SELECT name, setting FROM pg_file_settings WHERE sourcefile LIKE '%postgresql.auto.conf' ORDER BY seqno`,
      );
      const current = new Map(rows.rows.map((r) => [r.name, r.setting]));
      let changed = false;
      for (const name of current.keys()) {
        if (!desired.has(name)) {
          await client.query(`ALTER SYSTEM RESET ${pg.escapeIdentifier(name)}`);
          changed = true;
        }
      }
      for (const [name, value] of desired) {
        if (current.get(name) === value) continue;
        await client.query(`ALTER SYSTEM SET ${pg.escapeIdentifier(name)} = ${pg.escapeLiteral(value)}`);
        changed = true;
      }
      if (!changed) return false;
      await client.query('SELECT pg_reload_conf()');
      // The reload is asynchronous: a new session sees its outcome once the postmaster has it.
      await new Promise((r) => setTimeout(r, 50));
      const pending = await this.cluster.sql<{ n: string }>('SELECT count(*) AS n FROM pg_settings WHERE pending_restart');
      return Number(pending[0]?.n ?? 0) > 0;
    } finally {
      await client.end();
    }
  }
}

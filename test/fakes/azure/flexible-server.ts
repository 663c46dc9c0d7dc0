// The fake flexible server's state: its resource (SKU, version, storage, high availability) and
// its server parameters, kept on a real throwaway PostgreSQL cluster. A written parameter is
// applied the way the service applies it (ALTER SYSTEM, then a reload for a dynamic one), so
// that the agent's read-back from pg_settings sees it. Resetting to the default value makes the
// source `system-default` again, as the service reports.
//
// A restart takes time, and PostgreSQL is down meanwhile (state Restarting). Resource Manager's
// reads are served by the service, not by PostgreSQL: the resource and its configurations stay
// readable during a restart, answered from what the service last knew.
import { setTimeout as sleep } from 'node:timers/promises';
import type { Cluster } from '../../../src/lab/cluster.ts';

export interface Sku {
  name: string;
  tier: string;
}

interface SettingRow {
  name: string;
  setting: string;
  unit: string | null;
  vartype: string;
  context: string;
  short_desc: string;
  min_val: string | null;
  max_val: string | null;
  enumvals: string[] | null;
  pending_restart: boolean;
  /** What postgresql.auto.conf holds for it, if anything: the configured value. */
  configured: string | null;
}

/** Server parameters the service has and PostgreSQL does not. A `Set` holds a comma-separated
 * list of its allowed values; a `Boolean` one of on,off. */
interface VirtualParameter {
  value: string;
  defaultValue: string;
  description: string;
  dataType: 'Set' | 'Boolean';
  allowedValues: string;
}

export type WriteOutcome = { ok: true } | { ok: false; status: number; code: string; message: string };

const DATA_TYPES: Record<string, string> = { bool: 'Boolean', integer: 'Integer', real: 'Numeric', enum: 'Enumeration', string: 'String' };
const PARAMETER_NAME = /^[a-z_][a-z0-9_.]*$/;

// Server parameters Azure marks isReadOnly: true and refuses to write, because the service owns
// them (https://learn.microsoft.com/azure/postgresql/flexible-server/concepts-server-parameters,
// "Read-only: these parameters aren't user configurable"; list them with
// `az postgres flexible-server parameter list --query "[?isReadOnly==\`true\`]"`,
// https://learn.microsoft.com/azure/postgresql/flexible-server/how-to-server-parameters-list-read-only).
// A representative subset, not Azure's full list.
const READ_ONLY = new Set([
  'port',
  'listen_addresses',
  'data_directory',
  'hba_file',
  'ident_file',
  'config_file',
  'ssl_cert_file',
  'ssl_key_file',
  'ssl_ca_file',
  'unix_socket_directories',
  'archive_command',
]);

/** Allowed values Azure narrows from PostgreSQL's: wal_level minimal is not offered
 * (https://learn.microsoft.com/azure/postgresql/flexible-server/concepts-logical). */
const AZURE_ALLOWED: Readonly<Record<string, string>> = { wal_level: 'replica,logical' };

/** Whether a Set or Boolean value is within its allowed values, as Azure checks it (each item
 * of a set, case-insensitive). */
function allowedVirtual(v: VirtualParameter, value: string): boolean {
  const allowed = v.allowedValues.split(',').map((a) => a.toLowerCase());
  const items = v.dataType === 'Set' ? value.split(',').map((i) => i.trim()) : [value.trim()];
  return items.every((i) => (i === '' ? v.dataType === 'Set' : allowed.includes(i.toLowerCase())));
}

/** Azure's own check of a value against allowedValues (see write()). */
function allowedByAzure(value: string, allowed: string): boolean {
  if (allowed === '.*') return true;
  const range = /^(-?\d+(?:\.\d+)?(?:e[+-]?\d+)?)-(-?\d+(?:\.\d+)?(?:e[+-]?\d+)?)$/i.exec(allowed);
  if (range) return /^\s*-?\d+(\.\d+)?\s*$/.test(value) && Number(value) >= Number(range[1]) && Number(value) <= Number(range[2]);
  return allowed.split(',').includes(value.trim().toLowerCase());
}

function sameValue(a: string, b: string): boolean {
  const x = Number(a);
  const y = Number(b);
  if (a.trim() !== '' && b.trim() !== '' && Number.isFinite(x) && Number.isFinite(y))
    return Math.abs(x - y) < 1e-9 * Math.max(1, Math.abs(x));
  return a.trim().toLowerCase() === b.trim().toLowerCase();
}

function quote(value: string): string {
  return `'${value.replaceAll("'", "''")}'`;
}

export interface FakeFlexibleServerOptions {
  cluster: Cluster;
  id: string;
  name: string;
  location: string;
  fqdn: string;
  sku: Sku;
  extensions: string;
}

export class FakeFlexibleServer {
  readonly id: string;
  readonly name: string;
  readonly location: string;
  sku: Sku;
  state = 'Ready';
  readonly #cluster: Cluster;
  readonly #fqdn: string;
  readonly #defaults = new Map<string, string>();
  readonly #userOverrides = new Set<string>();
  readonly #virtual = new Map<string, VirtualParameter>();
  /** Parameters that turn out to need a restart: written values wait here, not applied. */
  readonly #needsRestart = new Set<string>();
  readonly #readOnly = new Set<string>();
  /** Allowed values narrower than PostgreSQL's, set by a test. */
  readonly #narrowed = new Map<string, string>();
  readonly #pendingValues = new Map<string, string>();
  readonly #initialVirtual = new Map<string, string>();
  readonly #initialSku: Sku;
  #version = { num: '0', version: '' };
  /** What the service last knew of the configurations, while PostgreSQL is down for a restart. */
  #known: object[] | undefined;

  private constructor(options: FakeFlexibleServerOptions) {
    this.#cluster = options.cluster;
    this.id = options.id;
    this.name = options.name;
    this.location = options.location;
    this.#fqdn = options.fqdn;
    this.sku = options.sku;
    this.#initialSku = options.sku;
    this.#virtual.set('azure.extensions', {
      value: options.extensions,
      defaultValue: '',
      description: 'Specifies which extensions are allowed to be created in the server.',
      allowedValues:
        'address_standardizer,amcheck,bloom,btree_gin,btree_gist,citext,cube,hstore,pg_stat_statements,pgcrypto,postgis,uuid-ossp',
      dataType: 'Set',
    });
    // Azure's own tuning of some server parameters
    // (https://learn.microsoft.com/azure/postgresql/parameters/parameters-intelligent-tuning).
    this.#virtual.set('intelligent_tuning', {
      value: 'off',
      defaultValue: 'off',
      description: 'Enables intelligent tuning',
      allowedValues: 'on,off',
      dataType: 'Boolean',
    });
    this.#virtual.set('intelligent_tuning.metric_targets', {
      value: 'none',
      defaultValue: 'none',
      description: 'Specifies which metrics will be adjusted by intelligent tuning.',
      allowedValues:
        'none,Storage-checkpoint_completion_target,Storage-min_wal_size,Storage-max_wal_size,Storage-bgwriter_delay,tuning-autovacuum,all',
      dataType: 'Set',
    });
    for (const [name, v] of this.#virtual) this.#initialVirtual.set(name, v.value);
  }

  static async create(options: FakeFlexibleServerOptions): Promise<FakeFlexibleServer> {
    const server = new FakeFlexibleServer(options);
    for (const row of await server.#settings()) server.#defaults.set(row.name.toLowerCase(), row.setting);
    const [v] = await options.cluster.sql<{ num: string; version: string }>(
      `SELECT current_setting('server_version_num') AS num, current_setting('server_version') AS version`,
    );
    if (v) server.#version = v;
    return server;
  }

  async #settings(): Promise<SettingRow[]> {
    return this.#cluster.sql<SettingRow>(
      `SELECT s.name, s.setting, s.unit, s.vartype, s.context, s.short_desc, s.min_val, s.max_val, s.enumvals, s.pending_restart,
              f.setting AS configured
         FROM pg_settings s
         LEFT JOIN (SELECT DISTINCT ON (name) name, setting FROM pg_file_settings
                     WHERE sourcefile LIKE '%postgresql.auto.conf' ORDER BY name, seqno DESC) f ON f.name = s.name
        WHERE s.context <> 'internal' ORDER BY s.name`,
    );
  }

  /** The resource, as GET …/flexibleServers/{name} returns it (api-version 2025-08-01). */
  resource(): object {
    const v = this.#version;
    const major = String(Math.floor(Number(v.num) / 10000));
    return {
      sku: this.sku,
      systemData: { createdAt: '2025-01-15T10:00:00.000Z' },
      properties: {
        administratorLogin: 'tuneradmin',
        version: major,
        minorVersion: v.version.split(' ')[0],
        state: this.state,
        fullyQualifiedDomainName: this.#fqdn,
        storage: { storageSizeGB: 128, autoGrow: 'Disabled', tier: 'P10', iops: 500, type: 'Premium_LRS' },
        authConfig: { activeDirectoryAuth: 'Disabled', passwordAuth: 'Enabled' },
        dataEncryption: { type: 'SystemManaged' },
        backup: { backupRetentionDays: 7, geoRedundantBackup: 'Disabled', earliestRestoreDate: '2025-01-15T10:05:00.000Z' },
        network: { publicNetworkAccess: 'Enabled' },
        highAvailability: { mode: 'Disabled', state: 'NotEnabled' },
        maintenanceWindow: { customWindow: 'Disabled', dayOfWeek: 0, startHour: 0, startMinute: 0 },
        availabilityZone: '1',
        replicationRole: 'Primary',
        replica: { role: 'Primary', capacity: 5 },
      },
      location: this.location,
      tags: {},
      id: this.id,
      name: this.name,
      type: 'Microsoft.DBforPostgreSQL/flexibleServers',
    };
  }

  #configuration(name: string, p: Record<string, unknown>): object {
    return {
      properties: p,
      id: `${this.id}/configurations/${name}`,
      name,
      type: 'Microsoft.DBforPostgreSQL/flexibleServers/configurations',
    };
  }

  /** A configuration's allowedValues as Azure lists them: on,off; the enum's words; min-max in
   * the parameter's unit; or a narrower range a test set (Azure's can be narrower than PostgreSQL's). */
  #allowedValues(r: SettingRow): string {
    const narrowed = this.#narrowed.get(r.name.toLowerCase()) ?? AZURE_ALLOWED[r.name.toLowerCase()];
    if (narrowed) return narrowed;
    return r.vartype === 'bool'
      ? 'on,off'
      : r.vartype === 'enum'
        ? (r.enumvals ?? []).join(',')
        : r.vartype === 'string'
          ? '.*'
          : `${r.min_val}-${r.max_val}`;
  }

  /** Every server parameter, as the configurations list returns them. */
  async configurations(): Promise<object[]> {
    return this.#known ?? (await this.#readConfigurations());
  }

  async #readConfigurations(): Promise<object[]> {
    const rows = await this.#settings();
    const list = rows.map((r) => {
      // Names as PostgreSQL spells them (DateStyle, TimeZone), as Azure lists them; everything
      // the fake keeps about them is by the lower-case name.
      const key = r.name.toLowerCase();
      const pending = this.#pendingValues.get(key);
      const allowedValues = this.#allowedValues(r);
      // A value waiting for a restart: Azure shows the configured value with
      // isConfigPendingRestart true, not the running one
      // (https://learn.microsoft.com/rest/api/postgresql/flexibleserver/configurations/get,
      // ConfigurationProperties.value and isConfigPendingRestart).
      const configured = r.pending_restart && r.configured !== null ? r.configured : undefined;
      return this.#configuration(r.name, {
        value: pending ?? configured ?? r.setting,
        description: r.short_desc,
        defaultValue: this.#defaults.get(key) ?? r.setting,
        dataType: DATA_TYPES[r.vartype] ?? 'String',
        allowedValues,
        source: this.#userOverrides.has(key) ? 'user-override' : 'system-default',
        isDynamicConfig: r.context !== 'postmaster',
        isReadOnly: READ_ONLY.has(key) || this.#readOnly.has(key),
        isConfigPendingRestart: pending !== undefined || r.pending_restart,
        ...(r.unit && { unit: r.unit }),
        documentationLink: `https://www.postgresql.org/docs/current/runtime-config.html#GUC-${r.name.toUpperCase().replaceAll('_', '-')}`,
      });
    });
    for (const [name, v] of this.#virtual) {
      list.push(
        this.#configuration(name, {
          value: v.value,
          description: v.description,
          defaultValue: v.defaultValue,
          dataType: v.dataType,
          allowedValues: v.allowedValues,
          source: this.#userOverrides.has(name) ? 'user-override' : 'system-default',
          isDynamicConfig: true,
          isReadOnly: false,
          isConfigPendingRestart: false,
        }),
      );
    }
    return list.sort((a, b) => ((a as { name: string }).name < (b as { name: string }).name ? -1 : 1));
  }

  /** One configuration; names are case-insensitive, as Resource Manager's are. */
  async configuration(name: string): Promise<object | undefined> {
    const wanted = name.toLowerCase();
    return (await this.configurations()).find((c) => (c as { name: string }).name.toLowerCase() === wanted);
  }

  /** Why the service refuses to write `value`, checked when the request comes, before any
   * operation starts; null when it takes it. */
  async refusal(name: string, value: string, source: string): Promise<WriteOutcome | null> {
    const outcome = await this.#check(name.toLowerCase(), value, source);
    return outcome.ok ? null : outcome;
  }

  /** Applies a written value the way the service does (when its operation's time has come). */
  async write(name: string, value: string, source: string): Promise<WriteOutcome> {
    name = name.toLowerCase();
    const checked = await this.#check(name, value, source);
    if (!checked.ok) return checked;
    const virtual = this.#virtual.get(name);
    if (virtual) {
      virtual.value = value;
      this.#markSource(name, source === 'system-default' || sameValue(value, virtual.defaultValue));
      return { ok: true };
    }
    const defaultValue = this.#defaults.get(name)!;
    const toDefault = source === 'system-default' || sameValue(value, defaultValue);
    if (this.#needsRestart.has(name)) {
      const [running] = await this.#cluster.sql<{ setting: string }>('SELECT setting FROM pg_settings WHERE name = $1', [name]);
      const wanted = toDefault ? defaultValue : value;
      if (running && sameValue(running.setting, wanted)) this.#pendingValues.delete(name);
      else this.#pendingValues.set(name, wanted);
      this.#markSource(name, toDefault);
      return { ok: true };
    }
    try {
      await this.#cluster.sql(toDefault ? `ALTER SYSTEM RESET ${name}` : `ALTER SYSTEM SET ${name} = ${quote(value)}`);
      await this.#cluster.sql('SELECT pg_reload_conf()');
    } catch (err) {
      return {
        ok: false,
        status: 400,
        code: 'InvalidParameterValue',
        message: `Invalid value given for parameter ${name}: ${(err as Error).message}`,
      };
    }
    this.#markSource(name, toDefault);
    return { ok: true };
  }

  async #check(name: string, value: string, source: string): Promise<WriteOutcome> {
    const virtual = this.#virtual.get(name);
    if (virtual) {
      return allowedVirtual(virtual, value)
        ? { ok: true }
        : {
            ok: false,
            status: 400,
            code: 'InvalidParameterValue',
            message: `Invalid value given for parameter ${name}. Specify a valid parameter value (allowed values: ${virtual.allowedValues}).`,
          };
    }
    const defaultValue = this.#defaults.get(name);
    if (defaultValue === undefined || !PARAMETER_NAME.test(name)) {
      return {
        ok: false,
        status: 404,
        code: 'ConfigurationNotExists',
        message: `The configuration '${name}' does not exist for server '${this.name}'.`,
      };
    }
    if (READ_ONLY.has(name) || this.#readOnly.has(name)) {
      // The exact code for a write to a read-only parameter is not in the REST reference; the
      // service answers 400 and leaves the parameter untouched, which is what we model.
      return {
        ok: false,
        status: 400,
        code: 'InvalidParameterValue',
        message: `The configuration '${name}' is read-only and cannot be modified on server '${this.name}'.`,
      };
    }
    const toDefault = source === 'system-default' || sameValue(value, defaultValue);
    // Azure checks a value against the configuration's allowedValues itself, before PostgreSQL
    // sees it: no units ("16MB"), no synonyms ("true" for on,off), nothing outside the range
    // (https://learn.microsoft.com/azure/postgresql/flexible-server/how-to-configure-server-parameters,
    // "Allowed values"; the error is 400 InvalidParameterValue).
    if (!toDefault) {
      const [row] = (await this.#settings()).filter((r) => r.name.toLowerCase() === name);
      const allowed = row ? this.#allowedValues(row) : '.*';
      if (!allowedByAzure(value, allowed)) {
        return {
          ok: false,
          status: 400,
          code: 'InvalidParameterValue',
          message: `Invalid value given for parameter ${name}. Specify a valid parameter value (allowed values: ${allowed}).`,
        };
      }
    }
    return { ok: true };
  }

  #markSource(name: string, toDefault: boolean): void {
    if (toDefault) this.#userOverrides.delete(name);
    else this.#userOverrides.add(name);
  }

  /** Restarts the server: PostgreSQL is down for `downMs` and more (connections refused), then
   * values waiting for a restart take effect. */
  async restart(downMs: number): Promise<void> {
    this.state = 'Restarting';
    try {
      for (const [name, value] of this.#pendingValues) {
        await this.#cluster.sql(`ALTER SYSTEM SET ${name} = ${quote(value)}`);
      }
      this.#pendingValues.clear();
      this.#known = await this.#readConfigurations();
      await this.#cluster.stop();
      await sleep(downMs);
      // pg_ctl restart starts a stopped server.
      await this.#cluster.restart();
    } finally {
      this.#known = undefined;
      this.state = 'Ready';
    }
  }

  // ---- test controls ----

  /** From now on, written values of `name` wait for a restart (isConfigPendingRestart). */
  needRestartFor(name: string): void {
    this.#needsRestart.add(name.toLowerCase());
  }

  /** From now on, `name` allows only `allowed` ("min-max" or a comma list), as some Azure tiers narrow a range. */
  narrowAllowedValues(name: string, allowed: string): void {
    this.#narrowed.set(name.toLowerCase(), allowed);
  }

  /** From now on, `name` is read-only as well (a tier or region where Azure locks it). */
  makeReadOnly(name: string): void {
    this.#readOnly.add(name.toLowerCase());
  }

  /** Sets a server parameter the way the service does, without an operation (a test's set-up). */
  async set(name: string, value: string): Promise<void> {
    const outcome = await this.write(name, value, 'user-override');
    if (!outcome.ok) throw new Error(`fake Cloud B: ${outcome.message}`);
  }

  setExtensions(value: string): void {
    this.#virtual.get('azure.extensions')!.value = value;
  }

  /** Source, value and pending flag of one parameter, as the fake has them. */
  async parameter(name: string): Promise<{ value: string; source: string; pending: boolean }> {
    const c = (await this.configuration(name)) as
      { properties: { value: string; source: string; isConfigPendingRestart: boolean } } | undefined;
    if (!c) throw new Error(`fake Cloud B: no server parameter ${name}`);
    return { value: c.properties.value, source: c.properties.source, pending: c.properties.isConfigPendingRestart };
  }

  /** Back to a clean server: no overrides, nothing pending, no special behaviour. */
  async reset(): Promise<void> {
    for (const name of this.#userOverrides) {
      if (!this.#virtual.has(name)) await this.#cluster.sql(`ALTER SYSTEM RESET ${name}`);
    }
    await this.#cluster.sql('SELECT pg_reload_conf()');
    this.#userOverrides.clear();
    this.#needsRestart.clear();
    this.#readOnly.clear();
    this.#narrowed.clear();
    this.#pendingValues.clear();
    for (const [name, value] of this.#initialVirtual) this.#virtual.get(name)!.value = value;
    this.sku = this.#initialSku;
    this.state = 'Ready';
  }
}

// The fake Cloud SQL instance's state: its resource (tier, disk, state, server CA) and its
// database flags, kept on a real throwaway PostgreSQL cluster. A new flag list replaces the old
// one as a whole, as instances.patch does: a flag left out goes back to its default (ALTER SYSTEM
// RESET), a flag given is set (ALTER SYSTEM SET); then a reload, or a restart of the cluster when
// a flag that needs one changed, as Cloud SQL restarts the instance itself. Each change of the
// settings moves settingsVersion on.
import type { Cluster } from '../../../src/lab/cluster.ts';
import { FAKE_FLAGS } from './flags.ts';

/** Cloud SQL's own flags (cloudsql.*) are the service's, not PostgreSQL settings. */
const inPostgres = (name: string) => !name.startsWith('cloudsql.');

export interface Flag {
  name: string;
  value?: string;
}

const quoteIdent = (name: string) => `"${name.replaceAll('"', '""')}"`;
const quote = (value: string) => `'${value.replaceAll("'", "''")}'`;

export interface FakeInstanceOptions {
  cluster: Cluster;
  project: string;
  region: string;
  name: string;
  tier: string;
  memoryBytes: number;
  serverCa: string;
}

export class FakeCloudSqlInstance {
  readonly project: string;
  readonly region: string;
  readonly name: string;
  tier: string;
  readonly memoryBytes: number;
  state = 'RUNNABLE';
  settingsVersion = 1;
  #flags: Flag[] = [];
  readonly #cluster: Cluster;
  readonly #serverCa: string;
  /** How many times the cluster was restarted to apply a flag. */
  restarts = 0;

  constructor(o: FakeInstanceOptions) {
    this.#cluster = o.cluster;
    this.project = o.project;
    this.region = o.region;
    this.name = o.name;
    this.tier = o.tier;
    this.memoryBytes = o.memoryBytes;
    this.#serverCa = o.serverCa;
  }

  get flags(): Flag[] {
    return this.#flags.map((f) => ({ ...f }));
  }

  resource(): Record<string, unknown> {
    return {
      kind: 'sql#instance',
      name: this.name,
      project: this.project,
      region: this.region,
      state: this.state,
      databaseVersion: 'POSTGRES_15',
      backendType: 'SECOND_GEN',
      connectionName: `${this.project}:${this.region}:${this.name}`,
      ipAddresses: [{ type: 'PRIMARY', ipAddress: '127.0.0.1' }],
      settings: {
        kind: 'sql#settings',
        tier: this.tier,
        settingsVersion: String(this.settingsVersion),
        activationPolicy: 'ALWAYS',
        availabilityType: 'ZONAL',
        dataDiskSizeGb: '100',
        dataDiskType: 'PD_SSD',
        ...(this.#flags.length > 0 && { databaseFlags: this.flags }),
      },
      serverCaCert: {
        kind: 'sql#sslCert',
        certSerialNumber: '0',
        cert: this.#serverCa,
        commonName: 'C=US,O=Google\\, Inc,CN=Google Cloud SQL Server CA,dnQualifier=fake',
        instance: this.name,
      },
      etag: `"${this.settingsVersion}"`,
    };
  }

  /** Whether applying `flags` restarts the instance. */
  needsRestart(flags: readonly Flag[]): boolean {
    return this.#changed(flags).some((name) => FAKE_FLAGS[name]?.restart);
  }

  #changed(flags: readonly Flag[]): string[] {
    const names = new Set([...this.#flags.map((f) => f.name), ...flags.map((f) => f.name)]);
    return [...names].filter((n) => this.#flags.find((f) => f.name === n)?.value !== flags.find((f) => f.name === n)?.value);
  }

  /** The settings version moves on when the change is accepted (before it is applied). */
  accept(): void {
    this.settingsVersion += 1;
  }

  /** Replaces the list and applies it to PostgreSQL. */
  async apply(flags: readonly Flag[]): Promise<{ restarted: boolean }> {
    const changed = this.#changed(flags);
    const restart = changed.some((name) => FAKE_FLAGS[name]?.restart);
    for (const name of changed.filter(inPostgres)) {
      const f = flags.find((x) => x.name === name);
      await this.#cluster.sql(
        f ? `ALTER SYSTEM SET ${quoteIdent(name)} = ${quote(f.value ?? '')}` : `ALTER SYSTEM RESET ${quoteIdent(name)}`,
      );
    }
    this.#flags = flags.map((f) => ({ ...f }));
    if (restart) {
      await this.#cluster.restart();
      this.restarts += 1;
    } else await this.#cluster.sql('SELECT pg_reload_conf()');
    return { restarted: restart };
  }

  /** Back to no flags, PostgreSQL's defaults (between tests). */
  async reset(): Promise<void> {
    const restart = this.needsRestart([]);
    for (const f of this.#flags.filter((x) => inPostgres(x.name))) await this.#cluster.sql(`ALTER SYSTEM RESET ${quoteIdent(f.name)}`);
    this.#flags = [];
    this.state = 'RUNNABLE';
    if (restart) await this.#cluster.restart();
    else await this.#cluster.sql('SELECT pg_reload_conf()');
  }
}

// The cluster's members as the agent reads them: a session to each member's PostgreSQL (the
// credentials of postgresql.connection_url, the host and port /cluster gives for the member),
// and each member's pg_settings compared with the dynamic configuration.
import { connectDb, type Db } from '../../database/db.ts';
import { sameSetting } from '../../database/settings.ts';
import { isPgBaseUnit, parseQuantity } from '../../../knobs/units.ts';
import type { ClusterMember, ParameterValue } from './api.ts';

/** One member's pg_settings row, as far as agreement needs it. */
export interface MemberSettingRow {
  name: string;
  setting: string;
  unit: string | null;
  vartype: string;
  source: string;
  sourcefile: string | null;
  pending_restart: boolean;
}

/** postgresql.connection_url with the member's host and port. */
export function memberUrl(connectionUrl: string, member: Pick<ClusterMember, 'host' | 'port'>): string {
  const url = new URL(connectionUrl);
  if (member.host) url.hostname = member.host.includes(':') ? `[${member.host}]` : member.host;
  if (member.port) url.port = String(member.port);
  // A socket directory in the query would win over the host: the member is reached over TCP.
  url.searchParams.delete('host');
  url.searchParams.delete('port');
  return url.toString();
}

/** Sessions to the members, opened when first needed and kept (they survive restarts). */
export class MemberSessions {
  readonly #connectionUrl: string;
  readonly #sessions = new Map<string, Promise<Db>>();

  constructor(connectionUrl: string) {
    this.#connectionUrl = connectionUrl;
  }

  /** The member's session; throws when it cannot be reached. */
  async of(member: ClusterMember): Promise<Db> {
    const key = `${member.host ?? ''}:${member.port ?? ''}`;
    let session = this.#sessions.get(key);
    if (!session) {
      session = connectDb(memberUrl(this.#connectionUrl, member), {
        connectTimeoutMs: 5_000,
        connection: { setting: 'postgresql.connection_url (with a member host and port from Patroni)' },
      });
      this.#sessions.set(key, session);
      // A member that could not be reached is tried again next time.
      session.catch(() => this.#sessions.delete(key));
    }
    return session;
  }

  async settings(member: ClusterMember, names: readonly string[]): Promise<Map<string, MemberSettingRow>> {
    const db = await this.of(member);
    const rows = await db.query<MemberSettingRow>(
      `SELECT name, setting, unit, vartype, source, sourcefile, pending_restart FROM pg_settings WHERE name = ANY($1)`,
      [names.map((n) => n.toLowerCase())],
    );
    return new Map(rows.map((r) => [r.name, r]));
  }

  /** When the member's PostgreSQL started (ms, its own clock). */
  async startTime(member: ClusterMember): Promise<number> {
    const db = await this.of(member);
    const [row] = await db.query<{ t: Date }>('SELECT pg_postmaster_start_time() AS t');
    return row?.t.getTime() ?? 0;
  }

  /** When the member last loaded its configuration files (ms, its own clock). */
  async confLoadTime(member: ClusterMember): Promise<number> {
    const db = await this.of(member);
    const [row] = await db.query<{ t: Date }>('SELECT pg_conf_load_time() AS t');
    return row?.t.getTime() ?? 0;
  }

  async close(): Promise<void> {
    const sessions = [...this.#sessions.values()];
    this.#sessions.clear();
    await Promise.all(sessions.map((s) => s.then((db) => db.close()).catch(() => undefined)));
  }
}

const TRUE_WORDS = new Set(['on', 'true', 'yes', '1', 't', 'y']);
const FALSE_WORDS = new Set(['off', 'false', 'no', '0', 'f', 'n']);

/** The value in pg_settings' own spelling (base units, on/off), or null when it cannot be read. */
export function asSetting(row: Pick<MemberSettingRow, 'unit' | 'vartype'>, value: ParameterValue): string | null {
  if (row.vartype === 'bool') {
    const word = String(value).trim().toLowerCase();
    if (value === true || TRUE_WORDS.has(word)) return 'on';
    if (value === false || FALSE_WORDS.has(word)) return 'off';
    return null;
  }
  if (row.vartype === 'integer' || row.vartype === 'real') {
    const base = row.unit && isPgBaseUnit(row.unit) ? row.unit : null;
    const parsed = parseQuantity(String(value), base, row.vartype);
    return parsed.ok ? String(parsed.value) : null;
  }
  return String(value);
}

/** Patroni writes the dynamic configuration into the member's postgresql.conf. */
export function fromPatroniFile(row: MemberSettingRow): boolean {
  return row.source === 'configuration file' && /\/postgresql\.conf$/.test(row.sourcefile ?? '');
}

/** ALTER SYSTEM's postgresql.auto.conf, read after Patroni's file, would hide it. */
function fromPatroniOrAlterSystem(row: MemberSettingRow): boolean {
  return fromPatroniFile(row) || (row.source === 'configuration file' && /\/postgresql\.auto\.conf$/.test(row.sourcefile ?? ''));
}

export type Agreement = 'agrees' | 'pending-restart' | { differs: string };

/**
 * Whether a member runs what the dynamic configuration says for one parameter: the value when it
 * is set there (numbers in any unit), or, when it is absent, nothing from Patroni's file or from
 * ALTER SYSTEM (the server's default, the command line or postgresql.base.conf). Patroni's file
 * holding an absent parameter means its loop has not removed it yet, or the member's own
 * patroni.yml sets it: either way the member does not run the dynamic configuration.
 */
export function agreement(row: MemberSettingRow, wanted: ParameterValue | undefined): Agreement {
  const unit = row.unit ? ` ${row.unit}` : '';
  if (wanted === undefined) {
    if (row.pending_restart) return 'pending-restart';
    if (fromPatroniOrAlterSystem(row)) {
      return { differs: `${row.name} is ${row.setting}${unit} (from ${fileName(row)}), absent from the dynamic configuration` };
    }
    return 'agrees';
  }
  const expected = asSetting(row, wanted);
  if (expected !== null && sameSetting(row.setting, expected)) return 'agrees';
  if (row.pending_restart) return 'pending-restart';
  const where = row.source === 'configuration file' ? ` (from ${fileName(row)})` : ` (source: ${row.source})`;
  return { differs: `${row.name} is ${row.setting}${unit}${where}, the dynamic configuration says ${String(wanted)}` };
}

function fileName(row: MemberSettingRow): string {
  const file = row.sourcefile ?? '';
  return file.endsWith('postgresql.auto.conf') ? 'ALTER SYSTEM in postgresql.auto.conf' : (file.split('/').pop() ?? file);
}

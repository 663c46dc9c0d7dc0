// What people do with databases, their API keys and commands, whether through the JSON API or the
// HTML forms: the same checks and limits either way. Every action names the acting user, whose organization bounds what it can see.
import { randomUUID } from 'node:crypto';
import type { Command } from '../../protocol/v1.ts';
import { generateApiKey } from '../people/tokens.ts';
import { authorize } from '../authorize.ts';
import { conflict, notFound } from '../errors.ts';
import type { CommandInput, NewDatabaseInput } from './inputs.ts';
import type { ApiKeyInfo, CommandRecord, DatabaseEntry, DatabaseStore, DatabaseSummary } from './store.ts';
import type { Actor, Role, User } from '../people/store.ts';
import { recordAudit, type AuditDeps } from '../audit/record.ts';

/** Enough for any real use, small enough that nobody fills the storage by accident. */
export const LIMITS = { databasesPerOrganization: 500, liveKeysPerDatabase: 20, openCommandsPerDatabase: 20 } as const;

export interface CreatedApiKey {
  info: ApiKeyInfo;
  /** The key itself: shown once, on the page or in the response that created it. */
  apiKey: string;
}

/** What the databases feature needs: its port. */
export interface DatabasesDeps {
  stores: { databases: DatabaseStore };
}

const noSuchDatabase = (id: string) => notFound(`no database ${id} in your organization`);

/** The organization's database, or a not_found error that says so; with `as`, a forbidden error
 * unless the user has that role (authorize.ts). */
export async function databaseOf(
  deps: DatabasesDeps,
  user: User,
  databaseId: string,
  as?: { role: Role; to: string },
): Promise<DatabaseSummary> {
  const { database } = await authorize(deps, user, { databaseId, ...as });
  if (!database) throw noSuchDatabase(databaseId);
  return database;
}

export async function createDatabase(
  deps: DatabasesDeps & AuditDeps,
  user: Actor,
  input: NewDatabaseInput,
): Promise<{ database: DatabaseEntry; key: CreatedApiKey }> {
  await authorize(deps, user, { role: 'admin', to: 'add databases' });
  const existing = await deps.stores.databases.listDatabases(user.organizationId);
  if (existing.length >= LIMITS.databasesPerOrganization) {
    throw conflict(`an organization holds at most ${LIMITS.databasesPerOrganization} databases`);
  }
  const database = await deps.stores.databases.createDatabase(user.organizationId, {
    id: randomUUID(),
    name: input.name,
    target: input.target,
  });
  await recordAudit(deps, user, 'database.created', { name: database.name, target: database.target }, database.id);
  const key = await createApiKey(deps, user, database.id, 'first key');
  return { database, key };
}

export async function createApiKey(
  deps: DatabasesDeps & AuditDeps,
  user: Actor,
  databaseId: string,
  label: string,
): Promise<CreatedApiKey> {
  await databaseOf(deps, user, databaseId, { role: 'admin', to: 'make API keys' });
  if ((await deps.stores.databases.countLiveApiKeys(databaseId)) >= LIMITS.liveKeysPerDatabase) {
    throw conflict(`a database has at most ${LIMITS.liveKeysPerDatabase} live API keys: revoke one first`);
  }
  const generated = generateApiKey();
  const info = await deps.stores.databases.createApiKey(user.organizationId, {
    id: randomUUID(),
    databaseId,
    keyHash: generated.hash,
    displayPrefix: generated.displayPrefix,
    label,
    createdBy: user.id,
  });
  if (!info) throw noSuchDatabase(databaseId);
  await recordAudit(deps, user, 'api_key.created', { keyId: info.id, prefix: info.displayPrefix, label }, databaseId);
  return { info, apiKey: generated.key };
}

export async function revokeApiKey(deps: DatabasesDeps & AuditDeps, user: Actor, databaseId: string, keyId: string): Promise<void> {
  await databaseOf(deps, user, databaseId, { role: 'admin', to: 'revoke API keys' });
  const key = (await deps.stores.databases.listApiKeys(user.organizationId, databaseId)).find((k) => k.id === keyId);
  if (!key || !(await deps.stores.databases.revokeApiKey(user.organizationId, databaseId, keyId))) {
    throw notFound(`no API key ${keyId} of database ${databaseId} in your organization`);
  }
  await recordAudit(deps, user, 'api_key.revoked', { keyId, prefix: key.displayPrefix, label: key.label }, databaseId);
}

export async function issueCommand(
  deps: DatabasesDeps & AuditDeps,
  user: Actor,
  databaseId: string,
  input: CommandInput,
): Promise<CommandRecord> {
  await databaseOf(deps, user, databaseId, { role: 'operator', to: `send ${input.kind} commands` });
  if ((await deps.stores.databases.countOpenCommands(databaseId)) >= LIMITS.openCommandsPerDatabase) {
    throw conflict(`${LIMITS.openCommandsPerDatabase} commands are waiting for the agent already: wait for it to acknowledge them`);
  }
  const id = randomUUID();
  const command: Command =
    input.kind === 'apply'
      ? { id, kind: 'apply', values: { ...input.values }, allowRestart: input.allowRestart, keep: input.keep }
      : { id, kind: 'revert', to: input.to };
  const record = await deps.stores.databases.createCommand(user.organizationId, databaseId, command, user.id);
  if (!record) throw noSuchDatabase(databaseId);
  const details =
    command.kind === 'apply'
      ? { commandId: id, values: command.values, keep: command.keep, allowRestart: command.allowRestart }
      : { commandId: id, to: command.to };
  await recordAudit(deps, user, `command.${command.kind}`, details, databaseId);
  return record;
}

export async function setReportInterval(
  deps: DatabasesDeps & AuditDeps,
  user: Actor,
  databaseId: string,
  seconds: number | null,
): Promise<void> {
  const before = await databaseOf(deps, user, databaseId, { role: 'admin', to: "change a database's report interval" });
  if (!(await deps.stores.databases.setReportInterval(user.organizationId, databaseId, seconds))) throw noSuchDatabase(databaseId);
  await recordAudit(deps, user, 'database.report_interval_changed', { before: before.reportIntervalSeconds, after: seconds }, databaseId);
}

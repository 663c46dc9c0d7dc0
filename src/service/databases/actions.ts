// What people do with databases, their API keys and commands, whether through the JSON API or the
// HTML forms: the same checks and limits either way. Every action names the acting user, whose account bounds what it can see.
import { randomUUID } from 'node:crypto';
import type { Command } from '../../protocol/v1.ts';
import { generateApiKey } from '../people/tokens.ts';
import { authorize } from '../authorize.ts';
import { conflict, notFound } from '../errors.ts';
import type { CommandInput, NewDatabaseInput } from './inputs.ts';
import type { ApiKeyInfo, CommandRecord, DatabaseEntry, DatabaseStore, DatabaseSummary } from './store.ts';
import type { User } from '../people/store.ts';

/** Enough for any real use, small enough that nobody fills the storage by accident. */
export const LIMITS = { databasesPerAccount: 500, liveKeysPerDatabase: 20, openCommandsPerDatabase: 20 } as const;

export interface CreatedApiKey {
  info: ApiKeyInfo;
  /** The key itself: shown once, on the page or in the response that created it. */
  apiKey: string;
}

/** What the databases feature needs: its port. */
export interface DatabasesDeps {
  stores: { databases: DatabaseStore };
}

const noSuchDatabase = (id: string) => notFound(`no database ${id} in your account`);

/** The account's database, or a not_found error that says so (authorize.ts). */
export async function databaseOf(deps: DatabasesDeps, user: User, databaseId: string): Promise<DatabaseSummary> {
  const { database } = await authorize(deps, user, { databaseId });
  if (!database) throw noSuchDatabase(databaseId);
  return database;
}

export async function createDatabase(
  deps: DatabasesDeps,
  user: User,
  input: NewDatabaseInput,
): Promise<{ database: DatabaseEntry; key: CreatedApiKey }> {
  const existing = await deps.stores.databases.listDatabases(user.accountId);
  if (existing.length >= LIMITS.databasesPerAccount) {
    throw conflict(`an account holds at most ${LIMITS.databasesPerAccount} databases`);
  }
  const database = await deps.stores.databases.createDatabase(user.accountId, { id: randomUUID(), name: input.name, target: input.target });
  const key = await createApiKey(deps, user, database.id, 'first key');
  return { database, key };
}

export async function createApiKey(deps: DatabasesDeps, user: User, databaseId: string, label: string): Promise<CreatedApiKey> {
  await databaseOf(deps, user, databaseId);
  if ((await deps.stores.databases.countLiveApiKeys(databaseId)) >= LIMITS.liveKeysPerDatabase) {
    throw conflict(`a database has at most ${LIMITS.liveKeysPerDatabase} live API keys: revoke one first`);
  }
  const generated = generateApiKey();
  const info = await deps.stores.databases.createApiKey(user.accountId, {
    id: randomUUID(),
    databaseId,
    keyHash: generated.hash,
    displayPrefix: generated.displayPrefix,
    label,
    createdBy: user.id,
  });
  if (!info) throw noSuchDatabase(databaseId);
  return { info, apiKey: generated.key };
}

export async function revokeApiKey(deps: DatabasesDeps, user: User, databaseId: string, keyId: string): Promise<void> {
  if (!(await deps.stores.databases.revokeApiKey(user.accountId, databaseId, keyId))) {
    throw notFound(`no API key ${keyId} of database ${databaseId} in your account`);
  }
}

export async function issueCommand(deps: DatabasesDeps, user: User, databaseId: string, input: CommandInput): Promise<CommandRecord> {
  await databaseOf(deps, user, databaseId);
  if ((await deps.stores.databases.countOpenCommands(databaseId)) >= LIMITS.openCommandsPerDatabase) {
    throw conflict(`${LIMITS.openCommandsPerDatabase} commands are waiting for the agent already: wait for it to acknowledge them`);
  }
  const id = randomUUID();
  const command: Command =
    input.kind === 'apply'
      ? { id, kind: 'apply', values: { ...input.values }, allowRestart: input.allowRestart, keep: input.keep }
      : { id, kind: 'revert', to: input.to };
  const record = await deps.stores.databases.createCommand(user.accountId, databaseId, command, user.id);
  if (!record) throw noSuchDatabase(databaseId);
  return record;
}

export async function setReportInterval(deps: DatabasesDeps, user: User, databaseId: string, seconds: number | null): Promise<void> {
  if (!(await deps.stores.databases.setReportInterval(user.accountId, databaseId, seconds))) throw noSuchDatabase(databaseId);
}

// What people do with databases, their API keys and commands, whether through the JSON API or the
// HTML forms: the same checks and limits either way. Every action names the acting user, whose account bounds what it can see.
import { randomUUID } from 'node:crypto';
import type { Command } from '../../protocol/v1.ts';
import { generateApiKey } from '../people/tokens.ts';
import type { ServiceContext } from '../app/context.ts';
import { conflict, notFound } from '../errors.ts';
import type { CommandInput, NewDatabaseInput } from './inputs.ts';
import type { ApiKeyInfo, CommandRecord, DatabaseEntry, DatabaseSummary } from './store.ts';
import type { User } from '../people/store.ts';

/** Enough for any real use, small enough that nobody fills the storage by accident. */
export const LIMITS = { databasesPerAccount: 500, liveKeysPerDatabase: 20, openCommandsPerDatabase: 20 } as const;

export interface CreatedApiKey {
  info: ApiKeyInfo;
  /** The key itself: shown once, on the page or in the response that created it. */
  apiKey: string;
}

const noSuchDatabase = (id: string) => notFound(`no database ${id} in your account`);

/** The account's database, or a not_found error that says so. */
export async function databaseOf(ctx: ServiceContext, user: User, databaseId: string): Promise<DatabaseSummary> {
  const database = await ctx.storage.getDatabase(user.accountId, databaseId);
  if (!database) throw noSuchDatabase(databaseId);
  return database;
}

export async function createDatabase(
  ctx: ServiceContext,
  user: User,
  input: NewDatabaseInput,
): Promise<{ database: DatabaseEntry; key: CreatedApiKey }> {
  const existing = await ctx.storage.listDatabases(user.accountId);
  if (existing.length >= LIMITS.databasesPerAccount) {
    throw conflict(`an account holds at most ${LIMITS.databasesPerAccount} databases`);
  }
  const database = await ctx.storage.createDatabase(user.accountId, { id: randomUUID(), name: input.name, target: input.target });
  const key = await createApiKey(ctx, user, database.id, 'first key');
  return { database, key };
}

export async function createApiKey(ctx: ServiceContext, user: User, databaseId: string, label: string): Promise<CreatedApiKey> {
  await databaseOf(ctx, user, databaseId);
  if ((await ctx.storage.countLiveApiKeys(databaseId)) >= LIMITS.liveKeysPerDatabase) {
    throw conflict(`a database has at most ${LIMITS.liveKeysPerDatabase} live API keys: revoke one first`);
  }
  const generated = generateApiKey();
  const info = await ctx.storage.createApiKey(user.accountId, {
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

export async function revokeApiKey(ctx: ServiceContext, user: User, databaseId: string, keyId: string): Promise<void> {
  if (!(await ctx.storage.revokeApiKey(user.accountId, databaseId, keyId))) {
    throw notFound(`no API key ${keyId} of database ${databaseId} in your account`);
  }
}

export async function issueCommand(ctx: ServiceContext, user: User, databaseId: string, input: CommandInput): Promise<CommandRecord> {
  await databaseOf(ctx, user, databaseId);
  if ((await ctx.storage.countOpenCommands(databaseId)) >= LIMITS.openCommandsPerDatabase) {
    throw conflict(`${LIMITS.openCommandsPerDatabase} commands are waiting for the agent already: wait for it to acknowledge them`);
  }
  const id = randomUUID();
  const command: Command =
    input.kind === 'apply'
      ? { id, kind: 'apply', values: { ...input.values }, allowRestart: input.allowRestart, keep: input.keep }
      : { id, kind: 'revert', to: input.to };
  const record = await ctx.storage.createCommand(user.accountId, databaseId, command, user.id);
  if (!record) throw noSuchDatabase(databaseId);
  return record;
}

export async function setReportInterval(ctx: ServiceContext, user: User, databaseId: string, seconds: number | null): Promise<void> {
  if (!(await ctx.storage.setReportInterval(user.accountId, databaseId, seconds))) throw noSuchDatabase(databaseId);
}

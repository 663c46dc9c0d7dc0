// What one report costs the storage while a tuning session runs, counted by the observed driver
// (storage/observed-driver.ts, observeDriverCalls) on both storages: after the agent's key is
// checked (one lookup, before the body is read), at most two calls: the report's statement (which
// also reads the session's state and hands over a command waiting already), and the session's
// step (a transaction that also hands over the command the step queued).
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { FastifyInstance } from 'fastify';
import { parseServiceArgs } from '../src/service/app/config.ts';
import { createServiceContext } from '../src/service/app/context.ts';
import { buildApp } from '../src/service/http/app.ts';
import { ensureFirstAdmin } from '../src/service/people/actions.ts';
import type { SqlDriver } from '../src/service/storage/driver.ts';
import { migrate } from '../src/service/storage/migrations.ts';
import { observeDriverCalls, type StorageCall } from '../src/service/storage/observed-driver.ts';
import { openPgliteDriver } from '../src/service/storage/pglite-driver.ts';
import { openPostgresDriver } from '../src/service/storage/postgres-driver.ts';
import { createSqlStorage } from '../src/service/storage/sql-storage.ts';
import type { Storage } from '../src/service/storage/storage.ts';
import { ADMIN_PASSWORD, AgentClient, PersonClient, STORAGE_KINDS, createScratchDatabase } from './helpers/service.ts';
import { SimulatedAgent, getTuningSession, startTuningSession } from './sessions-agent.ts';

/** The agent API's key check: a lookup every agent request makes before its body is read. */
const AUTHENTICATION = 'agent_credentials';

interface ReportCost {
  /** Storage calls besides the key check. */
  calls: StorageCall[];
  /** The answer carried a command. */
  command: boolean;
}

for (const kind of STORAGE_KINDS) {
  describe(`storage round-trips per report on ${kind}`, () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'tuner-roundtrips-'));
    let dropDatabase: (() => Promise<void>) | undefined;
    let storage: Storage;
    let app: FastifyInstance;
    let url: string;
    const calls: StorageCall[] = [];

    before(async () => {
      let driver: SqlDriver;
      if (kind === 'postgres') {
        const scratch = await createScratchDatabase();
        dropDatabase = scratch.drop;
        driver = await openPostgresDriver({ url: scratch.url });
      } else {
        driver = await openPgliteDriver(dataDir);
      }
      await migrate(driver);
      storage = createSqlStorage(observeDriverCalls(driver, (call) => calls.push(call)));
      const request = parseServiceArgs(['--listen', '127.0.0.1:0', '--data-dir', dataDir], {
        TUNER_ADMIN_PASSWORD: ADMIN_PASSWORD,
        TUNER_LOG_LEVEL: 'warn',
      });
      if (request.kind !== 'run') throw new Error('expected a run configuration');
      // The service without its ticker, so that every storage call counted is a request's.
      const ctx = createServiceContext(storage, request.config);
      await ensureFirstAdmin(ctx, () => undefined);
      app = buildApp(ctx, { logStream: { write: () => undefined } });
      url = await app.listen({ host: '127.0.0.1', port: 0 });
    });
    after(async () => {
      await app?.close();
      await storage?.close();
      await dropDatabase?.();
      rmSync(dataDir, { recursive: true, force: true });
    });

    test('one without a session; at most two while a session runs, the step that queues a trial included', async () => {
      const person = await PersonClient.login(url, 'admin', ADMIN_PASSWORD);
      const { databaseId, apiKey } = await person.createDatabase('roundtrips');
      const agent = new SimulatedAgent(url, databaseId, apiKey);
      const costs: ReportCost[] = [];
      class CountingClient extends AgentClient {
        override async report<T = unknown>(body: unknown, options?: { gzip?: boolean }) {
          const from = calls.length;
          const response = await super.report<T>(body, options);
          const answer = response.body as { command?: unknown };
          costs.push({ calls: calls.slice(from).filter((c) => c.label !== AUTHENTICATION), command: Boolean(answer.command) });
          return response;
        }
      }
      await agent.start();
      agent.client = new CountingClient(url, databaseId, apiKey);
      await agent.report();
      assert.deepEqual(
        costs.map((c) => c.calls.map((call) => call.label)),
        [['record_report']],
        'without a running session, the report is one statement',
      );
      const started = await startTuningSession(person, databaseId, { iterations: 2, windowSeconds: 2, warmupSeconds: 0, seed: 7 });
      costs.length = 0;
      await agent.runUntil('two trials handed over', () => Promise.resolve(agent.received.filter((c) => c.kind === 'apply').length >= 2), {
        timeoutMs: 60_000,
      });
      const { session } = await getTuningSession(person, databaseId, started.id);
      assert.notEqual(session.state, 'failed', session.message ?? '');

      const summary = JSON.stringify(costs.map((c) => c.calls.map((call) => `${call.kind}:${call.label}(${call.statements})`)));
      assert.ok(costs.length >= 4, summary);
      for (const cost of costs) assert.ok(cost.calls.length <= 2, `a report cost ${cost.calls.length} storage calls: ${summary}`);
      // The step ran on each report, and handed over the trials it queued in the same answer.
      assert.ok(
        costs.every((c) => c.calls.length === 2 && c.calls[1]!.kind === 'transaction'),
        summary,
      );
      assert.ok(costs.filter((c) => c.command).length >= 2, summary);
    });
  });
}

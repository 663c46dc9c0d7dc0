// Databases in each state the fleet page tells apart, made through the service's own storage
// (the agents' and tuning sessions' ports, and the engine's own steps for keeping and reverting),
// for test/fleet.test.ts and bench/fleet.ts.
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { gzipSync } from 'node:zlib';
import type { LeasePolicy } from '../../src/service/agents/store.ts';
import type { User } from '../../src/service/people/store.ts';
import type { SqlDriver } from '../../src/service/storage/driver.ts';
import { migrate } from '../../src/service/storage/migrations.ts';
import { openPgliteDriver } from '../../src/service/storage/pglite-driver.ts';
import { openPostgresDriver } from '../../src/service/storage/postgres-driver.ts';
import { createSqlStorage } from '../../src/service/storage/sql-storage.ts';
import type { Storage } from '../../src/service/storage/storage.ts';
import { applyBest } from '../../src/service/tuning/engine/applying-best.ts';
import { endTuningSession } from '../../src/service/tuning/engine/end.ts';
import { personTurn } from '../../src/service/tuning/engine/turn.ts';
import type { SessionBest, SessionVerification, TuningSessionRecord } from '../../src/service/tuning/store.ts';
import { SAMPLE_SETTINGS, reportRequest, startRequest } from './service-reports.ts';
import { createScratchDatabase, type StorageKind } from './service.ts';

export const POLICY: LeasePolicy = { defaultIntervalSeconds: 10, intervalsPerLease: 3, minLeaseSeconds: 30 };
/** A lease that lapses at once: the agent is `lost` as soon as its second is over. */
const SHORT_LEASE: LeasePolicy = { defaultIntervalSeconds: 1, intervalsPerLease: 1, minLeaseSeconds: 1 };
export const SHORT_LEASE_MS = 1000;

export interface OpenedStorage {
  driver: SqlDriver;
  storage: Storage;
  dispose: () => Promise<void>;
}

/** A fresh storage of the kind: PGlite in a temporary directory, or on PostgreSQL the empty
 * database `postgresUrl` (a benchmark's own cluster), else a scratch database of the shared
 * server, dropped by dispose. */
export async function openFreshStorage(kind: StorageKind, postgresUrl?: string): Promise<OpenedStorage> {
  if (kind === 'postgres') {
    const scratch = postgresUrl === undefined ? await createScratchDatabase('tuner_fleet') : null;
    const driver = await openPostgresDriver({ url: scratch?.url ?? postgresUrl!, poolSize: 2 });
    await migrate(driver);
    return { driver, storage: createSqlStorage(driver), dispose: async () => (await driver.close(), await scratch?.drop()) };
  }
  const dir = mkdtempSync(join(tmpdir(), 'tuner-fleet-'));
  const driver = await openPgliteDriver(dir);
  await migrate(driver);
  return {
    driver,
    storage: createSqlStorage(driver),
    dispose: async () => (await driver.close(), rmSync(dir, { recursive: true, force: true })),
  };
}

export const SCENARIOS = [
  'no_agent',
  'idle',
  'stopped',
  'lost',
  'blocked',
  'tuning',
  'awaiting_approval',
  'failed',
  'kept',
  'kept_then_reverted',
  'kept_revert_pending',
] as const;
export type Scenario = (typeof SCENARIOS)[number];

export const BLOCKED_REASON = 'the DB instance uses the default parameter group default.postgres15, which cannot be modified';
export const KEPT_CONFIG = { work_mem: 16384 };
/** The verified runtime ratio of the kept configuration: 20 % less runtime. */
export const KEPT_RUNTIME = { estimate: 0.8, low: 0.72, high: 0.89 };

const verification: SessionVerification = {
  candidate: { iteration: 3, config: KEPT_CONFIG, objective: 0.8 },
  rounds: 4,
  runtime: KEPT_RUNTIME,
  throughput: { estimate: 1.2, low: 1.1, high: 1.3 },
  decision: 'recommend',
  note: null,
};
const best: SessionBest = { iteration: 3, config: KEPT_CONFIG, objective: 0.8, measurements: 4 };

/** The agent's start: its lease id. */
export async function startAgent(storage: Storage, databaseId: string, policy = POLICY, applyBlockedReason: string | null = null) {
  const request = startRequest();
  request.system.applyBlockedReason = applyBlockedReason;
  const started = await storage.startAgent(databaseId, request, randomUUID(), policy);
  if (started.kind !== 'granted') throw new Error(`the lease was refused: ${started.kind}`);
  return started.leaseId;
}

/** Sends a report (with `seq`); returns the command it hands over, if any. */
async function report(storage: Storage, databaseId: string, leaseId: string, seq: number) {
  const body = reportRequest(leaseId, seq, { metrics: null });
  const result = await storage.recordReport(databaseId, body, gzipSync(JSON.stringify(body)), POLICY);
  if (result.kind !== 'accepted') throw new Error(`the report was refused: ${result.kind}`);
  return result.command;
}

/** A tuning session just created (baseline), as a person starts one. */
export async function createSession(storage: Storage, user: User, databaseId: string): Promise<TuningSessionRecord> {
  const created = await storage.createTuningSession(user.organizationId, {
    id: randomUUID(),
    databaseId,
    mode: 'reload-only',
    iterations: 5,
    windowSeconds: 60,
    windowMinSeconds: 60,
    verifyEarly: true,
    planAware: false,
    warmupSeconds: 10,
    abRoundsMin: 3,
    abRoundsMax: 8,
    minEffectPercent: 5,
    confidencePercent: 95,
    statementRegressions: 'approve',
    seed: 1,
    requireApproval: true,
    space: {
      target: 'local',
      mode: 'reload-only',
      machine: { memoryBytes: 8 * 1024 ** 3, vcpus: 2 },
      settings: SAMPLE_SETTINGS.map(({ name, setting, unit, context }) => ({ name, setting, unit, context })),
    },
    createdById: user.id,
  });
  if (created.kind !== 'created') throw new Error(`the session was refused: ${created.kind}`);
  return created.session;
}

/** A session that verified its best and had the agent apply it to keep, as the engine does it. */
async function keep(storage: Storage, user: User, databaseId: string, leaseId: string): Promise<TuningSessionRecord> {
  const session = await createSession(storage, user, databaseId);
  await storage.withTuningSession(databaseId, session.id, {}, async (tx, s) => {
    const turn = personTurn(tx, s, await tx.now());
    await tx.updateSession({ state: 'verifying', verification });
    await applyBest(turn, best, user.id);
  });
  const command = await report(storage, databaseId, leaseId, 1);
  if (command?.kind !== 'apply' || !command.keep) throw new Error('the agent was not handed the kept apply');
  await storage.recordAck(databaseId, command.id, {
    leaseId,
    status: 'applied',
    effective: { work_mem: '16MB' },
    errors: [],
    restarted: false,
    restored: false,
  });
  await storage.withTuningSession(databaseId, session.id, {}, (tx) =>
    tx.updateSession({ state: 'done', message: 'the verified configuration is applied and kept', ended: true }),
  );
  return session;
}

/** A person reverts the session to the baseline (revertTuningSession's step). */
async function revert(storage: Storage, user: User, databaseId: string, sessionId: string, leaseId: string | null) {
  await storage.withTuningSession(databaseId, sessionId, {}, async (tx, s) => {
    await endTuningSession(personTurn(tx, s, await tx.now()), 'reverted', `reverted by ${user.username}`, 'baseline', user.id);
  });
  if (leaseId === null) return;
  const command = await report(storage, databaseId, leaseId, 2);
  if (command?.kind !== 'revert') throw new Error('the agent was not handed the revert');
  await storage.recordAck(databaseId, command.id, {
    leaseId,
    status: 'applied',
    effective: {},
    errors: [],
    restarted: false,
    restored: false,
  });
}

/** A database named `name` in the scenario's state; its id. `lost` needs SHORT_LEASE_MS to pass. */
export async function addDatabase(storage: Storage, user: User, name: string, scenario: Scenario): Promise<string> {
  const { id } = await storage.createDatabase(user.organizationId, { id: randomUUID(), name, target: 'local' });
  if (scenario === 'no_agent') return id;
  if (scenario === 'lost') {
    await startAgent(storage, id, SHORT_LEASE);
    return id;
  }
  const leaseId = await startAgent(storage, id, POLICY, scenario === 'blocked' ? BLOCKED_REASON : null);
  await report(storage, id, leaseId, 0);
  switch (scenario) {
    case 'stopped':
      await storage.stopAgent(id, leaseId);
      break;
    case 'tuning':
      await createSession(storage, user, id);
      break;
    case 'awaiting_approval': {
      const session = await createSession(storage, user, id);
      await storage.withTuningSession(id, session.id, {}, (tx) =>
        tx.updateSession({ state: 'awaiting_approval', best, verification, message: 'approve it to apply and keep it' }),
      );
      break;
    }
    case 'failed': {
      const session = await createSession(storage, user, id);
      await storage.withTuningSession(id, session.id, {}, (tx) =>
        tx.updateSession({ state: 'failed', message: 'the agent did not acknowledge the best configuration', ended: true }),
      );
      break;
    }
    case 'kept':
      await keep(storage, user, id, leaseId);
      break;
    case 'kept_then_reverted':
      await revert(storage, user, id, (await keep(storage, user, id, leaseId)).id, leaseId);
      break;
    case 'kept_revert_pending':
      await revert(storage, user, id, (await keep(storage, user, id, leaseId)).id, null);
      break;
  }
  return id;
}

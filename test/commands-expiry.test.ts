// Commands that expire, on both storages, through the real service and a simulated agent: a trial
// the agent has not received within its session's window is cancelled, never delivered late, and
// the session records it as cancelled and moves on; revoking an API key cancels the apply
// commands not acknowledged yet (a trial issued before, sent again to the agent back with a new
// key, is what this stops), while a revert still goes out.
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import { KEY_REVOKED_REASON, TRIAL_EXPIRED_REASON } from '../src/service/databases/store.ts';
import { advanceTuningSession } from '../src/service/tuning/advance.ts';
import { ENGINE_LIMITS } from '../src/service/tuning/engine/turn.ts';
import { ReportResponseSchema } from '../src/protocol/v1.ts';
import type { PersonClient } from './helpers/service.ts';
import { AgentClient, STORAGE_KINDS, type TestService } from './helpers/service.ts';
import { startAdminService, type AdminService } from './helpers/service-admin.ts';
import { reportRequest } from './helpers/service-reports.ts';
import { SimulatedAgent, getTuningSession, isTrialJson, startTuningSession } from './sessions-agent.ts';

interface CommandView {
  id: string;
  state: string;
  command: { id: string; kind: string };
  sentCount: number;
  outcome: { status: string; errors: string[] } | null;
}

for (const kind of STORAGE_KINDS) {
  describe(`commands expire on ${kind} storage`, () => {
    let lab: AdminService;
    let service: TestService;
    let person: PersonClient;

    const commands = async (databaseId: string) =>
      (await person.get<{ commands: CommandView[] }>(`/api/manage/databases/${databaseId}/commands?limit=100`)).body.commands;

    before(async () => {
      lab = await startAdminService(kind);
      ({ service, admin: person } = lab);
    });
    after(() => lab?.close());

    /** A session whose second trial is queued while the agent is quiet (not received yet). */
    async function trialQueuedWhileQuiet(name: string) {
      const { databaseId, apiKey } = await person.createDatabase(name);
      const agent = new SimulatedAgent(service.url, databaseId, apiKey);
      await agent.start();
      await agent.report();
      // 2 s windows: a trial must reach the agent within max(2 s, 3 report intervals of 1 s) = 3 s.
      const started = await startTuningSession(person, databaseId, { iterations: 3, windowSeconds: 2, warmupSeconds: 0, seed: 7 });
      await agent.runUntil('the first trial measuring', async () => {
        const { iterations } = await getTuningSession(person, databaseId, started.id);
        return iterations.some((it) => isTrialJson(it) && it.window !== null);
      });
      // Reports inside the first trial's window, none past its end: then the agent goes quiet, and
      // the session closes the window without it (as the timer does once the grace has passed).
      // On a loaded machine a window may get too few calls and be contaminated: it is measured
      // again with the same command, so the cycle is repeated until the next trial is queued.
      const first = (await getTuningSession(person, databaseId, started.id)).iterations.find(isTrialJson)!;
      let waiting = (await getTuningSession(person, databaseId, started.id)).iterations.filter(isTrialJson);
      for (let attempt = 0; attempt < ENGINE_LIMITS.windowAttempts && waiting.at(-1)!.commandId === first.commandId; attempt++) {
        const end = Date.parse(waiting.at(-1)!.window!.end);
        while (Date.now() < end - 400) {
          await sleep(150);
          await agent.report();
        }
        await advanceTuningSession(service.storage, databaseId, { now: new Date(end + (ENGINE_LIMITS.minGraceSeconds + 1) * 1000) });
        waiting = (await getTuningSession(person, databaseId, started.id)).iterations.filter(isTrialJson);
      }
      const second = waiting.at(-1)!;
      assert.notEqual(second.commandId, first.commandId, `a second trial is queued: ${JSON.stringify(waiting.map((it) => it.state))}`);
      assert.equal(second.state, 'applying');
      assert.equal((await commands(databaseId)).find((c) => c.id === second.commandId)?.state, 'pending');
      const record = await service.storage.withTuningSession(databaseId, null, {}, (tx) => tx.command(second.commandId));
      assert.equal(record!.deliverBy!.getTime() - record!.createdAt.getTime(), 3_000, 'its deadline: max(window 2 s, 3 × 1 s)');
      return { databaseId, agent, started, second };
    }

    test('a trial the agent has not received within its window is cancelled, never delivered, and the session moves on', async () => {
      const { databaseId, agent, started, second } = await trialQueuedWhileQuiet('expiry');
      // The agent comes back after the deadline: the trial is not handed over.
      await sleep(3_500);
      await agent.report();
      assert.ok(!agent.received.some((c) => c.id === second.commandId), 'the expired trial never reached the agent');
      const cancelled = (await commands(databaseId)).find((c) => c.id === second.commandId)!;
      assert.equal(cancelled.state, 'failed');
      assert.equal(cancelled.sentCount, 0);
      assert.deepEqual(cancelled.outcome?.errors, [TRIAL_EXPIRED_REASON]);
      const { iterations } = await getTuningSession(person, databaseId, started.id);
      const recorded = iterations.find((it) => it.ordinal === second.ordinal)!;
      assert.equal(recorded.state, 'cancelled');
      assert.equal(recorded.failure, TRIAL_EXPIRED_REASON);
      // … and the session moved on: a new trial, received in time.
      const next = iterations.filter(isTrialJson).at(-1)!;
      assert.ok(next.ordinal > second.ordinal, 'a new trial after the cancelled one');
      assert.ok(
        agent.received.some((c) => c.id === next.commandId),
        'the new trial reached the agent',
      );
    });

    test('while the agent stays away, the session itself cancels a trial past its deadline', async () => {
      const { databaseId, agent, started, second } = await trialQueuedWhileQuiet('expiry-quiet');
      await sleep(3_500);
      // What the timer does: no report comes.
      await advanceTuningSession(service.storage, databaseId);
      const cancelled = (await commands(databaseId)).find((c) => c.id === second.commandId)!;
      assert.deepEqual([cancelled.state, cancelled.sentCount, cancelled.outcome?.errors], ['failed', 0, [TRIAL_EXPIRED_REASON]]);
      const { iterations } = await getTuningSession(person, databaseId, started.id);
      assert.equal(iterations.find((it) => it.ordinal === second.ordinal)?.state, 'cancelled');
      await agent.report();
      assert.ok(!agent.received.some((c) => c.id === second.commandId), 'the expired trial never reached the agent');
    });

    test('a trial issued before a key is revoked is never delivered to the agent back with a new key', async () => {
      const { databaseId, apiKey, apiKeyId } = await person.createDatabase('revoked');
      const agent = new SimulatedAgent(service.url, databaseId, apiKey);
      // The agent receives the first trial but cannot acknowledge it (its key is revoked meanwhile).
      agent.plan = () => ({ status: 'ignore' });
      await agent.start();
      await agent.report();
      const started = await startTuningSession(person, databaseId, { iterations: 3, windowSeconds: 2, warmupSeconds: 0, seed: 8 });
      await agent.runUntil('the first trial received', () => Promise.resolve(agent.received.some((c) => c.kind === 'apply')));
      const trial = agent.received.find((c) => c.kind === 'apply')!;

      const fresh = await person.post<{ apiKey: string }>(`/api/manage/databases/${databaseId}/keys`, { label: 'second' });
      assert.equal(fresh.status, 201);
      assert.equal((await person.post(`/api/manage/databases/${databaseId}/keys/${apiKeyId}/revoke`)).status, 204);
      assert.equal((await agent.client.report(reportRequest(agent.leaseId, agent.seq))).status, 401, 'the old key is refused');

      // Back with the new key, on its lease: the trial is not sent again.
      agent.client = new AgentClient(service.url, databaseId, fresh.body.apiKey);
      const answer = ReportResponseSchema.parse(await agent.report());
      assert.notEqual(answer.command?.id, trial.id, 'the trial issued before the revocation is not delivered');
      const record = (await commands(databaseId)).find((c) => c.id === trial.id)!;
      assert.equal(record.state, 'failed');
      assert.deepEqual(record.outcome?.errors, [KEY_REVOKED_REASON]);
      await agent.report();
      assert.notEqual(agent.last?.command?.id, trial.id);
      const { iterations } = await getTuningSession(person, databaseId, started.id);
      const it = iterations.find((i) => i.commandId === trial.id)!;
      assert.equal(it.state, 'cancelled', 'recorded as cancelled, not as a failure of the configuration');
      assert.equal(it.failure, KEY_REVOKED_REASON);
    });

    test('revoking a key cancels the apply commands not acknowledged; a revert still goes out', async () => {
      const { databaseId, apiKey, apiKeyId } = await person.createDatabase('revert-stays');
      const agent = new SimulatedAgent(service.url, databaseId, apiKey);
      await agent.start();
      await agent.report();
      const issue = async (body: unknown) => {
        const response = await person.post<{ command: { id: string } }>(`/api/manage/databases/${databaseId}/commands`, body);
        assert.equal(response.status, 201, JSON.stringify(response.body));
        return response.body.command.id;
      };
      const apply = await issue({ kind: 'apply', values: { work_mem: '8MB' } });
      const revert = await issue({ kind: 'revert', to: 'known-good' });
      const fresh = await person.post<{ apiKey: string }>(`/api/manage/databases/${databaseId}/keys`, { label: 'second' });
      assert.equal((await person.post(`/api/manage/databases/${databaseId}/keys/${apiKeyId}/revoke`)).status, 204);
      // Revoking it again changes nothing more.
      assert.equal((await person.post(`/api/manage/databases/${databaseId}/keys/${apiKeyId}/revoke`)).status, 204);

      agent.client = new AgentClient(service.url, databaseId, fresh.body.apiKey);
      await agent.report();
      assert.deepEqual(
        agent.received.map((c) => c.id),
        [revert],
        'only the revert reached the agent',
      );
      const states = new Map((await commands(databaseId)).map((c) => [c.id, c.state]));
      assert.equal(states.get(apply), 'failed');
      assert.equal(states.get(revert), 'applied');
    });
  });
}

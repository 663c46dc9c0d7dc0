// The service's storage fails over (src/service/storage/postgres-driver.ts, postgres-hosts.ts): a
// real Patroni cluster (src/lab/patroni.ts) is the storage, named by a multi-host URL with
// target_session_attrs=read-write (the standby first, to be passed over), and a switchover happens
// while simulated agents report steadily and one database's tuning session runs. An agent does
// what the real one does: one report at a time, and a report that fails (5xx, no answer) is sent
// again with the same seq. No report is lost, none stored twice, the session goes on after the
// switch (its commands delivered and acknowledged through it), and /healthz says degraded (503,
// status "degraded") during the switch, ok again after.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import pg from 'pg';
import { startPatroniLab, type PatroniLab } from '../src/lab/patroni.ts';
import { routes } from '../src/protocol/v1.ts';
import { ADMIN_PASSWORD, PersonClient, startTestService, type TestService } from './helpers/service.ts';
import { reportRequest, sampleMetrics, startRequest } from './helpers/service-reports.ts';
import { timeoutFor, until } from './helpers/until.ts';
import { SimulatedAgent as TuningAgent, getTuningSession, startTuningSession } from './sessions-agent.ts';

/** 100 agents, as a fleet's share of one replica would be; each reports every REPORT_EVERY_MS
 * (the real interval is 60 s: this is 100 agents' steady traffic compressed, ~50 reports/s). */
const AGENTS = 100;
const REPORT_EVERY_MS = 2000;
/** The agent's pause before it sends a failed report again (the real one backs off longer). */
const RETRY_AFTER_MS = 250;

interface SimulatedAgent {
  databaseId: string;
  apiKey: string;
  leaseId: string;
  /** The seq of the next report. */
  seq: number;
  /** The seqs the service acknowledged, in order. */
  acknowledged: number[];
  /** Reports sent again after a failure, and what the failures were. */
  retries: number;
  failures: Set<string>;
}

let lab: PatroniLab;
let service: TestService | undefined;
let dataDir: string;

before(async () => {
  lab = await startPatroniLab();
  const leader = await lab.leader();
  await leader.sql('CREATE DATABASE tuner_storage');
  dataDir = mkdtempSync(join(tmpdir(), 'tuner-storage-failover-'));
});
after(async () => {
  await service?.close();
  await lab?.stop();
  rmSync(dataDir, { recursive: true, force: true });
});

async function send(url: string, agent: SimulatedAgent): Promise<string> {
  try {
    const response = await fetch(`${url}${routes.report(agent.databaseId)}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${agent.apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify(reportRequest(agent.leaseId, agent.seq, { metrics: sampleMetrics({ topStatements: 5 }) })),
      signal: AbortSignal.timeout(30_000),
    });
    await response.arrayBuffer();
    return String(response.status);
  } catch (err) {
    return (err as Error).name;
  }
}

/** Reports until told to stop: the next seq after an acknowledgement, the same seq after a failure. */
async function runAgent(url: string, agent: SimulatedAgent, stopped: () => boolean): Promise<void> {
  while (!stopped()) {
    const outcome = await send(url, agent);
    if (outcome === '200') {
      agent.acknowledged.push(agent.seq++);
      await sleep(REPORT_EVERY_MS);
    } else {
      agent.retries++;
      agent.failures.add(outcome);
      await sleep(RETRY_AFTER_MS);
    }
  }
}

test(
  'a storage switchover during steady reports from 100 agents and a tuning session: none lost, none stored twice, the session goes on, /healthz degraded meanwhile',
  { timeout: timeoutFor([120_000, 60_000, 120_000, 120_000, 60_000]) },
  async () => {
    const leader = await lab.leader();
    const standby = lab.members.find((m) => m.name !== leader.name)!;
    const storageUrl =
      `postgresql://postgres@127.0.0.1:${standby.pgPort},127.0.0.1:${leader.pgPort}/tuner_storage` + '?target_session_attrs=read-write';
    service = await startTestService({ kind: 'postgres', dataDir, databaseUrl: storageUrl, dispose: () => Promise.resolve() });
    const url = service.url;
    const admin = await PersonClient.login(url, 'admin', ADMIN_PASSWORD);

    const agents: SimulatedAgent[] = [];
    for (let i = 0; i < AGENTS; i++) {
      const { databaseId, apiKey } = await admin.createDatabase(`failover ${i}`);
      const start = await fetch(`${url}${routes.agentStart(databaseId)}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify(startRequest({ hostname: `failover-host-${i}`, pid: 2000 + i })),
      });
      assert.equal(start.status, 200, await start.clone().text());
      const { leaseId } = (await start.json()) as { leaseId: string };
      agents.push({ databaseId, apiKey, leaseId, seq: 1, acknowledged: [], retries: 0, failures: new Set() });
    }

    // One more database, whose agent runs a tuning session through the switch: it reports every
    // 200 ms and carries out the session's commands, sending again what fails.
    const tuned = await admin.createDatabase('failover session');
    const tuning = new TuningAgent(url, tuned.databaseId, tuned.apiKey);
    tuning.retryFailures = true;
    await tuning.start();
    await tuning.report();
    const session = await startTuningSession(admin, tuned.databaseId, { iterations: 8, windowSeconds: 2, warmupSeconds: 0, seed: 45 });
    const windows = async () => (await getTuningSession(admin, tuned.databaseId, session.id)).iterations.length;

    let stop = false;
    const running = agents.map((agent) => runAgent(url, agent, () => stop));
    const tuningRun = (async () => {
      while (!stop) {
        await tuning.report();
        await sleep(200);
      }
    })();
    running.push(tuningRun);
    try {
      await until('every agent to be reporting', () => Promise.resolve(agents.every((a) => a.acknowledged.length >= 2)), 120_000, 100);
      await until('the tuning session to measure two windows', async () => (await windows()) >= 2, 120_000, 200);

      // /healthz, every 100 ms, from before the switchover to after it.
      const health: Array<{ status: number; body: { status?: string } }> = [];
      let watching = true;
      const watcher = (async () => {
        while (watching) {
          const response = await fetch(`${url}/healthz`).catch(() => null);
          health.push({ status: response?.status ?? 0, body: response ? ((await response.json()) as { status?: string }) : {} });
          await sleep(100);
        }
      })();

      const switched = await lab.api(leader, 'POST', '/switchover', { leader: leader.name, candidate: standby.name });
      assert.equal(switched.status, 200, JSON.stringify(switched.body));
      await until('the standby to lead', async () => (await lab.leader()).name === standby.name, 60_000);
      // Every agent gets three more reports through after the switch: the service found the new leader.
      const before = agents.map((a) => a.acknowledged.length);
      await until(
        'every agent to report three times on the new leader',
        () => Promise.resolve(agents.every((a, i) => a.acknowledged.length >= before[i]! + 3)),
        120_000,
        100,
      );
      await until('/healthz to say ok', () => Promise.resolve(health.at(-1)?.status === 200), 120_000, 100);
      watching = false;
      await watcher;
      // The session goes on: two more windows measured on the new leader, and it has not failed.
      const windowsAfter = await windows();
      await until('the tuning session to measure two more windows', async () => (await windows()) >= windowsAfter + 2, 120_000, 200);
      const { session: went } = await getTuningSession(admin, tuned.databaseId, session.id);
      assert.notEqual(went.state, 'failed', `the session after the switch: ${went.state} ${went.message ?? ''}`);

      const degraded = health.filter((h) => h.status === 503);
      assert.ok(degraded.length > 0, `/healthz never said degraded: ${JSON.stringify(health.map((h) => h.status))}`);
      for (const h of degraded) assert.equal(h.body.status, 'degraded');
      assert.ok(
        health.every((h) => h.status === 200 || h.status === 503),
        `/healthz always answered: ${JSON.stringify(health.map((h) => h.status))}`,
      );
      const retried = agents.reduce((n, a) => n + a.retries, 0);
      assert.ok(retried > 0, 'the switchover failed some reports in flight, which the agents sent again');
      console.log(
        `switchover: ${retried} reports sent again (${[...new Set(agents.flatMap((a) => [...a.failures]))].join(', ')}), ` +
          `/healthz degraded for ${degraded.length} of ${health.length} polls; the session's agent sent ` +
          `${tuning.failuresRetried} requests again; the session ${went.state} with ${await windows()} windows`,
      );
    } finally {
      stop = true;
      await Promise.all(running);
    }

    // What the storage holds, read on the new leader: every acknowledged report, each once.
    const client = new pg.Client({ connectionString: `postgresql://postgres@127.0.0.1:${standby.pgPort}/tuner_storage` });
    await client.connect();
    try {
      const { rows } = await client.query<{ lease_id: string; seq: string }>('SELECT lease_id, seq FROM reports ORDER BY lease_id, seq');
      const stored = new Map<string, number[]>();
      for (const row of rows) stored.set(row.lease_id, [...(stored.get(row.lease_id) ?? []), Number(row.seq)]);
      for (const agent of agents) {
        const seqs = stored.get(agent.leaseId) ?? [];
        // A report whose answer was lost may be stored and then acknowledged on its retry: stored
        // once either way. One the agent was still retrying when the test stopped may be stored
        // without its acknowledgement: only that last one.
        const acknowledged = agent.acknowledged;
        assert.deepEqual(seqs.slice(0, acknowledged.length), acknowledged, `lease ${agent.leaseId}: every acknowledged report, once`);
        assert.ok(seqs.length - acknowledged.length <= 1, `lease ${agent.leaseId}: stored ${JSON.stringify(seqs)}`);
        assert.equal(new Set(seqs).size, seqs.length, `lease ${agent.leaseId}: no report stored twice`);
      }
      // The session's agent waits for each answer: every report it sent is stored, once.
      assert.deepEqual(
        stored.get(tuning.leaseId),
        Array.from({ length: tuning.seq }, (_, i) => i),
        "the session's agent: every report, once",
      );
    } finally {
      await client.end();
    }
  },
);

// Faults on the service's side, with the real agent process, the real service (PostgreSQL
// storage, so that the test can read every report it kept) and a throwaway cluster: the API key
// revoked and the database id deleted while a trial is applied, the service down for several
// report intervals with a trial applied, and an oversized answer. Every case ends with the
// database on its known-good configuration, and nothing of an outage lost.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { after, before, beforeEach, test } from 'node:test';
import pg from 'pg';
import { freePort } from '../src/lab/cluster.ts';
import { readReportBody } from '../src/service/agents/report-body.ts';
import type { AgentProcess } from './helpers/agent-process.ts';
import {
  KNOWN_GOOD,
  differencesFromKnownGood,
  liveSetting,
  startFaultLab,
  untilKnownGood,
  type FaultLab,
  type LabDatabase,
} from './helpers/faults.ts';
import { until } from './helpers/until.ts';
import { WRECKING_TRIAL, createWreckableTable, startRangeWorkload, untilRevertedWithin } from './helpers/wrecking-trial.ts';

const TRIAL = { kind: 'apply', values: { random_page_cost: 1.7 }, keep: false } as const;

let lab: FaultLab;
let storage: pg.Client;
const agents: AgentProcess[] = [];
const closers: Array<() => Promise<void>> = [];

before(async () => {
  lab = await startFaultLab('postgres');
  storage = new pg.Client({ connectionString: lab.store.databaseUrl });
  await storage.connect();
});

beforeEach(async () => {
  await lab.beginCase();
});

after(async () => {
  for (const a of agents) a.child.kill('SIGKILL');
  for (const close of closers) await close().catch(() => undefined);
  await storage?.end();
  await lab?.dispose();
});

async function runningAgent(db: LabDatabase): Promise<AgentProcess> {
  const agent = db.startAgent();
  agents.push(agent);
  await db.reportAfter(0);
  return agent;
}

async function applyTrial(db: LabDatabase): Promise<void> {
  const applied = await db.outcome(await db.issue(TRIAL));
  assert.equal(applied.state, 'applied', JSON.stringify(applied.outcome));
  assert.equal(await liveSetting(lab.cluster, 'random_page_cost'), '1.7');
}

/** The metrics intervals of every report the service kept for a database, oldest first. */
async function keptIntervals(databaseId: string): Promise<Array<{ start: number; end: number }>> {
  const rows = await storage.query<{ body: Buffer }>('SELECT body FROM reports WHERE database_id = $1 ORDER BY id', [databaseId]);
  return rows.rows
    .map((r) => readReportBody(r.body).metrics?.interval)
    .filter((i) => i !== undefined)
    .map((i) => ({ start: Date.parse(i.start), end: Date.parse(i.end) }))
    .sort((a, b) => a.start - b.start);
}

test('the API key revoked while a trial is applied: the agent returns to known-good, then exits 5', { timeout: 120_000 }, async () => {
  const db = await lab.database('revoked');
  const agent = await runningAgent(db);
  await applyTrial(db);
  const revoked = await lab.person.post(`/api/manage/databases/${db.databaseId}/keys/${db.apiKeyId}/revoke`);
  assert.equal(revoked.status, 204);
  const code = await agent.exited;
  assert.equal(code, 5, agent.output());
  assert.match(agent.output(), /rejected the API key/);
  await untilKnownGood(lab.cluster, 5_000);
  assert.ok(!agent.output().includes(db.apiKey), 'the API key never appears in what the agent printed');
});

test('the database id deleted while a trial is applied: the agent returns to known-good, then exits 5', { timeout: 120_000 }, async () => {
  const db = await lab.database('deleted');
  const agent = await runningAgent(db);
  await applyTrial(db);
  await storage.query('DELETE FROM databases WHERE id = $1', [db.databaseId]);
  const code = await agent.exited;
  assert.equal(code, 5, agent.output());
  await untilKnownGood(lab.cluster, 5_000);
});

test(
  'the service down for several report intervals with a trial applied: the guard still watches, and every report of the outage arrives after',
  { timeout: 300_000 },
  async () => {
    await lab.cluster.sql('DROP TABLE IF EXISTS g');
    await createWreckableTable(lab.cluster);
    const workload = await startRangeWorkload(lab.cluster);
    try {
      const db = await lab.database('outage');
      const agent = await runningAgent(db);
      await until('three reports with the workload in them', async () => (await keptIntervals(db.databaseId)).length >= 3);

      const applied = await db.outcome(await db.issue({ kind: 'apply', values: WRECKING_TRIAL, keep: false }));
      assert.equal(applied.state, 'applied', JSON.stringify(applied.outcome));
      await lab.stopService();
      const outageStart = Date.now();
      // Only the agent is left to notice that queries got slow (it judges windows of 20 calls).
      await untilRevertedWithin(workload, 100, async () => (await differencesFromKnownGood(lab.cluster)).length === 0);
      // A few more intervals of outage, with nothing left to watch.
      await until('five report intervals of outage', () => Promise.resolve(Date.now() - outageStart > 5_000));
      const outageEnd = Date.now();
      await lab.startService();

      const breach = await until(
        'the guardrail event to reach the service',
        async () => (await db.events()).find((e) => e.code === 'guardrail_breach'),
        60_000,
      );
      assert.match(breach.message, /returned to known-good: applied/);
      // Every interval of the outage was collected on schedule, and delivered in order after it.
      const kept = await until(
        'the reports of the outage to arrive',
        async () => {
          const intervals = await keptIntervals(db.databaseId);
          return intervals.filter((i) => i.end > outageStart && i.end < outageEnd).length >= 4 ? intervals : null;
        },
        60_000,
      );
      const dropped = (await db.events()).filter((e) => e.code === 'reports_dropped');
      for (let i = 1; i < kept.length; i++) {
        const gap = kept[i]!.start - kept[i - 1]!.end;
        assert.ok(
          gap === 0 || dropped.length > 0,
          `reports are missing between ${new Date(kept[i - 1]!.end).toISOString()} and ${new Date(kept[i]!.start).toISOString()}, and no reports_dropped event counts them`,
        );
      }
      agent.child.kill('SIGTERM');
      assert.equal(await agent.exited, 0, agent.output());
    } finally {
      await workload.stop();
    }
    await untilKnownGood(lab.cluster, 5_000);
  },
);

/** A proxy in front of the service that can answer the next report with an endless body. */
async function startProxy(
  target: string,
): Promise<{ url: string; oversizeNextReport: () => void; oversizedSent: () => number; close: () => Promise<void> }> {
  let armed = false;
  let sent = 0;
  const oversize = (res: ServerResponse) => {
    armed = false;
    res.writeHead(200, { 'content-type': 'application/json' });
    const chunk = Buffer.alloc(1024 * 1024, 0x20);
    const limit = 256;
    const pump = () => {
      while (sent < limit && !res.destroyed) {
        sent++;
        if (!res.write(chunk)) return void res.once('drain', pump);
      }
      res.end();
    };
    res.on('error', () => undefined);
    pump();
  };
  const forward = async (req: IncomingMessage, res: ServerResponse) => {
    const body: Buffer[] = [];
    for await (const part of req) body.push(part as Buffer);
    if (armed && req.url?.endsWith('/reports')) return oversize(res);
    const headers = Object.fromEntries(
      ['authorization', 'content-type', 'content-encoding', 'user-agent']
        .filter((h) => req.headers[h])
        .map((h) => [h, String(req.headers[h])]),
    );
    try {
      const answer = await fetch(`${target}${req.url}`, {
        method: req.method!,
        headers,
        ...(body.length > 0 && { body: Buffer.concat(body) }),
      });
      res.writeHead(answer.status, { 'content-type': answer.headers.get('content-type') ?? 'application/json' });
      res.end(Buffer.from(await answer.arrayBuffer()));
    } catch {
      res.writeHead(502).end();
    }
  };
  const port = await freePort();
  const server: Server = createServer((req, res) => void forward(req, res));
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${port}`,
    oversizeNextReport: () => {
      armed = true;
    },
    oversizedSent: () => sent,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/** The most memory the process ever held (VmHWM), in bytes. */
function peakRss(pid: number): number {
  const kb = /^VmHWM:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
  return Number(kb) * 1024;
}

test('an oversized answer from the service is refused after a bounded read, and the agent goes on', { timeout: 120_000 }, async () => {
  const proxy = await startProxy(`http://${lab.listen}`);
  closers.push(proxy.close);
  const db = await lab.database('oversized', { serverUrl: proxy.url });
  const agent = await runningAgent(db);
  const before = peakRss(agent.pid);
  proxy.oversizeNextReport();
  await until('the oversized answer to be sent', () => Promise.resolve(proxy.oversizedSent() > 0));
  const refusedAt = Date.now();
  await db.reportAfter(refusedAt, 60_000);
  const grown = peakRss(agent.pid) - before;
  assert.ok(
    grown < 64 * 1024 * 1024,
    `the agent's peak memory grew by ${Math.round(grown / 2 ** 20)} MB reading an answer of ${proxy.oversizedSent()} MB`,
  );
  assert.match(agent.output(), /answered .* larger than/);
  agent.child.kill('SIGTERM');
  assert.equal(await agent.exited, 0, agent.output());
  assert.deepEqual(await Promise.all(Object.keys(KNOWN_GOOD).map((n) => liveSetting(lab.cluster, n))), Object.values(KNOWN_GOOD));
});

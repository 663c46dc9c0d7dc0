// Load on the tuning service: simulated agents on loopback send realistic reports (100 top
// statements with query texts, gzip, as the real agent sends them) to a tuner-service running as
// its own process, first on PostgreSQL storage (a database of its own on the shared server,
// dropped after), then on PGlite for comparison. Bounded in agents and time; stops by itself.
//
// Two phases per storage (in this order):
//   at 500/s:  open loop at the goal rate spread over the agents (each agent one report at a
//              time, its latency counted from when it was due): latency at that rate;
//   saturated: closed loop, each agent sending its next report as soon as the last is answered:
//              the most the service takes (its latency is queueing: 50 in flight).
// Goal on this 2-core machine: ≥ 500 reports/s with p99 ≤ 100 ms; with BENCH_REPLICAS=2, 2,000
// (issue 45; docs/operations.md says what it takes). Printed as ratios (≥ 1 meets it),
// with the CPU each report costs the service, PostgreSQL and this load generator: the machine is
// shared by all three (and by whatever else runs), so the CPU figures tell the capacity too.
//
// Every report is a new one: its seq follows the agent's last and its sentAt is the time it is
// sent, so the service stores each (a repeated seq would be answered 200 without being stored, a
// lower one 409). A request that fails is counted and printed; a phase with failures prints no
// throughput figure (it would count work the service refused) and the bench exits 1.
//
// BENCH_REPLICAS=N (PostgreSQL storage only): N service processes on the one storage, behind a
// round-robin TCP balancer in this process (loopback, per connection, as an L4 load balancer
// does); the figures are the replicas' combined ones, and the CPU is summed over them.
//
//   npm run bench:service    BENCH_AGENTS=50 BENCH_SECONDS=20 BENCH_STORAGE=postgres|pglite
//                            BENCH_REPLICAS=1|2|…  BENCH_RATE=500 (the open loop's rate)
//                            BENCH_PROFILE_DIR=dir: a CPU profile of each service process
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { availableParallelism, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { crc32, gzipSync } from 'node:zlib';
import pg from 'pg';
import { routes } from '../src/protocol/v1.ts';
import { backendsOf, cpuSeconds } from './proc-cpu.ts';
import { ADMIN_PASSWORD, PersonClient, createServiceStore, type ServiceStore, type StorageKind } from '../test/helpers/service.ts';
import { SAMPLE_SETTINGS, sampleMetrics, sampleTargetMetrics, startRequest } from '../test/helpers/service-reports.ts';

const AGENTS = Number(process.env['BENCH_AGENTS'] ?? 50);
const SECONDS = Number(process.env['BENCH_SECONDS'] ?? 20);
const REPLICAS = Number(process.env['BENCH_REPLICAS'] ?? 1);
const GOAL_RATE = Number(process.env['BENCH_RATE'] ?? (REPLICAS > 1 ? 2000 : 500));
const GOAL_P99_MS = 100;
const BACKLOG_GRACE_MS = 5000;
const SERVICE_BIN = join(import.meta.dirname, '..', 'bin', 'tuner-service.js');

interface SimulatedAgent {
  databaseId: string;
  apiKey: string;
  leaseId: string;
  /** The report after `"leaseId":…,"seq":…,"sentAt":…,`: the same for every report of the agent,
   * compressed once (compressing each report would spend the CPU this bench shares with the
   * service on 2 cores). */
  tail: Buffer;
  /** The last seq sent: every report takes the next. */
  seq: number;
}

interface PhaseResult {
  seconds: number;
  ok: number;
  failed: number;
  /** Failed requests by HTTP status ('error' for no answer). */
  failures: Map<string, number>;
  /** Open loop: reports due in the phase still unsent when it was over by BACKLOG_GRACE_MS (the
   * service fell behind the rate); dropped, so that the bench ends in bounded time. */
  unsent: number;
  latenciesMs: number[];
  /** CPU seconds spent by the service process, by its PostgreSQL backends, and by this load
   * generator in the phase: per report, they tell the capacity whatever else runs on the machine. */
  serviceCpu: number;
  postgresCpu: number;
  clientCpu: number;
}

interface CpuMeter {
  service: number;
  postgres: number;
}

function readCpu(servicePids: readonly number[], databaseName: string | undefined): CpuMeter {
  return {
    service: servicePids.reduce((sum, pid) => sum + cpuSeconds(pid), 0),
    postgres: backendsOf(databaseName).reduce((sum, pid) => sum + cpuSeconds(pid), 0),
  };
}

/** A gzip member that holds `text` uncompressed (a stored deflate block, at most 65,535 bytes):
 * the few bytes that differ between reports cost a CRC, not a compressor. */
function storedGzipMember(text: string): Buffer {
  const data = Buffer.from(text);
  if (data.length > 0xffff) throw new Error('storedGzipMember: at most 65535 bytes');
  const header = Buffer.from([0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255]);
  const block = Buffer.alloc(5);
  block[0] = 1; // the final block, stored
  block.writeUInt16LE(data.length, 1);
  block.writeUInt16LE(~data.length & 0xffff, 3);
  const trailer = Buffer.alloc(8);
  trailer.writeUInt32LE(crc32(data), 0);
  trailer.writeUInt32LE(data.length, 4);
  return Buffer.concat([header, block, data, trailer]);
}

/** The agent's next report: a new seq, sent now. Two gzip members, which a gzip reader (the
 * service's gunzip) reads as one stream: the head with what changes, the tail compressed once. */
function nextBody(agent: SimulatedAgent): Buffer {
  agent.seq++;
  const head = `{"leaseId":${JSON.stringify(agent.leaseId)},"seq":${agent.seq},"sentAt":"${new Date().toISOString()}",`;
  return Buffer.concat([storedGzipMember(head), agent.tail]);
}

const httpAgent = new Agent({ keepAlive: true, maxSockets: AGENTS * 2 });

function post(url: URL, path: string, apiKey: string, body: Buffer): Promise<number> {
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: url.hostname,
        port: url.port,
        path,
        method: 'POST',
        agent: httpAgent,
        headers: {
          authorization: `Bearer ${apiKey}`,
          'content-type': 'application/json',
          'content-encoding': 'gzip',
          'content-length': body.length,
        },
      },
      (res) => {
        res.resume();
        res.on('end', () => resolve(res.statusCode ?? 0));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

/** One service process; replicas after the first get a data directory of their own (unused on
 * PostgreSQL storage, but each process takes its own). */
async function startServiceProcess(store: ServiceStore, dataDir = store.dataDir): Promise<{ url: URL; child: ChildProcess }> {
  const child = spawn(process.execPath, [SERVICE_BIN, '--listen', '127.0.0.1:0', '--data-dir', dataDir], {
    env: {
      ...process.env,
      TUNER_ADMIN_PASSWORD: ADMIN_PASSWORD,
      TUNER_LOG_LEVEL: 'warn',
      TUNER_DATABASE_URL: store.databaseUrl ?? '',
      TUNER_DATABASE_POOL_SIZE: '16',
      ...(process.env['BENCH_PROFILE_DIR'] && { NODE_OPTIONS: `--cpu-prof --cpu-prof-dir=${process.env['BENCH_PROFILE_DIR']}` }),
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const url = await new Promise<URL>((resolve, reject) => {
    let out = '';
    const timer = setTimeout(() => reject(new Error(`tuner-service did not start: ${out}`)), 60_000);
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      const match = /listening on (http:\/\/\S+)/.exec(out);
      if (match) {
        clearTimeout(timer);
        resolve(new URL(match[1]!));
      }
    });
    child.once('exit', (code) => reject(new Error(`tuner-service exited with ${code}: ${out}`)));
  });
  child.stdout.resume();
  return { url, child };
}

async function prepareAgents(url: URL): Promise<SimulatedAgent[]> {
  const admin = await PersonClient.login(url.origin, 'admin', ADMIN_PASSWORD);
  const agents: SimulatedAgent[] = [];
  for (let i = 0; i < AGENTS; i++) {
    const { databaseId, apiKey } = await admin.createDatabase(`bench ${i}`);
    const start = await fetch(`${url.origin}${routes.agentStart(databaseId)}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' },
      body: JSON.stringify(startRequest({ hostname: `bench-host-${i}`, pid: 1000 + i })),
    });
    if (start.status !== 200) throw new Error(`agent start: ${start.status} ${await start.text()}`);
    const { leaseId } = (await start.json()) as { leaseId: string };
    // One metrics section per agent, the same shape and size as a real report with 100 statements.
    const tail = JSON.stringify({
      metrics: sampleMetrics({ topStatements: 100, withText: true }),
      settings: SAMPLE_SETTINGS,
      targetMetrics: sampleTargetMetrics(),
      events: [],
    }).slice(1);
    agents.push({ databaseId, apiKey, leaseId, tail: gzipSync(tail), seq: -1 });
  }
  return agents;
}

/** One report; its latency counts from `started` (in the open loop, when it was due). */
async function sendOne(url: URL, agent: SimulatedAgent, result: PhaseResult, started = performance.now()): Promise<void> {
  const body = nextBody(agent);
  let failure: string;
  try {
    const status = await post(url, routes.report(agent.databaseId), agent.apiKey, body);
    if (status === 200) {
      result.ok++;
      result.latenciesMs.push(performance.now() - started);
      return;
    }
    failure = String(status);
  } catch (err) {
    failure = (err as NodeJS.ErrnoException).code ?? 'error';
  }
  result.failed++;
  result.failures.set(failure, (result.failures.get(failure) ?? 0) + 1);
}

function emptyResult(seconds: number): PhaseResult {
  return { seconds, ok: 0, failed: 0, failures: new Map(), unsent: 0, latenciesMs: [], serviceCpu: 0, postgresCpu: 0, clientCpu: 0 };
}

/** Open loop: each agent's reports fall due at its share of the goal rate, whatever the answers
 * take. An agent sends one report at a time, as the real one does (two in flight could arrive
 * out of order, and the later seq would be refused): a report due while the last is unanswered
 * waits for it, and its latency counts from when it was due, so a slow service is not excused by
 * sending less (no coordinated omission). */
async function steadyPhase(url: URL, agents: SimulatedAgent[], seconds: number): Promise<PhaseResult> {
  const result = emptyResult(seconds);
  const periodMs = (1000 * agents.length) / GOAL_RATE;
  const deadline = performance.now() + seconds * 1000;
  const chains: Promise<void>[] = [];
  await Promise.all(
    agents.map(async (agent, i) => {
      await sleep((i * periodMs) / agents.length);
      let chain = Promise.resolve();
      for (let due = performance.now(); due < deadline; due += periodMs) {
        const wait = due - performance.now();
        if (wait > 0) await sleep(wait);
        const dueAt = due;
        chain = chain.then(() =>
          performance.now() > deadline + BACKLOG_GRACE_MS ? void result.unsent++ : sendOne(url, agent, result, dueAt),
        );
      }
      chains.push(chain);
    }),
  );
  await Promise.all(chains);
  // Reports per second over the whole phase, including the wait for the last answers.
  result.seconds = (performance.now() - deadline) / 1000 + seconds;
  return result;
}

/** Closed loop: as fast as the service answers. */
async function maxPhase(url: URL, agents: SimulatedAgent[], seconds: number): Promise<PhaseResult> {
  const result = emptyResult(seconds);
  const deadline = performance.now() + seconds * 1000;
  await Promise.all(
    agents.map(async (agent) => {
      while (performance.now() < deadline) await sendOne(url, agent, result);
    }),
  );
  result.seconds = (performance.now() - deadline) / 1000 + seconds;
  return result;
}

function report(name: string, phase: string, r: PhaseResult): string {
  const label = `${name.padEnd(8)} ${phase.padEnd(9)}`;
  if (r.failed > 0) {
    // A rate counted over refused requests would measure the refusals: no figure, the failures.
    const byStatus = [...r.failures].map(([status, n]) => `${n}× ${status}`).join(', ');
    return `${label} FAILED: ${r.failed} of ${r.failed + r.ok} requests failed (${byStatus}); no throughput figure`;
  }
  const sorted = [...r.latenciesMs].sort((a, b) => a - b);
  const rate = r.ok / r.seconds;
  const p50 = percentile(sorted, 50);
  const p99 = percentile(sorted, 99);
  return (
    `${label} ${rate.toFixed(0).padStart(5)} reports/s (×${(rate / GOAL_RATE).toFixed(2)} of ${GOAL_RATE})` +
    `  p50 ${p50.toFixed(1).padStart(6)} ms  p99 ${p99.toFixed(1).padStart(6)} ms (×${(GOAL_P99_MS / p99).toFixed(2)} of ≤ ${GOAL_P99_MS} ms)` +
    `  CPU/report: service ${((1000 * r.serviceCpu) / r.ok).toFixed(2)} ms` +
    `${r.postgresCpu > 0 ? `, PostgreSQL ${((1000 * r.postgresCpu) / r.ok).toFixed(2)} ms` : ''}` +
    `, load generator ${((1000 * r.clientCpu) / r.ok).toFixed(2)} ms  0 failed` +
    `${r.unsent > 0 ? `; ${r.unsent} due reports never sent (the service fell behind the rate)` : ''}`
  );
}

/** A round-robin TCP balancer on loopback: each new connection goes to the next backend, as an L4
 * load balancer in front of replicas does (agents keep their connection alive, so the spread is
 * per connection). */
async function startBalancer(backends: readonly URL[]): Promise<{ url: URL; close: () => Promise<void> }> {
  let next = 0;
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const backend = backends[next++ % backends.length]!;
    const upstream = connect(Number(backend.port), backend.hostname);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.setNoDelay(true);
      socket.on('close', () => sockets.delete(socket));
    }
    client.pipe(upstream).pipe(client);
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  return {
    url: new URL(`http://127.0.0.1:${port}/`),
    close: () => {
      for (const socket of sockets) socket.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  child.kill('SIGTERM');
  await exited;
}

let anyFailed = false;

/** How many reports the PostgreSQL storage holds (null on PGlite, which the service holds open):
 * every acknowledged report must be a new, stored one. */
async function storedReports(store: ServiceStore): Promise<number | null> {
  if (!store.databaseUrl) return null;
  const client = new pg.Client({ connectionString: store.databaseUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ n: string }>('SELECT count(*) AS n FROM reports');
    return Number(rows[0]!.n);
  } finally {
    await client.end();
  }
}

async function benchmark(kind: StorageKind): Promise<string[]> {
  if (REPLICAS > 1 && kind !== 'postgres')
    throw new Error(`BENCH_REPLICAS=${REPLICAS} needs BENCH_STORAGE=postgres: PGlite serves one process`);
  const store = await createServiceStore(kind);
  const children: ChildProcess[] = [];
  const extraDirs: string[] = [];
  let balancer: { url: URL; close: () => Promise<void> } | undefined;
  try {
    const urls: URL[] = [];
    // One after the other: the first applies the migrations, the others find them applied.
    for (let i = 0; i < REPLICAS; i++) {
      const dataDir = i === 0 ? store.dataDir : mkdtempSync(join(tmpdir(), 'tuner-bench-replica-'));
      if (i > 0) extraDirs.push(dataDir);
      const started = await startServiceProcess(store, dataDir);
      children.push(started.child);
      urls.push(started.url);
    }
    balancer = REPLICAS > 1 ? await startBalancer(urls) : undefined;
    const url = balancer?.url ?? urls[0]!;
    const pids = children.map((child) => child.pid!);
    const agents = await prepareAgents(url);
    // A short warm-up: JIT, connection pool, first pages of the tables.
    const warmUp = await maxPhase(url, agents, 1);
    const databaseName = store.databaseUrl ? new URL(store.databaseUrl).pathname.slice(1) : undefined;
    const loads: number[] = [];
    const measured = async (phase: () => Promise<PhaseResult>): Promise<PhaseResult> => {
      const before = readCpu(pids, databaseName);
      const clientBefore = process.cpuUsage();
      const result = await phase();
      const client = process.cpuUsage(clientBefore);
      const after = readCpu(pids, databaseName);
      loads.push(loadavg()[0]!);
      if (result.failed > 0) anyFailed = true;
      return {
        ...result,
        serviceCpu: after.service - before.service,
        postgresCpu: after.postgres - before.postgres,
        clientCpu: (client.user + client.system) / 1e6,
      };
    };
    // The rate phase first: after the saturated one, the storage is busy for seconds with what the
    // burst left (autovacuum of thousands of new report rows) on the same 2 cores, and that
    // aftermath (stalls of 100–300 ms) would be measured as the latency at the goal rate.
    const steady = await measured(() => steadyPhase(url, agents, SECONDS / 2));
    const max = await measured(() => maxPhase(url, agents, SECONDS / 2));
    // What the machine could carry if the service and its storage had it to themselves: 2 cores
    // for a service and its PostgreSQL; PGlite runs on the service's one thread.
    const stored = await storedReports(store);
    const acknowledged = warmUp.ok + steady.ok + max.ok;
    if (stored !== null && stored !== acknowledged) anyFailed = true;
    const perReport = (max.serviceCpu + max.postgresCpu) / max.ok;
    const cores = kind === 'pglite' ? 1 : 2;
    const name = REPLICAS > 1 ? `${kind} ×${REPLICAS}` : kind;
    return [
      report(name, 'saturated', max),
      report(name, `at ${GOAL_RATE}/s`, steady),
      ...(max.failed > 0
        ? []
        : [
            `${name.padEnd(8)} capacity: ${(perReport * 1000).toFixed(2)} ms CPU per report (service + storage) on ${cores} core(s): ~${(cores / perReport).toFixed(0)} reports/s`,
          ]),
      stored === null
        ? `${name.padEnd(8)} reports acknowledged: ${acknowledged}`
        : `${name.padEnd(8)} reports acknowledged: ${acknowledged}, stored: ${stored}${stored === acknowledged ? ' (each one new)' : ' MISMATCH'}`,
      `${name.padEnd(8)} load average (1 min) after each phase: ${loads.map((l) => l.toFixed(1)).join(', ')} on ${cpus} cores (the machine is shared)`,
    ];
  } finally {
    await balancer?.close();
    await Promise.all(children.map(stopChild));
    for (const dir of extraDirs) rmSync(dir, { recursive: true, force: true });
    await store.dispose();
  }
}

const cpus = availableParallelism();
console.log(
  `tuner-service load: ${AGENTS} agents, ${SECONDS} s per storage, reports with 100 statements (gzip), ` +
    `${REPLICAS > 1 ? `${REPLICAS} service processes behind a round-robin balancer` : 'service in its own process'}`,
);
console.log(
  `goal: ≥ ${GOAL_RATE} reports/s at p99 ≤ ${GOAL_P99_MS} ms; ratios ≥ 1 meet it; load average before: ${loadavg()[0]!.toFixed(1)} on ${cpus} cores`,
);
for (const kind of process.env['BENCH_STORAGE'] ? [process.env['BENCH_STORAGE'] as StorageKind] : (['postgres', 'pglite'] as const)) {
  for (const line of await benchmark(kind)) console.log(line);
}
httpAgent.destroy();
if (anyFailed) process.exitCode = 1;

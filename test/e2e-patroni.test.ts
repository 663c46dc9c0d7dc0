// End to end on a real Patroni cluster (src/lab/patroni.ts: etcd, a leader and a streaming
// replica on loopback): the real `tuner-agent --patroni` and the real service (PGlite storage) run
// a tuning session. Statistics reach the agent through a TCP forwarder to whichever member
// Patroni's GET /primary names, as HAProxy on Patroni's check does in production, and so does a
// small workload. One lab for the file; the cases run in order on it:
//   --check, and --local refused on a member;
//   a session applies a trial through the dynamic configuration, read back on both members;
//   a switchover mid-trial: the trial reverted everywhere, its window contaminated, the session
//   goes on on the new leader;
//   the agent SIGKILLed mid-apply and started again: the dynamic configuration as it found it;
//   a replica that stops streaming mid-trial: a guardrail ends the trial (last: the lab is one
//   member short after it).
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, connect, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { freePort } from '../src/lab/cluster.ts';
import { startPatroniLab, type PatroniLab, type PatroniLabMember } from '../src/lab/patroni.ts';
import { runAgent, startAgent, type AgentProcess } from './helpers/agent-process.ts';
import {
  ADMIN_PASSWORD,
  PersonClient,
  createServiceStore,
  startTestService,
  type ServiceStore,
  type TestService,
} from './helpers/service.ts';
import { getTuningSession, isTrialJson, startTuningSession, type IterationJson } from './sessions-agent.ts';
import { timeoutFor, until } from './helpers/until.ts';

type Parameters = Record<string, unknown>;

/** A TCP forwarder to the member that answers 200 on GET /primary, chosen per connection. */
async function leaderForwarder(lab: PatroniLab): Promise<{ port: number; close: () => Promise<void> }> {
  const sockets = new Set<Socket>();
  const primaryPort = async (): Promise<number | null> => {
    for (const m of lab.members) {
      const res = await fetch(`${m.apiUrl}/primary`, { signal: AbortSignal.timeout(2000) }).catch(() => null);
      if (res?.status === 200) return m.pgPort;
    }
    return null;
  };
  const server: Server = createServer((client) => {
    sockets.add(client);
    client.on('close', () => sockets.delete(client));
    client.pause();
    void primaryPort().then((port) => {
      if (port === null) return client.destroy();
      const upstream = connect(port, '127.0.0.1');
      sockets.add(upstream);
      upstream.on('close', () => sockets.delete(upstream));
      client.pipe(upstream).pipe(client);
      client.on('error', () => upstream.destroy());
      upstream.on('error', () => client.destroy());
      client.resume();
    });
  });
  const port = await freePort();
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    port,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** Queries through the forwarder until stopped, reconnecting when a switchover cuts them off. */
function startWorkload(url: string): { stop: () => Promise<void> } {
  let stopped = false;
  const worker = async () => {
    while (!stopped) {
      const client = new pg.Client({ connectionString: url, application_name: 'e2e-patroni-load' });
      client.on('error', () => undefined);
      try {
        await client.connect();
        while (!stopped) await client.query('SELECT sum(i) FROM generate_series(1, 3000) AS i');
      } catch {
        await sleep(200);
      } finally {
        await client.end().catch(() => undefined);
      }
    }
  };
  const workers = [worker(), worker()];
  return {
    stop: async () => {
      stopped = true;
      await Promise.all(workers);
    },
  };
}

describe('--patroni end to end (real Patroni cluster, real tuner-agent, real service)', () => {
  let lab: PatroniLab;
  let forwarder: Awaited<ReturnType<typeof leaderForwarder>>;
  let workload: ReturnType<typeof startWorkload>;
  let store: ServiceStore;
  let service: TestService;
  let person: PersonClient;
  let databaseId: string;
  let dir: string;
  let agent: AgentProcess | undefined;
  /** postgresql.parameters of the dynamic configuration before the agent ran. */
  let found: Parameters;
  const began = Date.now();

  const parameters = async (): Promise<Parameters> => {
    const res = await lab.api(await lab.leader(), 'GET', '/config');
    return (res.body as { postgresql?: { parameters?: Parameters } }).postgresql?.parameters ?? {};
  };
  const settingOn = async (member: PatroniLabMember, name: string) =>
    (await member.sql<{ v: string }>('SELECT current_setting($1) AS v', [name]))[0]!.v;
  const changedNames = (now: Parameters) =>
    [...new Set([...Object.keys(now), ...Object.keys(found)])].filter((k) => JSON.stringify(now[k]) !== JSON.stringify(found[k]));
  const session = (id: string) => getTuningSession(person, databaseId, id);
  const startAgentProcess = () => {
    agent = startAgent(['--patroni'], { cwd: dir });
    return agent;
  };
  /** CI keeps only what the runner prints: on a failure, what the agent said and how the
   * cluster stood, beside the assertion. */
  let lastSession: string | undefined;
  /** A session of 3 trials, no approval, 3 A/B rounds; remembered for the failure report. */
  const startSession = async (seed: number, windowSeconds: number) => {
    const started = await startTuningSession(person, databaseId, {
      iterations: 3,
      windowSeconds,
      warmupSeconds: 1,
      seed,
      requireApproval: false,
      abRoundsMin: 3,
      abRoundsMax: 3,
    });
    lastSession = started.id;
    return started;
  };
  const explained = (body: () => Promise<void>) => async () => {
    try {
      await body();
    } catch (err) {
      const cluster = await lab.api(await lab.leader(), 'GET', '/cluster').catch((e: unknown) => ({ body: String(e) }));
      const sessions = await person.get(`/api/manage/databases/${databaseId}/tuning-sessions`).catch((e: unknown) => ({ body: String(e) }));
      const iterations = lastSession
        ? (await session(lastSession).catch(() => null))?.iterations.map(
            (it) => `#${it.ordinal} ${it.kind} ${it.state} ${it.failure ?? ''}`,
          )
        : [];
      console.log(
        [
          `the cluster: ${JSON.stringify(cluster.body)}`,
          `the sessions: ${JSON.stringify(sessions.body).slice(0, 3000)}`,
          `the last session's iterations:\n${(iterations ?? []).join('\n')}`,
          // The agent's lines are long (a trial names every knob): its last 40 lines, each cut.
          `the agent's last output:\n${(agent?.output() ?? '(none)')
            .split('\n')
            .slice(-40)
            .map((line) => line.slice(0, 400))
            .join('\n')}`,
        ].join('\n'),
      );
      throw err;
    }
  };
  /** Waits for a report with the workload in it, received after `since`. */
  const reporting = (since: number) =>
    until(
      'a report from the agent with the workload in it',
      async () => {
        const latest = (
          await person.get<{ report: { receivedAt: string; metrics: { derived: { calls: number } } | null } | null }>(
            `/api/manage/databases/${databaseId}/reports/latest`,
          )
        ).body.report;
        return latest?.metrics && Date.parse(latest.receivedAt) > since && latest.metrics.derived.calls > 0;
      },
      60_000,
      250,
    );
  const killAgent = async (signal: NodeJS.Signals) => {
    if (!agent) return;
    agent.child.kill(signal);
    await Promise.race([agent.exited, sleep(30_000)]);
  };

  before(async () => {
    lab = await startPatroniLab();
    forwarder = await leaderForwarder(lab);
    const viaForwarder = lab.members[0]!.agentUrl.replace(/:\d+\/postgres$/, `:${forwarder.port}/postgres`);
    workload = startWorkload(viaForwarder);
    found = await parameters();
    store = await createServiceStore('pglite');
    const port = await freePort();
    service = await startTestService(store, {}, `127.0.0.1:${port}`);
    person = await PersonClient.login(service.url, 'admin', ADMIN_PASSWORD);
    const created = await person.createDatabase('e2e-patroni', 'patroni');
    databaseId = created.databaseId;
    assert.equal((await person.post(`/api/manage/databases/${databaseId}/report-interval`, { reportIntervalSeconds: 1 })).status, 200);
    dir = mkdtempSync(join(tmpdir(), 'tuner-e2e-patroni-'));
    writeFileSync(
      join(dir, 'agent.yaml'),
      [
        'postgresql:',
        `  connection_url: ${viaForwarder}`,
        'patroni:',
        `  rest_api_urls: [${lab.members.map((m) => m.apiUrl).join(', ')}]`,
        `  username: ${lab.apiUser}`,
        `  password: ${lab.apiPassword}`,
        '  apply_timeout_seconds: 30',
        'tuner:',
        `  server_url: http://127.0.0.1:${port}`,
        `  api_key: ${created.apiKey}`,
        `  database_id: ${databaseId}`,
        '',
      ].join('\n'),
    );
    console.log(`setup: ${((Date.now() - began) / 1000).toFixed(1)} s`);
  });

  after(async () => {
    await killAgent('SIGTERM');
    await workload?.stop();
    await service?.close();
    await store?.dispose();
    await forwarder?.close();
    await lab?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
    console.log(`total: ${((Date.now() - began) / 1000).toFixed(1)} s`);
  });

  test('--patroni --check passes on the cluster; --local on a member refuses and names --patroni', async () => {
    const check = await runAgent(['--patroni', '--check'], { cwd: dir });
    assert.equal(check.code, 0, check.stdout + check.stderr);
    assert.match(check.stdout, /Patroni REST API/);

    const localDir = mkdtempSync(join(tmpdir(), 'tuner-e2e-patroni-local-'));
    try {
      writeFileSync(join(localDir, 'agent.yaml'), `postgresql:\n  connection_url: ${lab.members[0]!.agentUrl}\n`);
      const local = await runAgent(['--local', '--check'], { cwd: localDir });
      assert.notEqual(local.code, 0);
      assert.match(local.stdout + local.stderr, /member of a Patroni cluster.*patroni\.dynamic\.json.*Use --patroni/s);
    } finally {
      rmSync(localDir, { recursive: true, force: true });
    }
  });

  test(
    'a trial goes through the dynamic configuration onto both members; a switchover mid-trial reverts it everywhere, contaminates its window, and the session goes on',
    { timeout: timeoutFor([180_000, 120_000, 240_000, 60_000, 30_000], 60_000) },
    explained(async () => {
      const since = Date.now();
      startAgentProcess();
      await reporting(since);
      // Every member's settings before the session, to compare with once it is over.
      const initial = new Map<string, Map<string, string>>();
      for (const m of lab.members)
        initial.set(
          m.name,
          new Map((await m.sql<{ name: string; v: string }>('SELECT name, setting AS v FROM pg_settings')).map((r) => [r.name, r.v])),
        );
      const started = await startSession(20261126, 12);
      // A trial applied: in the dynamic configuration, and the same on both members.
      const trial = await until(
        'a trial applied and measuring',
        async () => (await session(started.id)).iterations.find((it) => isTrialJson(it) && it.state === 'measuring') ?? null,
        180_000,
        250,
      );
      const changed = changedNames(await parameters());
      assert.ok(changed.length > 0, `the trial changed the dynamic configuration (${JSON.stringify(trial.config)})`);
      for (const name of changed) {
        const [a, b] = [await settingOn(lab.members[0]!, name), await settingOn(lab.members[1]!, name)];
        assert.equal(a, b, `${name} is the same on both members`);
        // Only what the trial changes is in the dynamic configuration, not every knob of the
        // session's space at the value the members ran anyway.
        assert.notEqual(a, initial.get(lab.members[0]!.name)!.get(name), `${name} is in GET /config because the trial changed it`);
      }
      console.log(`trial #${trial.ordinal} changed ${changed.join(', ')} on both members`);

      // The switchover, while the trial is measured.
      const leader = await lab.leader();
      const candidate = lab.members.find((m) => m !== leader)!;
      const switched = await lab.api(leader, 'POST', '/switchover', { leader: leader.name, candidate: candidate.name });
      assert.equal(switched.status, 200, JSON.stringify(switched.body));
      const contaminated = await until(
        'the trial marked contaminated',
        async () => {
          const it = (await session(started.id)).iterations.find((i) => i.ordinal === trial.ordinal)!;
          return it.state === 'measuring' || it.state === 'applying' ? null : it;
        },
        120_000,
        500,
      );
      assert.equal(contaminated.state, 'contaminated', `${contaminated.failure ?? ''}\n${agent!.output().slice(-3000)}`);
      assert.match(contaminated.failure ?? '', /environment.*the leader changed from \S+ to \S+|environment.*no leader/);
      await lab.waitHealthy();
      assert.equal((await lab.leader()).name, candidate.name);

      // Reverted everywhere: the dynamic configuration as found (unless a later trial is already applied).
      const later = (its: IterationJson[]) => its.find((it) => it.ordinal > trial.ordinal && isTrialJson(it));
      if (!later((await session(started.id)).iterations)) {
        for (const name of changed) assert.equal(JSON.stringify((await parameters())[name]), JSON.stringify(found[name]), name);
      }

      // The session goes on: a later trial applied on both members (the old leader, just
      // restarted as a replica, too) and measured, on the new leader.
      const next = await until(
        'a later trial measured',
        async () =>
          (await session(started.id)).iterations.find((it) => it.ordinal > trial.ordinal && isTrialJson(it) && it.state === 'ok') ?? null,
        240_000,
        500,
      );
      const afterSwitch = (await session(started.id)).iterations.filter((it) => it.ordinal > trial.ordinal);
      for (const it of afterSwitch) console.log(`after the switchover: #${it.ordinal} ${it.kind} ${it.state} ${it.failure ?? ''}`);
      assert.ok(
        !afterSwitch.some((it) => /did not apply the change on every member/.test(it.failure ?? '')),
        'no trial after the switchover failed because a member missed the change',
      );
      assert.equal(next.state, 'ok');
      const stopped = await person.post(`/api/manage/databases/${databaseId}/tuning-sessions/${started.id}/stop`);
      assert.equal(stopped.status, 200, JSON.stringify(stopped.body));
      await until('the dynamic configuration as the agent found it', async () => changedNames(await parameters()).length === 0, 60_000);
      await until(
        'every member back on its settings',
        async () => {
          for (const m of lab.members) {
            const rows = await m.sql<{ name: string; v: string }>('SELECT name, setting AS v FROM pg_settings WHERE name = ANY($1)', [
              changed,
            ]);
            if (rows.some((r) => r.v !== initial.get(m.name)!.get(r.name))) return false;
          }
          return true;
        },
        30_000,
      );
    }),
  );

  test(
    'the agent SIGKILLed mid-apply and started again: the dynamic configuration as it found it',
    { timeout: 300_000 },
    explained(async () => {
      assert.ok(agent, 'the agent of the previous case runs');
      const started = await startSession(20261127, 12);
      // Killed as soon as the dynamic configuration moves, before (or right after) the read-back.
      const state = await until(
        'a trial written into the dynamic configuration',
        async () => {
          if (changedNames(await parameters()).length === 0) return null;
          const it = (await session(started.id)).iterations.find((i) => isTrialJson(i) && ['applying', 'measuring'].includes(i.state));
          return it?.state ?? 'written';
        },
        180_000,
        50,
      );
      await killAgent('SIGKILL');
      console.log(`SIGKILLed with the trial ${state}`);
      assert.ok(changedNames(await parameters()).length > 0, 'the dynamic configuration was changed when the agent died');
      const stopped = await person.post(`/api/manage/databases/${databaseId}/tuning-sessions/${started.id}/stop`);
      assert.equal(stopped.status, 200, JSON.stringify(stopped.body));

      const restarted = startAgentProcess();
      await until(
        'the dynamic configuration as the agent found it',
        async () => changedNames(await parameters()).length === 0,
        90_000,
        250,
      );
      await until('the restart recovered', () => Promise.resolve(/recover/i.test(restarted.output())), 30_000);
      // And so it ends once the agent has carried out every command: a trial it had received
      // but not acknowledged is handed to it again after the restart (the service cancels only
      // commands not yet sent) and the session's revert, which comes after it, undoes it.
      await until(
        'every command carried out',
        async () =>
          (
            await person.get<{ commands: Array<{ outcome: unknown }> }>(`/api/manage/databases/${databaseId}/commands?limit=100`)
          ).body.commands.every((c) => c.outcome !== null),
        90_000,
        500,
      );
      assert.deepEqual(changedNames(await parameters()), []);
    }),
  );

  test(
    'a replica that stops streaming during a trial: a guardrail ends it and the trial fails',
    { timeout: 300_000 },
    explained(async () => {
      const started = await startSession(20261128, 30);
      const trial = await until(
        'a trial applied and measuring',
        async () => (await session(started.id)).iterations.find((it) => isTrialJson(it) && it.state === 'measuring') ?? null,
        180_000,
        250,
      );
      const leader = await lab.leader();
      const replica = lab.members.find((m) => m !== leader)!;
      await replica.kill();
      const ended = await until(
        'the trial ended',
        async () => {
          const it = (await session(started.id)).iterations.find((i) => i.ordinal === trial.ordinal)!;
          return it.state === 'measuring' ? null : it;
        },
        60_000,
        500,
      );
      assert.equal(ended.state, 'failed', `${ended.failure ?? ''}\n${agent!.output().slice(-3000)}`);
      assert.match(ended.failure ?? '', new RegExp(`guardrail: .*replica ${replica.name} is not streaming from the leader`));
      await until('the dynamic configuration as the agent found it', async () => changedNames(await parameters()).length === 0, 60_000);
      const stopped = await person.post(`/api/manage/databases/${databaseId}/tuning-sessions/${started.id}/stop`);
      assert.equal(stopped.status, 200, JSON.stringify(stopped.body));
    }),
  );
});

// test-tier: slow
// The watch through the running service (PGlite and PostgreSQL storage), with a simulated agent and a webhook
// receiver on loopback (node:http): a session keeps work_mem's verified configuration; while the
// gain holds the watch says holding and nothing is sent; once the workload runs at the baseline's
// speed again the watch says gone, the dashboard's events and the fleet show it, and the webhook
// delivers one signed kept_gain_gone event, once, to the service-wide webhook and to the
// organization's own (signed with its own secret). Then the mix changes: workload_changed names
// the statements that appeared. The configuration is never reverted by the watch.
import assert from 'node:assert/strict';
import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, test } from 'node:test';
import { freePort } from '../src/lab/cluster.ts';
import { verifyWebhookSignature } from '../src/service/notify/webhook-signature.ts';
import {
  ADMIN_PASSWORD,
  PersonClient,
  STORAGE_KINDS,
  createServiceStore,
  startTestService,
  type ServiceStore,
  type TestService,
} from './helpers/service.ts';
import { scrape } from './helpers/prometheus.ts';
import { SimulatedAgent, getTuningSession, runtimeFactor, startTuningSession } from './sessions-agent.ts';

const SECRET = 'watch-webhook-secret-0123456789abcdef';
const ORGANIZATION_SECRET = 'watch-organization-webhook-secret-0123456789';
const METRICS_TOKEN = 'metrics-token-for-watch-tests-0123456789';

interface Delivery {
  /** /hook: the service-wide webhook's; /org-hook: the organization's. */
  path: string;
  headers: IncomingMessage['headers'];
  body: string;
}
const deliveries: Delivery[] = [];
const receiver = createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    deliveries.push({ path: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
    res.writeHead(200).end();
  });
});

let hook = '';
before(async () => {
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  hook = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
});
after(() => new Promise<void>((resolve) => receiver.close(() => resolve())));

interface FleetJson {
  databases: Array<{ id: string; states: string[]; watch: string | null; workloadChange: { since: string; distance: number } | null }>;
}
const parsed = (d: Delivery) => JSON.parse(d.body) as { id: string; kind: string; database: { id: string }; details: { message: string } };

for (const kind of STORAGE_KINDS) {
  describe(`the watch on ${kind} storage`, () => {
    let store: ServiceStore;
    let service: TestService;
    let person: PersonClient;

    before(async () => {
      store = await createServiceStore(kind);
      service = await startTestService(
        store,
        // The organization's webhook is on loopback too, which it may reach only when allowed.
        {
          TUNER_WEBHOOK_URL: hook,
          TUNER_WEBHOOK_SECRET: SECRET,
          TUNER_METRICS_TOKEN: METRICS_TOKEN,
          TUNER_WEBHOOK_ALLOW_NETWORKS: '127.0.0.1',
        },
        `127.0.0.1:${await freePort()}`,
        { watch: { everyMs: 250, judgeEverySeconds: 1, workloadPeriodSeconds: 6 } },
      );
      person = await PersonClient.login(service.url, 'admin', ADMIN_PASSWORD);
    });
    after(async () => {
      await service?.close();
      await store?.dispose();
    });

    const fleetEntry = async (databaseId: string) =>
      (await person.get<FleetJson>('/api/manage/fleet')).body.databases.find((d) => d.id === databaseId)!;
    const eventCodes = async (databaseId: string) =>
      (await person.get<{ events: Array<{ code: string; message: string }> }>(`/api/manage/databases/${databaseId}/events?limit=100`)).body
        .events;

    test('kept → holding → the gain goes: one signed kept_gain_gone, shown, never reverted; then workload_changed names the new statements', async () => {
      const metricsUrl = `${service.url}/metrics`;
      const before = await scrape(metricsUrl, METRICS_TOKEN);
      assert.equal(before.types.get('tuner_service_kept_watch'), 'gauge');
      assert.equal(before.value('tuner_service_kept_watch', { state: 'gone' }), 0);
      assert.equal(before.value('tuner_service_watch_events_total', { kind: 'kept_gain_gone' }), 0);
      assert.equal(before.value('tuner_service_workload_changed'), 0);
      const { databaseId, apiKey } = await person.createDatabase('watched', 'local');
      const organizationHook = await person.post('/api/manage/webhooks', {
        url: `${hook.replace(/\/hook$/, '/org-hook')}`,
        secret: ORGANIZATION_SECRET,
      });
      assert.equal(organizationHook.status, 201);
      // This database's deliveries (the receiver serves both storages' services), to the
      // service-wide webhook and to the organization's.
      const ours = (path = '/hook') => deliveries.filter((d) => d.path === path && parsed(d).database.id === databaseId);
      const agent = new SimulatedAgent(service.url, databaseId, apiKey);
      await agent.start();
      await agent.report();
      agent.noise = 0.02;
      const started = await startTuningSession(person, databaseId, {
        iterations: 4,
        windowSeconds: 2,
        warmupSeconds: 0,
        seed: 7,
        requireApproval: false,
      });
      const stateOf = async () => (await getTuningSession(person, databaseId, started.id)).session.state;
      await agent.runUntil('the session keeps its configuration', async () => (await stateOf()) === 'done', { timeoutMs: 120_000 });
      const kept = (await getTuningSession(person, databaseId, started.id)).session;
      assert.equal(kept.verification?.decision, 'recommend', kept.message ?? '');
      const keptWorkMem = agent.knownGood.get('work_mem');
      assert.notEqual(keptWorkMem, agent.baseline.get('work_mem'), 'work_mem was kept changed');

      // While the gain holds: measuring, then holding, and nothing sent.
      await agent.runUntil('the watch holds', async () => (await fleetEntry(databaseId)).watch === 'holding', { timeoutMs: 30_000 });
      for (let i = 0; i < 20; i++) {
        await sleep(200);
        await agent.report();
      }
      assert.equal((await fleetEntry(databaseId)).watch, 'holding', 'still holding while the kept level holds');
      assert.equal(ours().length, 0, 'nothing sent while the gain holds');

      // The gain disappears: the workload runs at the baseline's speed whatever the settings.
      const baselineFactor = runtimeFactor(agent.baseline);
      agent.effect = () => baselineFactor;
      let reportsAfter = 0;
      await agent.runUntil(
        'the watch says gone',
        async () => {
          reportsAfter++;
          return (await fleetEntry(databaseId)).watch === 'gone';
        },
        { timeoutMs: 60_000 },
      );
      // A run of 4 windows of 2 s at 5 reports a second, and the ticker's delay: well under 100 reports.
      assert.ok(reportsAfter < 100, `${reportsAfter} reports after the change`);
      const entry = await fleetEntry(databaseId);
      assert.ok(entry.states.includes('gain_gone'), JSON.stringify(entry.states));
      const gone = (await eventCodes(databaseId)).filter((e) => e.code === 'kept_gain_gone');
      assert.equal(gone.length, 1);
      assert.match(gone[0]!.message, /gain is gone.*does not revert by itself/);
      // The dashboard lists it among the database's events.
      const page = await fetch(`${service.url}/databases/${databaseId}`, { headers: { cookie: person.cookie } });
      assert.equal(page.status, 200);
      assert.match(await page.text(), /kept_gain_gone/);

      // The webhook: one delivery, signed with the secret, for this database.
      const deadline = Date.now() + 10_000;
      while (ours().length === 0 && Date.now() < deadline) await sleep(100);
      for (let i = 0; i < 10; i++) {
        await sleep(200);
        await agent.report();
      }
      const gains = ours().filter((d) => parsed(d).kind === 'kept_gain_gone');
      assert.equal(gains.length, 1, 'sent once');
      const [delivery] = gains;
      assert.deepEqual(
        verifyWebhookSignature({ secret: SECRET, header: String(delivery!.headers['tuner-signature']), body: delivery!.body }).ok,
        true,
        'the signature checks',
      );
      assert.equal(parsed(delivery!).database.id, databaseId);
      assert.equal(delivery!.headers['tuner-event-id'], parsed(delivery!).id);
      // The organization's webhook: the same event, signed with its own secret.
      const toOrganization = ours('/org-hook');
      assert.deepEqual(
        toOrganization.map((d) => [d.body, d.headers['tuner-event-id']]),
        [[delivery!.body, parsed(delivery!).id]],
      );
      assert.equal(
        verifyWebhookSignature({
          secret: ORGANIZATION_SECRET,
          header: String(toOrganization[0]!.headers['tuner-signature']),
          body: delivery!.body,
        }).ok,
        true,
        "signed with the organization's secret",
      );
      assert.equal((await eventCodes(databaseId)).filter((e) => e.code === 'kept_gain_gone').length, 1, 'raised once');
      assert.equal(agent.knownGood.get('work_mem'), keptWorkMem, 'the watch did not revert the kept configuration');
      assert.ok(!agent.received.some((c) => c.kind === 'revert' && c.to === 'baseline'), 'no revert was sent');

      // The mix changes: the next period's comparison names the statements that appeared.
      agent.mixShifted = true;
      await agent.runUntil('the workload changes', async () => (await fleetEntry(databaseId)).workloadChange !== null, {
        timeoutMs: 60_000,
      });
      const changed = (await eventCodes(databaseId)).filter((e) => e.code === 'workload_changed');
      assert.equal(changed.length, 1);
      // The shifted statements' query ids end in 9 (sessions-agent.ts). The period that saw the
      // change may still hold most calls of the old ones: then the old ones' weight moved, or the
      // new ones appeared under the 5 % mark; either way the event names what moved most.
      assert.match(changed[0]!.message, /: (appeared: statement \S+9:t|changed weight: statement|vanished: statement)/);
      const wDeadline = Date.now() + 10_000;
      while (!ours().some((d) => parsed(d).kind === 'workload_changed') && Date.now() < wDeadline) await sleep(100);
      assert.equal(ours().filter((d) => parsed(d).kind === 'workload_changed').length, 1);
      const oDeadline = Date.now() + 10_000;
      while (ours('/org-hook').length < 2 && Date.now() < oDeadline) await sleep(100);
      assert.deepEqual(
        ours('/org-hook').map((d) => parsed(d).kind),
        ['kept_gain_gone', 'workload_changed'],
      );

      const after = await scrape(metricsUrl, METRICS_TOKEN);
      assert.equal(after.value('tuner_service_kept_watch', { state: 'gone' }), 1);
      assert.equal(after.value('tuner_service_kept_watch', { state: 'holding' }), 0);
      assert.equal(after.value('tuner_service_workload_changed'), 1);
      assert.equal(after.value('tuner_service_watch_events_total', { kind: 'kept_gain_gone' }), 1);
      assert.equal(after.value('tuner_service_watch_events_total', { kind: 'workload_changed' }), 1);
      assert.ok(!service.logs.some((line) => line.includes(SECRET) || line.includes(ORGANIZATION_SECRET)), 'the secrets are never logged');
    });
  });
}

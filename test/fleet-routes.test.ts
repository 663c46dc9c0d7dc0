// The fleet through the running service: GET /fleet (the page) and GET /api/manage/fleet (the
// same answer as JSON), behind the login like every page and route of the people's API; the
// advice pending, as the service's own refresh stores it after an agent's reports.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { FleetViewSchema } from '../src/service/fleet/views.ts';
import { ADMIN_PASSWORD, PersonClient } from './helpers/service.ts';
import { until } from './helpers/until.ts';
import { scrape } from './helpers/prometheus.ts';
import { reportingAgent } from './sessions-agent.ts';
import { startAdminService, type AdminService } from './helpers/service-admin.ts';

let lab: AdminService;
let url = '';
const METRICS_TOKEN = 'fleet-routes-metrics-token-0123456789';

before(async () => {
  // The advice's refresh looks every 200 ms, and computes a database again after a second.
  lab = await startAdminService('pglite', {
    env: { TUNER_METRICS_TOKEN: METRICS_TOKEN },
    start: { advice: { everyMs: 200, everySeconds: 1 } },
  });
  url = lab.service.url;
});
after(() => lab?.close());

test('the fleet API lists the account databases with their states, sorted and filtered as asked', async () => {
  const person = await PersonClient.login(url, 'admin', ADMIN_PASSWORD);
  for (const name of ['orders', 'billing', 'reports']) await person.createDatabase(name);

  const all = await person.get('/api/manage/fleet?sort=name');
  assert.equal(all.status, 200);
  const view = FleetViewSchema.parse(all.body);
  assert.equal(view.total, 3);
  assert.deepEqual(
    view.databases.map((d) => d.name),
    ['billing', 'orders', 'reports'],
  );
  assert.ok(view.databases.every((d) => d.states[0] === 'no_agent'));

  const filtered = FleetViewSchema.parse((await person.get('/api/manage/fleet?q=ORD')).body);
  assert.deepEqual(
    filtered.databases.map((d) => d.name),
    ['orders'],
  );
  assert.equal(filtered.total, 3, 'the counts are the whole account, before the filter');

  const bad = await person.get<{ error: { code: string; message: string } }>('/api/manage/fleet?sort=size');
  assert.equal(bad.status, 400);
  assert.match(bad.body.error.message, /sort/);
});

test('the fleet page answers behind the login, with the same databases', async () => {
  const person = await PersonClient.login(url, 'admin', ADMIN_PASSWORD);
  const page = await person.request<string>('GET', '/fleet?state=no_agent');
  assert.equal(page.status, 200);
  for (const name of ['orders', 'billing', 'reports']) assert.ok(page.body.includes(name), `the page names ${name}`);

  const anonymous = await fetch(`${url}/fleet`, { redirect: 'manual' });
  assert.ok([302, 303, 401].includes(anonymous.status), `an anonymous visit is not served the fleet (${anonymous.status})`);
  const anonymousApi = await fetch(`${url}/api/manage/fleet`);
  assert.equal(anonymousApi.status, 401);
});

test('advice pending: the service computes it after the reports arrive; the fleet shows it for the agent whose statements spill', async () => {
  const person = await PersonClient.login(url, 'admin', ADMIN_PASSWORD);
  const spills = await reportingAgent(person, url, 'spills', { spills: true });
  const calm = await reportingAgent(person, url, 'calm', { spills: false });
  const fleet = async () => FleetViewSchema.parse((await person.get('/api/manage/fleet?sort=name')).body);
  const shown = await until(
    'the fleet shows the advice',
    async () => (await fleet()).databases.find((d) => d.id === spills.databaseId && d.advice !== null),
    30_000,
    200,
  );
  assert.deepEqual([shown.advice?.findings, shown.advice?.parameters, shown.states[0]], [['temp-files'], ['work_mem'], 'advice']);
  // The other agent's reports were read too (no longer due: its advice is stored), and argue for nothing.
  await until('the calm database computed', async () =>
    (await lab.service.storage.adviceDue(3600, 3600, 10)).every((d) => d.databaseId !== calm.databaseId),
  );
  const page = await person.request<string>('GET', '/fleet?state=advice');
  assert.equal(page.status, 200);
  assert.ok(page.body.includes('advice pending') && page.body.includes('spills'));
  assert.ok(!page.body.includes('>calm<'), 'the calm database is not among those with advice');
  const after = await fleet();
  assert.equal(after.databases.find((d) => d.id === calm.databaseId)?.advice, null);
  assert.equal(after.counts.advice, 1);
  // The metrics count it the same way (an alert rule can fire on it); the outbox is empty (no webhook).
  const metrics = await scrape(`${url}/metrics`, METRICS_TOKEN);
  assert.equal(metrics.value('tuner_service_advice_pending'), 1);
  assert.equal(metrics.value('tuner_service_webhook_events', { state: 'pending' }), 0);
});

// The fleet through the running service: GET /fleet (the page) and GET /api/manage/fleet (the
// same answer as JSON), behind the login like every page and route of the people's API.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { FleetViewSchema } from '../src/service/fleet/views.ts';
import { ADMIN_PASSWORD, PersonClient } from './helpers/service.ts';
import { startAdminService, type AdminService } from './helpers/service-admin.ts';

let lab: AdminService;
let url = '';

before(async () => {
  lab = await startAdminService('pglite');
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

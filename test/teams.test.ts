// An organization of several people, over real HTTP and in Chromium: the admin adds people with a
// role; they all see the organization's databases; a viewer's start of a tuning session is refused
// (403, naming the role it needs) on the API and the page, an operator's succeeds on both; bad
// input (an unknown role, the last admin demoting or removing themself) is refused clearly.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { dashboardInChromium, logInOnPage, skipWithoutChromium } from './helpers/browser.ts';
import { PersonClient, assertClientError } from './helpers/service.ts';
import { SimulatedAgent } from './sessions-agent.ts';

const skip = skipWithoutChromium;
const web = dashboardInChromium({ page: { expectedStatuses: [403] } });

interface UserJson {
  id: string;
  username: string;
  role: string;
  isAdmin: boolean;
}

async function addPerson(admin: PersonClient, serviceUrl: string, username: string, role: string) {
  const password = `${username}-password-1`;
  const created = await admin.post<{ user: UserJson }>('/api/manage/users', { username, password, role });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  assert.equal(created.body.user.role, role);
  return { user: created.body.user, password, client: await PersonClient.login(serviceUrl, username, password) };
}

test(
  'people of one organization see the same databases; a viewer cannot start a tuning session, an operator can',
  { skip, timeout: 120_000 },
  async () => {
    const { page, problems, lab } = web;
    const { service, admin } = lab;
    const viewer = await addPerson(admin, service.url, 'viewer-vic', 'viewer');
    const operator = await addPerson(admin, service.url, 'operator-olga', 'operator');

    const { databaseId, apiKey } = await admin.createDatabase('shared-db');
    const ids = async (person: PersonClient) =>
      (await person.get<{ databases: Array<{ id: string }> }>('/api/manage/databases')).body.databases.map((d) => d.id);
    assert.deepEqual(await ids(viewer.client), [databaseId], 'the viewer sees the database the admin added');
    assert.deepEqual(await ids(operator.client), [databaseId], 'so does the operator');

    const agent = new SimulatedAgent(service.url, databaseId, apiKey);
    await agent.start();
    await agent.report();
    const start = { windowSeconds: 2, warmupSeconds: 0, iterations: 3 };
    const path = `/api/manage/databases/${databaseId}/tuning-sessions`;

    // The API.
    assertClientError(
      await viewer.client.post(path, start),
      403,
      'forbidden',
      /only an operator or an admin can start tuning sessions: your role is viewer/,
    );
    assertClientError(
      await viewer.client.post(`/api/manage/databases/${databaseId}/keys`, {}),
      403,
      'forbidden',
      /only an admin can make API keys/,
    );
    const started = await operator.client.post<{ session: { id: string } }>(path, start);
    assert.equal(started.status, 201, JSON.stringify(started.body));
    assertClientError(await viewer.client.post(`${path}/${started.body.session.id}/stop`), 403, 'forbidden', /operator/);
    assert.equal((await operator.client.post(`${path}/${started.body.session.id}/stop`)).status, 200);

    // The page: the viewer's form is refused with the role it needs, the operator's starts a session.
    const submitStart = async () => {
      const answered = page.waitForResponse(
        (r) => r.request().method() === 'POST' && r.url().endsWith(`/databases/${databaseId}/tuning-sessions`),
      );
      await page.fill('#session-start input[name=windowSeconds]', '2');
      await page.fill('#session-start input[name=warmupSeconds]', '0');
      await page.click('#session-start button[type=submit]');
      return (await answered).status();
    };
    await logInOnPage(page, service.url, { username: viewer.user.username, password: viewer.password });
    await page.goto(`${service.url}/databases/${databaseId}`);
    assert.equal(await submitStart(), 403);
    assert.match(
      (await page.textContent('.notice.bad')) ?? '',
      /only an operator or an admin can start tuning sessions: your role is viewer/,
    );
    assert.equal(await page.$('nav a[href="/users"]'), null, 'the people page is for admins');

    await page.click('form[action="/logout"] button');
    await page.waitForURL(`${service.url}/login`);
    await logInOnPage(page, service.url, { username: operator.user.username, password: operator.password });
    await page.goto(`${service.url}/databases/${databaseId}`);
    assert.equal(await submitStart(), 303);
    await page.waitForSelector('.notice.ok');
    assert.equal(await page.getAttribute('#session-state', 'data-state'), 'baseline');
    assert.deepEqual(problems, []);
  },
);

test("the people's API: roles, bad input, the last admin", { skip }, async () => {
  const { lab } = web;
  const { service, admin } = lab;
  const users = async () => (await admin.get<{ users: UserJson[] }>('/api/manage/users')).body.users;
  const adminId = (await users()).find((u) => u.username === 'admin')!.id;

  assertClientError(
    await admin.post('/api/manage/users', { username: 'carol', role: 'owner' }),
    400,
    'bad_request',
    /body\.role: expected one of viewer, operator, admin/,
  );
  assertClientError(await admin.patch(`/api/manage/users/${adminId}`, { role: 'root' }), 400, 'bad_request', 'body.role');
  assertClientError(await admin.patch(`/api/manage/users/${adminId}`, {}), 400, 'bad_request', 'body.role');
  assertClientError(
    await admin.post('/api/manage/users', { username: 'carol', role: 'viewer', isAdmin: true }),
    400,
    'bad_request',
    'body.isAdmin',
  );
  // The last admin can neither step down nor leave.
  assertClientError(await admin.patch(`/api/manage/users/${adminId}`, { role: 'viewer' }), 409, 'conflict', /last admin/);
  assertClientError(await admin.delete(`/api/manage/users/${adminId}`), 409, 'conflict', /last admin/);

  // isAdmin, for one release: role admin; once there are two admins, one may step down.
  const legacy = await admin.post<{ user: UserJson }>('/api/manage/users', {
    username: 'legacy-admin',
    password: 'legacy-password-1',
    isAdmin: true,
  });
  assert.equal(legacy.status, 201, JSON.stringify(legacy.body));
  assert.deepEqual([legacy.body.user.role, legacy.body.user.isAdmin], ['admin', true]);
  const second = await PersonClient.login(service.url, 'legacy-admin', 'legacy-password-1');
  const demoted = await second.patch<{ user: UserJson }>(`/api/manage/users/${adminId}`, { role: 'operator' });
  assert.equal(demoted.status, 200, JSON.stringify(demoted.body));
  assert.equal(demoted.body.user.role, 'operator');
  assertClientError(
    await admin.post('/api/manage/users', { username: 'dave', role: 'viewer' }),
    403,
    'forbidden',
    /only an admin can add people: your role is operator/,
  );
  assertClientError(await admin.get('/api/manage/users'), 403, 'forbidden', 'admin');
  assert.equal((await second.patch(`/api/manage/users/${adminId}`, { role: 'admin' })).status, 200);
  assert.equal((await admin.delete(`/api/manage/users/${legacy.body.user.id}`)).status, 204);
  assertClientError(await second.get('/api/manage/login'), 401, 'unauthorized');
  assert.deepEqual(
    (await users()).map((u) => u.username).filter((n) => n === 'legacy-admin'),
    [],
  );
});

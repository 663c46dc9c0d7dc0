// The people's API names the login session `/api/manage/login` (GET: who is logged in, DELETE:
// log out); `GET /api/manage/session`, its former name, answers alike for one more release.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ADMIN_PASSWORD, PersonClient } from './helpers/service.ts';
import { startAdminService, type AdminService } from './helpers/service-admin.ts';

let lab: AdminService;
let url = '';

before(async () => {
  lab = await startAdminService('pglite');
  url = lab.service.url;
});
after(() => lab?.close());

test('GET /api/manage/login and its alias /api/manage/session answer alike, logged in or not', async () => {
  const person = await PersonClient.login(url, 'admin', ADMIN_PASSWORD);
  const login = await person.get<{ user: { username: string; isAdmin: boolean }; csrfToken: string }>('/api/manage/login');
  const alias = await person.get('/api/manage/session');
  assert.equal(login.status, 200);
  assert.equal(login.body.user.username, 'admin');
  assert.equal(login.body.csrfToken, person.csrfToken);
  assert.deepEqual([alias.status, alias.body], [login.status, login.body]);

  const stranger = new PersonClient(url);
  const refused = await stranger.get('/api/manage/login');
  const refusedAlias = await stranger.get('/api/manage/session');
  assert.equal(refused.status, 401);
  assert.deepEqual([refusedAlias.status, refusedAlias.body], [refused.status, refused.body]);
});

test('DELETE /api/manage/login logs out (with the CSRF token, as every change)', async () => {
  const person = await PersonClient.login(url, 'admin', ADMIN_PASSWORD);
  const token = person.csrfToken;
  person.csrfToken = '';
  assert.equal((await person.request('DELETE', '/api/manage/login')).status, 403, 'no CSRF token');
  person.csrfToken = token;
  const cookie = person.cookie;
  assert.equal((await person.request('DELETE', '/api/manage/login')).status, 204);
  // The old cookie, sent again, opens nothing: the login session is gone from the storage.
  person.cookie = cookie;
  assert.equal((await person.get('/api/manage/login')).status, 401);
  assert.equal((await person.get('/api/manage/session')).status, 401);
});

// The pages in headless Chromium, as a person uses them: log in, create a database and its key,
// copy agent.yaml, watch the dashboard as a simulated agent connects and reports, issue a command.
// Screenshots go to $TUNER_SCREENSHOT_DIR (default: a temp directory) for a look.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import YAML from 'yaml';
import { ReportResponseSchema } from '../src/protocol/v1.ts';
import { SCREENSHOTS, dashboardInChromium, skipWithoutChromium } from './helpers/browser.ts';
import { ADMIN_PASSWORD, AgentClient } from './helpers/service.ts';
import { reportRequest, sampleMetrics, startRequest } from './helpers/service-reports.ts';

const skip = skipWithoutChromium;

// Forms posted wrong on purpose answer 400, 401 and 403.
const web = dashboardInChromium({ storage: 'pglite', service: { fakeDownloads: true }, page: { expectedStatuses: [400, 401, 403] } });

test('log in, create a database and a key, copy agent.yaml, see the agent report on the dashboard', { skip }, async () => {
  const { page, problems, lab } = web;
  const { service } = lab;
  await page.goto(`${service.url}/`);
  assert.match(page.url(), /\/login$/, 'a page needs a login');
  await page.fill('input[name=username]', 'admin');
  await page.fill('input[name=password]', 'not the password');
  await page.click('button[type=submit]');
  assert.match((await page.textContent('[role=alert]')) ?? '', /wrong username or password/);
  await page.fill('input[name=password]', ADMIN_PASSWORD);
  await page.click('button[type=submit]');
  await page.waitForURL(`${service.url}/`);
  // The home page is the fleet; databases are added from their list.
  assert.match((await page.textContent('h1')) ?? '', /Fleet/);
  await page.click('nav a[href="/databases"]');
  assert.match((await page.textContent('h1')) ?? '', /Databases/);

  // A hostile name is shown as text, never run.
  await page.fill('input[name=name]', 'orders <script>alert(1)</script>');
  await page.selectOption('select[name=target]', 'managed-a');
  await page.click('button:has-text("Create database and API key")');
  await page.waitForSelector('#agent-yaml');
  assert.match((await page.textContent('h1')) ?? '', /orders <script>alert\(1\)<\/script>/);
  assert.ok((await page.content()).includes('orders &lt;script&gt;'), 'escaped in the markup');

  const apiKey = (await page.textContent('#api-key'))!.trim();
  const databaseId = (await page.textContent('#database-id'))!.trim();
  assert.match(apiKey, /^tuner_[A-Za-z0-9_-]{43}$/);
  const config = YAML.parse((await page.textContent('#agent-yaml'))!) as Record<string, Record<string, unknown>>;
  assert.equal(config['tuner']?.['api_key'], apiKey);
  assert.equal(config['tuner']?.['database_id'], databaseId);
  assert.equal(config['tuner']?.['server_url'], service.url);
  assert.equal(config['managed_a']?.['REGION'], '<REGION>');
  assert.equal(
    config['postgresql']?.['connection_url'],
    'postgresql://agent_user:<AGENT_USER_PASSWORD>@<INSTANCE_ENDPOINT>:5432/<DBNAME>?sslmode=verify-full',
  );
  const container = (await page.textContent('#container-command'))!;
  assert.ok(container.includes(`-e AGENT_TUNER_API_KEY=${apiKey}`), container);
  assert.match(container, /--managed-a\n$/);
  const binary = (await page.textContent('#binary-command'))!;
  assert.match(binary, /\.\/tuner-agent --managed-a\n/);
  assert.ok(binary.includes(`curl -fsSL ${service.url}/install.sh > /tmp/agent-installer.sh && sh /tmp/agent-installer.sh\n`), binary);
  assert.equal(await page.textContent('#binary-targets'), 'linux-x64');
  const task = JSON.parse((await page.textContent('#ecs-task-definition'))!) as { containerDefinitions: { command: string[] }[] };
  assert.deepEqual(task.containerDefinitions[0]?.command, ['--managed-a']);
  assert.match((await page.textContent('#database-sql'))!, /GRANT pg_monitor TO agent_user;/);
  await page.screenshot({ path: join(SCREENSHOTS, 'setup.png'), fullPage: true });

  // The key is shown once: the setup page shows a placeholder afterwards.
  await page.goto(`${service.url}/databases/${databaseId}/setup`);
  assert.equal(await page.$('#api-key'), null);
  assert.ok(!(await page.content()).includes(apiKey));
  assert.equal((YAML.parse((await page.textContent('#agent-yaml'))!) as { tuner: { api_key: string } }).tuner.api_key, '<API_KEY>');

  await page.goto(`${service.url}/databases/${databaseId}`);
  assert.match((await page.textContent('.card')) ?? '', /No agent has connected yet/);

  // A simulated agent with the key from the page connects and reports.
  const agent = new AgentClient(service.url, databaseId, apiKey);
  const start = await agent.start(startRequest({ target: 'managed-a', hostname: 'ip-10-0-3-17' }), { gzip: true });
  assert.equal(start.status, 200, JSON.stringify(start.body));
  const { leaseId } = start.body as { leaseId: string };
  const metrics = sampleMetrics({ topStatements: 100, avgQueryRuntimeMs: 0.412, tps: 1234.5 });
  // In a quoted identifier: the redaction keeps those (a comment would go empty).
  metrics.statements.top[0]!.text = 'SELECT * FROM "<img src=x onerror=alert(2)>" WHERE x = $1';
  for (let seq = 0; seq < 12; seq++) {
    const m = sampleMetrics({ topStatements: 100, avgQueryRuntimeMs: 0.5 - seq * 0.01 + (seq % 3) * 0.02, tps: 1100 + seq * 12 });
    const response = await agent.report(reportRequest(leaseId, seq, { metrics: seq === 11 ? metrics : m }), { gzip: true });
    assert.equal(response.status, 200);
  }

  await page.reload();
  assert.equal((await page.textContent('.badge.ok'))?.trim(), 'connected');
  assert.equal((await page.textContent('#metric-avg-runtime'))?.trim(), '0.412 ms');
  assert.equal((await page.textContent('#metric-tps'))?.trim(), '1,234.5');
  // The throughput is pg_stat_statements' top-level calls over the interval (issue 31 part 5).
  const calls = metrics.derived.calls;
  assert.equal(
    (await page.textContent('#metric-statements-per-second'))?.trim(),
    (calls / 60).toLocaleString('en-US', { maximumFractionDigits: 1, minimumFractionDigits: 1 }),
  );
  assert.match((await page.textContent('.tiles')) ?? '', /statements\/s \(pg_stat_statements\)/);
  // …with its trend over the recent reports, as the other tiles.
  assert.equal(await page.locator('svg[aria-label^="statements per second (pg_stat_statements)"] polyline').count(), 1);
  assert.equal((await page.textContent('#metric-cache-hit'))?.trim(), '99.31 %');
  assert.equal((await page.textContent('#metric-connections'))?.trim(), '12 / 100');
  assert.equal(await page.locator('#top-statements tbody tr').count(), 25);
  assert.ok((await page.textContent('#top-statements'))?.includes('<img src=x onerror=alert(2)>'), 'query text shown as text');
  assert.match((await page.textContent('.kv')) ?? '', /ip-10-0-3-17/);
  assert.ok((await page.textContent('#settings'))?.includes('work_mem'));

  // Issue a command from the dashboard; the agent gets it with its next report.
  await page.selectOption('#command-kind', 'apply');
  await page.fill('textarea[name=values]', 'work_mem=64MB\nrandom_page_cost = 1.1');
  await page.check('input[name=keep]');
  await page.click('button:has-text("Send to the agent")');
  await page.waitForSelector('.notice.ok');
  assert.match((await page.textContent('#commands')) ?? '', /pending/);
  const next = ReportResponseSchema.parse((await agent.report(reportRequest(leaseId, 12), { gzip: true })).body);
  assert.deepEqual(next.command && next.command.kind === 'apply' ? next.command.values : null, {
    work_mem: '64MB',
    random_page_cost: '1.1',
  });
  const ack = await agent.ack(next.command!.id, {
    leaseId,
    status: 'applied',
    effective: { work_mem: '65536', random_page_cost: '1.1' },
    errors: [],
    restarted: false,
    restored: false,
  });
  assert.equal(ack.status, 204);

  // A bad value list is refused with the field named, nothing queued.
  await page.reload();
  await page.selectOption('#command-kind', 'apply');
  await page.fill('textarea[name=values]', 'Work-Mem=1');
  await page.click('button:has-text("Send to the agent")');
  assert.match((await page.textContent('.notice.bad')) ?? '', /form\.values/);

  await page.goto(`${service.url}/databases/${databaseId}`);
  assert.match((await page.textContent('#commands')) ?? '', /applied/);
  assert.match((await page.textContent('#commands')) ?? '', /work_mem = 65536/);
  await page.screenshot({ path: join(SCREENSHOTS, 'dashboard.png'), fullPage: true });

  await page.goto(`${service.url}/databases`);
  assert.match((await page.textContent('table')) ?? '', /connected/);
  await page.screenshot({ path: join(SCREENSHOTS, 'databases.png'), fullPage: true });
  assert.deepEqual(problems, [], 'no script error, CSP violation or dialog');
  console.log(`screenshots in ${SCREENSHOTS}`);
});

test('the admin adds a viewer to the organization, who sees its databases and cannot manage people', { skip }, async () => {
  const {
    page,
    problems,
    browser,
    lab: { service },
  } = web;
  await page.goto(`${service.url}/users`);
  await page.fill('input[name=username]', 'bob');
  await page.selectOption('form[action="/users"] select[name=role]', 'viewer');
  await page.click('form[action="/users"] button[type=submit]');
  await page.screenshot({ path: join(SCREENSHOTS, 'users.png'), fullPage: true });
  const password = (await page.textContent('#new-password'))!.trim();
  assert.match(password, /^[A-Za-z0-9_-]{22}$/);

  const context = await browser.newContext();
  const bobPage = await context.newPage();
  await bobPage.goto(`${service.url}/login`);
  await bobPage.fill('input[name=username]', 'bob');
  await bobPage.fill('input[name=password]', password);
  await bobPage.click('button[type=submit]');
  await bobPage.waitForURL(`${service.url}/`);
  // One organization: the database the admin created in the first test is bob's to see too.
  assert.doesNotMatch((await bobPage.textContent('#main, main, body')) ?? '', /No database yet/);
  assert.ok((await bobPage.$$('a[href^="/databases/"]')).length > 0, "the organization's database is listed");
  assert.equal(await bobPage.$('a[href="/users"]'), null, 'no people admin for a viewer');
  const response = await bobPage.goto(`${service.url}/users`);
  assert.equal(response?.status(), 403);

  // A form posted without the session's CSRF token is refused.
  const forged = await bobPage.request.post(`${service.url}/databases`, { form: { name: 'forged', target: 'local' } });
  assert.equal(forged.status(), 403);
  await context.close();
  assert.deepEqual(problems, []);
});

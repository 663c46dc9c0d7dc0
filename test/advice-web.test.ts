// The dashboard's advice in headless Chromium: a database whose reports show temporary files
// shows the work_mem advice with its figures and the statement behind it; its button submits the
// start form with the marker, and the session it starts tries that diagnosis first. Screenshots go
// to $TUNER_SCREENSHOT_DIR (default: a temp directory) for a look.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { SCREENSHOTS, dashboardInChromium, logInOnPage, skipWithoutChromium } from './helpers/browser.ts';
import { getTuningSession, isTrialJson, reportingAgent } from './sessions-agent.ts';

const skip = skipWithoutChromium;

const web = dashboardInChromium({ storage: 'pglite', page: { expectedStatuses: [] } });

test(
  'the advice names work_mem with its evidence; its button starts a session that tries it first',
  { skip, timeout: 120_000 },
  async () => {
    const { page, problems, lab } = web;
    const { service } = lab;
    const { databaseId, agent } = await reportingAgent(lab.admin, service.url, 'spilling-db', { spills: true });

    await logInOnPage(page, service.url);
    await page.goto(`${service.url}/databases/${databaseId}`);

    const item = page.locator('#advice .advice-item[data-finding="temp-files"]');
    assert.equal(await item.count(), 1);
    assert.match((await item.locator('.advice-change').textContent()) ?? '', /work_mem\s+raise\s+4MB → \d+MB/);
    const text = (await item.textContent()) ?? '';
    assert.match(text, /temporary files written per minute/);
    assert.match(text, /queryid/, 'the statement behind it');
    await page.screenshot({ path: join(SCREENSHOTS, 'advice.png'), fullPage: true });

    // The start form's own settings, then the advice's button.
    agent.spills = false;
    await page.fill('#session-start input[name=iterations]', '2');
    await page.fill('#session-start input[name=windowSeconds]', '2');
    await page.fill('#session-start input[name=warmupSeconds]', '0');
    await page.click('#advice-start');
    await page.waitForURL(/done=session-started/);
    assert.equal(await page.locator('#advice').count(), 0, 'no advice while a session runs');
    assert.match((await page.textContent('#session-from-advice')) ?? '', /temp-files/);

    const [session] = (
      await lab.admin.get<{ sessions: Array<{ id: string; windowSeconds: number; requireApproval: boolean }> }>(
        `/api/manage/databases/${databaseId}/tuning-sessions`,
      )
    ).body.sessions;
    assert.ok(session);
    assert.equal(session.windowSeconds, 2, 'the start form’s settings');
    assert.equal(session.requireApproval, true);
    await agent.runUntil('the first trial', async () =>
      (await getTuningSession(lab.admin, databaseId, session.id)).iterations.some(isTrialJson),
    );
    const first = (await getTuningSession(lab.admin, databaseId, session.id)).iterations.find(isTrialJson)!;
    assert.equal(first.kind, 'diagnosis');
    assert.match(first.reason, /temporary files per minute.*work_mem/);
    assert.deepEqual(problems, []);
  },
);

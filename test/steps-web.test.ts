// The dashboard's verified steps (issue #30, part 2) in headless Chromium: a session whose
// simulated workload runs three times faster once work_mem is raised verifies that trial at once
// as step 1; the page lists the step with the iteration it came from, its diff, its interval and
// "waiting for approval", says the verification shown is the step's, and offers to keep it;
// approved on the page, the step is "kept", marked as the known-good configuration from the window
// after it, and the chart marks where. Screenshots go to $TUNER_SCREENSHOT_DIR.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { SCREENSHOTS, dashboardInChromium, logInOnPage, skipWithoutChromium } from './helpers/browser.ts';
import { SimulatedAgent, getTuningSession, startTuningSession } from './sessions-agent.ts';

const skip = skipWithoutChromium;

/** As in sessions-steps.test.ts: the mix runs three times faster once work_mem is above its default. */
const workMemWins = (settings: ReadonlyMap<string, string>) => (Number(settings.get('work_mem') ?? 4096) > 4096 ? 0.33 : 1);

// The stop button asks first.
const web = dashboardInChromium({ storage: 'pglite', page: { expectedStatuses: [], dialogs: 'accept' } });

const text = async (selector: string) => (await web.page.textContent(selector)) ?? '';

test('a verified step on the dashboard: waiting for approval, approved on the page, then kept', { skip, timeout: 240_000 }, async () => {
  const { page, problems, lab } = web;
  const { service, admin: person } = lab;
  const { databaseId, apiKey } = await person.createDatabase('steps-db', 'local');
  const agent = new SimulatedAgent(service.url, databaseId, apiKey);
  agent.noise = 0.03;
  agent.effect = workMemWins;
  agent.spills = true;
  await agent.start();
  await agent.report();
  const started = await startTuningSession(person, databaseId, { iterations: 6, windowSeconds: 2, warmupSeconds: 0, seed: 7 });
  const sessionOf = () => getTuningSession(person, databaseId, started.id);

  // Real-time windows: about half a minute alone; the bound is for a hang, not for speed.
  await agent.runUntil('a step waiting for approval', async () => (await sessionOf()).session.state === 'awaiting_approval', {
    timeoutMs: 180_000,
  });
  const waiting = (await sessionOf()).session;
  const step = waiting.steps[0]!;
  assert.equal(step?.outcome, 'awaiting_approval', JSON.stringify(waiting.steps));
  assert.ok(step.summary, 'the step has its figures');

  await logInOnPage(page, service.url);
  await page.goto(`${service.url}/databases/${databaseId}`);
  assert.equal(await page.getAttribute('#session-state', 'data-state'), 'awaiting_approval');
  assert.match(await text('#session-steps h3'), /^Verified steps$/);
  assert.equal(await page.locator('#session-steps li').count(), waiting.steps.length, 'one item per step');
  const item = '#session-step-1';
  assert.equal(await page.getAttribute(item, 'data-outcome'), 'awaiting_approval');
  const waitingText = await text(item);
  assert.match(waitingText, new RegExp(`^\\s*Step 1 from iteration ${step.iteration}, verified against the baseline`));
  assert.match(waitingText, /waiting for approval/);
  // Its interval as the API words it, on the page.
  assert.match(waitingText, /runtime −\d+(\.\d)? % \(95 % CI −[\d.]+ % to −[\d.]+ %\), throughput \(statements\/s\) .*, \d A\/B rounds/);
  assert.ok(waitingText.includes(step.summary), `${step.summary} in ${waitingText}`);
  assert.match(await text(`${item} .step-diff`), /work_mem 4MB → \d+MB/);
  assert.equal(await page.locator(`${item}.kept`).count(), 0, 'not the known-good yet');
  assert.doesNotMatch(waitingText, /known-good configuration from window/);
  // Its per-statement changes: every statement runs faster by the same factor here.
  assert.ok((await page.locator(`#session-step-1-statements tbody tr`).count()) >= 1, 'the per-statement changes');
  assert.match(await text('#session-step-1-statements'), /gain/);
  assert.match(await text(`${item} details > summary`), /^\d+ heavy statements?, \d+ with a gain$/);
  assert.equal(await page.locator('#session-statements').count(), 0, "the step's statements are shown once, with the step");
  // The verification shown is the step's, not the search's final one.
  assert.match(await text('#session .kv'), /Verification of step 1/);
  assert.match(
    await text('#session-verification-purpose'),
    /^step 1 \(below, with its statements\): a big win verified as soon as it was seen, against the baseline/,
  );
  assert.match(await text('#session-approve'), /^Approve and keep step 1$/);
  await page.locator('#session-steps').screenshot({ path: join(SCREENSHOTS, 'steps-awaiting-approval.png') });

  await page.click('#session-approve');
  await page.waitForSelector('.notice.ok');
  await agent.runUntil('the step kept', async () => (await sessionOf()).session.steps[0]?.outcome === 'kept');
  const keptAfter = (await sessionOf()).session.steps[0]!.keptAfter!;
  assert.ok(Number.isInteger(keptAfter));
  await page.reload();
  assert.equal(await page.getAttribute(item, 'data-outcome'), 'kept');
  assert.equal(await page.locator(`${item}.kept`).count(), 1, 'a kept step is marked as such');
  const keptText = await text(item);
  assert.match(keptText, /\bkept\b/);
  assert.doesNotMatch(keptText, /waiting for approval/);
  assert.match(keptText, new RegExp(`the known-good configuration from window ${keptAfter + 1} on`));
  assert.ok(keptText.includes(step.summary), 'the same figures once kept');
  assert.match(await text(`${item} .step-diff`), /work_mem 4MB → \d+MB/);
  assert.match(await text('#session-chart .kept-mark'), /^step 1 kept/);
  await page.locator('#tuning').screenshot({ path: join(SCREENSHOTS, 'steps-kept.png') });

  // Stopped, the session keeps its step on the page.
  await page.click('#session-stop');
  await page.waitForSelector('.notice.ok');
  assert.equal(await page.getAttribute('#session-state', 'data-state'), 'stopped');
  assert.equal(await page.getAttribute(item, 'data-outcome'), 'kept');
  assert.deepEqual(problems, [], 'no script error, CSP violation');
  console.log(`screenshots in ${SCREENSHOTS}`);
});
